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
  client only sets its identity, and nothing is reported twice);
- :mod:`~spark_lineage.connect.client.tables`: where the tables it names live, asked of the server once each;
- :mod:`~spark_lineage.connect.client.jobs`: the job an action is reported as (the server side's name for it);
- :mod:`~spark_lineage.connect.client.tap`: the one place the client's own code is touched, where its actions
  are sent and their answers end;
- :mod:`~spark_lineage.connect.client.runtime`: the session's lineage around them (``enable()`` on a session
  of a server elsewhere starts it): a worker that reads, names and builds, and the driver's delivery.

Nothing here imports py4j.
"""
