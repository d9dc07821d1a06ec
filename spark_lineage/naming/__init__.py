"""Dataset identity: the one place that turns locations and table names into OpenLineage namespaces and names.

The rules follow the OpenLineage naming spec exactly as openlineage-spark applies it, so that events from this
library and from the Java agent name the same data the same way and join into one graph:

- :mod:`~spark_lineage.naming.locations`: a physical location is the dataset: ``file:/x/y`` is namespace
  ``file``, name ``/x/y``; ``s3a://b/k`` is ``s3://b`` and ``k``; ``hdfs://nn:8020/p`` is ``hdfs://nn:8020``
  and ``/p``; a catalog table is its location, and its name in the catalog goes into a ``symlinks`` facet;
- :mod:`~spark_lineage.naming.jdbc`: a table behind a JDBC URL (``postgres://db:5432``, ``shop.public.t``);
- :mod:`~spark_lineage.naming.kafka`: Kafka topics (``kafka://host:9092``, the topic);
- :mod:`~spark_lineage.naming.iceberg`: Iceberg catalogs and the identity their tables get;
- :mod:`~spark_lineage.naming.delta`: Delta Lake tables (their directory) and their transaction log;
- :mod:`~spark_lineage.naming.jobs`: job names;
- :mod:`~spark_lineage.naming.rewrites`: what the ``dataset.*`` keys change about identities once named.

``iceberg_facets`` uses this package too, which is what makes Spark and pyiceberg agree on a table's name.
"""

from spark_lineage.naming.delta import has_delta_extension, is_delta_log
from spark_lineage.naming.iceberg import ICEBERG_SPARK_CATALOGS, IcebergCatalog
from spark_lineage.naming.identifiers import DatasetIdentifier, TableName
from spark_lineage.naming.jdbc import jdbc_dataset, jdbc_uri
from spark_lineage.naming.jobs import normalize_job_name, path_job_suffix, planned_root_name, rdd_job_suffix
from spark_lineage.naming.kafka import kafka_dataset, option_topics
from spark_lineage.naming.locations import (
    FILE_NAMESPACE,
    SessionCatalog,
    default_table_location,
    from_location,
    input_directories,
    location_uri,
    read_directories,
    trim_name,
    use_trimmers,
    warehouse_symlink,
)

__all__ = [
    "FILE_NAMESPACE",
    "ICEBERG_SPARK_CATALOGS",
    "DatasetIdentifier",
    "IcebergCatalog",
    "SessionCatalog",
    "TableName",
    "default_table_location",
    "from_location",
    "has_delta_extension",
    "input_directories",
    "is_delta_log",
    "jdbc_dataset",
    "jdbc_uri",
    "kafka_dataset",
    "location_uri",
    "normalize_job_name",
    "option_topics",
    "path_job_suffix",
    "planned_root_name",
    "rdd_job_suffix",
    "read_directories",
    "trim_name",
    "use_trimmers",
    "warehouse_symlink",
]
