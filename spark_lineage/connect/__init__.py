"""Spark Connect: lineage for the queries a Spark Connect server runs for its clients.

- :mod:`spark_lineage.connect.server`: ``spark-lineage connect-server``, a Spark Connect server in a Python
  driver with lineage on (a drop-in for Spark's ``sbin/start-connect-server.sh``).
"""
