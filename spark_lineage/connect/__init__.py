"""Spark Connect: lineage for the sessions a Connect server runs for its clients.

- :mod:`~spark_lineage.connect.identity`: what a client may set for its own lineage (an allowlist of
  ``spark.openlineage.*`` keys), and the settings a session's runs are built with;
- :mod:`~spark_lineage.connect.sessions`: a run per Connect session, the parent of its queries' runs;
- :mod:`~spark_lineage.connect.server`: ``spark-lineage connect-server``, a Spark Connect server in a Python
  driver with lineage on (a drop-in for Spark's ``sbin/start-connect-server.sh``).
- :mod:`~spark_lineage.connect.local`: the server PySpark starts inside a client's own process
  (``remote("local[N]")``), which ``enable()`` and the notebook magics turn lineage on for;
- :mod:`~spark_lineage.connect.client`: lineage from a client alone, for servers nobody lets you touch: what
  its requests read and write (no JVM, no py4j).

The queries themselves are heard by :mod:`spark_lineage.jvm.sessions` and analyzed as any other.
"""
