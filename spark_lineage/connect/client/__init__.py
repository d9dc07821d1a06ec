"""Lineage from a Spark Connect client alone, for servers nobody lets you touch (issue 26).

A Connect client sends each action as an ``ExecutePlanRequest``: a write carries its format, path or table,
save method and mode, and its whole unresolved input tree; ``spark.sql`` carries its text. What the client can
know of lineage it reads from those protos, with no extra round trip and no JVM:

- :mod:`~spark_lineage.connect.client.requests`: a request as a :class:`~.requests.ClientAction` (what it
  reads, what it writes, its SQL), through protobuf's reflection;
- :mod:`~spark_lineage.connect.client.datasets`: the datasets an action names, through the same naming
  module as the driver side (a path, a JDBC table or a Kafka topic read on the client has the identity it has
  on the server), and the tables of SQL through openlineage-sql;
- :mod:`~spark_lineage.connect.client.servers`: whether the server reports its sessions itself (then the
  client only sets its identity, and nothing is reported twice).

Nothing here imports py4j.
"""
