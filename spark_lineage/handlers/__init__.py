"""Plan handlers, keyed by the simple class name of the Spark node (or object) they read.

- ``relations``: leaves that read data (file sources, tables, cached relations) or read none.
- ``writes``: commands that write files and session-catalog tables.
- ``ddl``: CREATE, DROP, TRUNCATE, RENAME and ALTER on session-catalog tables.
- ``iceberg``: DataSource V2 reads, writes and DDL on Iceberg tables.
- ``datasources``: saves through a data source provider (``SaveIntoDataSourceCommand``), one small piece per
  provider.
- ``jdbc``: databases read (``JDBCRelation``) and written over JDBC.
- ``delta``: Delta Lake tables: path and table writes, MERGE, UPDATE, DELETE, CTAS, reads (time travel too).
- ``kafka``: Kafka topics read (``KafkaRelation``) and written in batch.
- ``streaming``: the sources and sink of a Structured Streaming micro-batch.
- ``rdd``: DataFrames over RDDs (``LogicalRDD``, ``ExternalRDD``): the files their RDD lineage reads.

To support a new node, write a :class:`~spark_lineage.handlers.base.NodeHandler` subclass with
``@register`` in the module for its concern; the analysis finds it by class name.
"""

from spark_lineage.handlers import datasources, ddl, delta, iceberg, jdbc, kafka, rdd, relations, streaming, writes
from spark_lineage.handlers.base import NodeHandler
from spark_lineage.handlers.registry import handler_for, probes_for, register

__all__ = [
    "NodeHandler",
    "datasources",
    "ddl",
    "delta",
    "handler_for",
    "iceberg",
    "jdbc",
    "kafka",
    "probes_for",
    "rdd",
    "register",
    "relations",
    "streaming",
    "writes",
]
