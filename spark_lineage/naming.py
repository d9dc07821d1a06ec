"""Dataset identity: the one place that turns locations and table names into OpenLineage namespaces and names.

The rules follow the OpenLineage naming spec exactly as openlineage-spark applies it, so that events from this
library and from the Java agent name the same data the same way and join into one graph:

- a physical location is the dataset: ``file:/x/y`` is namespace ``file``, name ``/x/y``; ``s3a://b/k`` is
  ``s3://b`` and ``k``; ``hdfs://nn:8020/p`` is ``hdfs://nn:8020`` and ``/p``;
- a catalog table is its location, and its name in the catalog goes into a ``symlinks`` facet.

``iceberg_facets`` uses this module too, which is what makes Spark and pyiceberg agree on a table's name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import unquote, urlsplit

from openlineage.client.dataset.dataset import DatasetConfig
from openlineage.client.dataset.trimmers import DatasetNameTrimmer
from openlineage.client.naming import dataset as ol_naming

FILE_NAMESPACE = "file"
_S3_SCHEMES = frozenset({"s3", "s3a", "s3n"})
_MAX_TRIM_PASSES = 16


@dataclass(frozen=True, order=True)
class DatasetIdentifier:
    """An OpenLineage dataset identity: where it lives (namespace) and what it is called there (name)."""

    namespace: str
    name: str


@dataclass(frozen=True)
class TableName:
    """A table's name in a catalog, as it goes into the ``symlinks`` facet."""

    namespace: str
    name: str
    type: str = "TABLE"


def _split_location(location: str) -> DatasetIdentifier:
    """Namespace and name of a storage location, before name trimming."""
    parts = urlsplit(location)
    scheme = parts.scheme.lower()
    path = unquote(parts.path)
    if scheme in ("", FILE_NAMESPACE) or (len(scheme) == 1 and location[1:3] in (":\\", ":/")):
        return DatasetIdentifier(ol_naming.LocalFileSystem(path=_strip_slash(path)).get_namespace(), _strip_slash(path))
    host = parts.hostname or ""
    key = path.lstrip("/")
    if scheme in _S3_SCHEMES and host and key:
        s3 = ol_naming.S3(bucket_name=host, object_key=key.rstrip("/"))
        return DatasetIdentifier(s3.get_namespace(), s3.get_name())
    if scheme == "gs" and host and key:
        gcs = ol_naming.GCS(bucket_name=host, object_key=key.rstrip("/"))
        return DatasetIdentifier(gcs.get_namespace(), gcs.get_name())
    if scheme == "hdfs" and host and parts.port:
        hdfs = ol_naming.HDFS(namenode_host=host, namenode_port=str(parts.port), path=_strip_slash(path))
        return DatasetIdentifier(hdfs.get_namespace(), hdfs.get_name())
    authority = parts.netloc
    if scheme in ("hdfs", "viewfs", "") or not authority:
        return DatasetIdentifier(f"{scheme}://{authority}" if authority else scheme, _strip_slash(path))
    # Object stores (abfs, wasb, oss, ...): the container/bucket is the namespace, the key the name.
    return DatasetIdentifier(f"{scheme}://{authority}", key.rstrip("/") or "/")


def location_uri(location: str) -> str:
    """A location as a URI the way Hadoop prints it: bare absolute paths get the ``file:`` scheme."""
    if location.startswith("/"):
        return FILE_NAMESPACE + ":" + location
    if location.startswith("file:///"):
        return FILE_NAMESPACE + ":" + location[len("file://") :]
    return location


def warehouse_symlink(table_location: str, warehouse: str | None, database: str | None, table: str) -> TableName | None:
    """The ``symlinks`` entry openlineage-spark gives a session-catalog table: namespace is the warehouse URI
    (``file:/data/warehouse``), name ``db.table``. Tables outside the warehouse get none, as in the reference."""
    if not warehouse:
        return None
    warehouse_uri = location_uri(warehouse).rstrip("/")
    location = location_uri(table_location).rstrip("/")
    if location != warehouse_uri and not location.startswith(warehouse_uri + "/"):
        return None
    return TableName(namespace=warehouse_uri, name=f"{database}.{table}" if database else table)


def default_table_location(warehouse: str, database: str | None, table: str) -> str:
    """Where the session catalog puts a managed table when its database has no location of its own."""
    base = location_uri(warehouse).rstrip("/")
    if database in (None, "", "default"):
        return f"{base}/{table}"
    return f"{base}/{database}.db/{table}"


def trim_name(name: str) -> str:
    """Drop trailing partition-like directories (``/dt=2024-01-01``, ``/20240101``, ``/2024/01``) with
    openlineage-python's dataset-name trimmers, the same set openlineage-spark applies."""
    for _ in range(_MAX_TRIM_PASSES):
        trimmed = name
        for trimmer in _trimmers():
            trimmed = trimmer.trim(trimmed)
        if trimmed == name:
            break
        name = trimmed
    return name


def from_location(location: str) -> DatasetIdentifier:
    """The dataset a storage location stands for: a file-source path, a table's location.

    Accepts URIs (``file:/x``, ``file:///x``, ``s3a://bucket/key``, ``hdfs://nn:8020/p``, ...) and bare
    absolute paths. Trailing slashes are dropped, and trailing partition-like directories trimmed, as
    openlineage-spark does.
    """
    identifier = _split_location(location)
    return DatasetIdentifier(identifier.namespace, trim_name(identifier.name))


def input_directories(root_paths: list[str], leaf_files: set[str] | None = None) -> list[str]:
    """Reduce the root paths of a file scan to the directories openlineage-spark reports: a single path is
    kept as it is; several paths are grouped by parent, without duplicates, in order."""
    if len(root_paths) <= 1:
        return list(root_paths)
    seen: list[str] = []
    for path in root_paths:
        is_file = leaf_files is not None and path in leaf_files
        directory = path.rsplit("/", 1)[0] if is_file else path
        parent = path.rsplit("/", 1)[0]
        if parent in seen or directory in seen:
            continue
        seen.append(directory)
    return seen


def normalize_job_name(text: str | None) -> str:
    """openlineage-spark's name normalizer: ``"My App"`` -> ``my_app``, ``"InsertIntoHadoopFsRelationCommand"``
    -> ``insert_into_hadoop_fs_relation_command``."""
    if not text:
        return ""
    import unicodedata

    trimmed = re.sub(r"[^\w]+$", "", re.sub(r"^[^\w]+", "", text, flags=re.ASCII), flags=re.ASCII)
    decomposed = unicodedata.normalize("NFKD", trimmed)
    stripped = "".join(ch for ch in decomposed if not unicodedata.category(ch).startswith("M"))
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", stripped)
    spaced = re.sub(r"(?<!^)([A-Z])([a-z])", r" \1\2", spaced)
    spaced = re.sub(r"(\d)([A-Z])", r"\1 \2", spaced)
    return re.sub(r"[^a-zA-Z0-9]+", "_", spaced.lower())


def path_job_suffix(name: str) -> str:
    """The job-name suffix openlineage-spark derives from an output path: its last two segments."""
    trimmed = trim_name(name)
    if trimmed.rfind("/") <= 0:
        return trimmed
    parts = [part for part in trimmed.split("/")]
    while parts and parts[-1] == "":
        parts.pop()
    return f"{parts[-2]}_{parts[-1]}" if len(parts) >= 2 else parts[-1]


def _strip_slash(path: str) -> str:
    stripped = path.rstrip("/")
    return stripped or "/"


@lru_cache(maxsize=1)
def _trimmers() -> tuple[DatasetNameTrimmer, ...]:
    return tuple(DatasetConfig().get_dataset_name_trimmers())


def jdbc_uri(uri: str) -> str:
    """A database's JDBC URL, without user, password or parameters, from a JDBC URL or a SQLAlchemy URL:
    ``sqlite:////abs/cat.db`` and ``jdbc:sqlite:file:/abs/cat.db`` are both ``jdbc:sqlite:/abs/cat.db``;
    ``postgresql+psycopg2://u:p@db:5432/cat`` and ``jdbc:postgresql://db:5432/cat?user=u`` are both
    ``jdbc:postgresql://db:5432/cat``."""
    is_jdbc = uri.startswith("jdbc:")
    dialect, _, rest = (uri[len("jdbc:") :] if is_jdbc else uri).partition(":")
    dialect = dialect.split("+", 1)[0].lower()
    if dialect == "sqlite":
        path = rest.split("?", 1)[0]
        if not is_jdbc:  # SQLAlchemy: sqlite:///relative/path, sqlite:////absolute/path
            return f"jdbc:sqlite:{path[3:] if path.startswith('///') else path}"
        path = path[len("file:") :] if path.startswith("file:") else path
        return f"jdbc:sqlite:{path[2:] if path.startswith('///') else path}"
    parts = urlsplit(f"{dialect}:{rest}")
    host = parts.hostname or ""
    authority = f"{host}:{parts.port}" if parts.port else host
    return f"jdbc:{dialect}://{authority}{parts.path}"


ICEBERG_SPARK_CATALOGS = ("org.apache.iceberg.spark.SparkCatalog", "org.apache.iceberg.spark.SparkSessionCatalog")
_CATALOG_IMPL_TYPES = {
    "RESTCatalog": "rest",
    "JdbcCatalog": "jdbc",
    "HadoopCatalog": "hadoop",
    "HiveCatalog": "hive",
    "GlueCatalog": "glue",
    "NessieCatalog": "nessie",
}
_PYICEBERG_CATALOG_TYPES = {
    "SqlCatalog": "jdbc",
    "RestCatalog": "rest",
    "HiveCatalog": "hive",
    "GlueCatalog": "glue",
    "DynamoDbCatalog": "dynamodb",
    "BigQueryMetastoreCatalog": "bigquery",
    "InMemoryCatalog": "in-memory",
}


@dataclass(frozen=True)
class IcebergCatalog:
    """An Iceberg catalog as its configuration describes it: what it is called, what kind it is, where it keeps
    data (warehouse) and metadata (uri)."""

    name: str
    type: str
    warehouse: str | None = None
    uri: str | None = None

    @classmethod
    def from_spark_conf(cls, name: str, conf: dict[str, str] | None) -> IcebergCatalog | None:
        """The catalog ``spark.sql.catalog.<name>`` configures, if it is an Iceberg one."""
        conf = conf or {}
        prefix = f"spark.sql.catalog.{name}"
        if conf.get(prefix) not in ICEBERG_SPARK_CATALOGS:
            return None
        kind = conf.get(f"{prefix}.type")
        impl = conf.get(f"{prefix}.catalog-impl", "")
        if not kind:
            kind = _CATALOG_IMPL_TYPES.get(impl.rsplit(".", 1)[-1], "hive")  # Iceberg's default is hive
        warehouse = conf.get(f"{prefix}.warehouse")
        if warehouse is None and name == "spark_catalog":
            warehouse = conf.get("spark.sql.warehouse.dir")
        return cls.of(name, kind, warehouse, conf.get(f"{prefix}.uri"))

    @classmethod
    def from_pyiceberg(cls, name: str, class_name: str, properties: Mapping[str, str]) -> IcebergCatalog:
        """A pyiceberg catalog, by its name, class name and properties. ``SqlCatalog`` keeps the table layout of
        Iceberg Java's ``JdbcCatalog``, so it is a ``jdbc`` catalog here too: one sqlite or PostgreSQL database
        shared by Spark and pyiceberg is one catalog with one identity."""
        kind = _PYICEBERG_CATALOG_TYPES.get(class_name) or properties.get("type") or class_name
        return cls.of(name, kind, properties.get("warehouse"), properties.get("uri"))

    @classmethod
    def of(cls, name: str, kind: str, warehouse: str | None, uri: str | None) -> IcebergCatalog:
        """A catalog with its uri in the form that identifies it: a JDBC catalog's uri without credentials."""
        kind = kind.lower()
        if kind == "jdbc" and uri:
            uri = jdbc_uri(uri)
        return cls(name=name, type=kind, warehouse=warehouse, uri=uri)

    def symlink(self, table: str) -> TableName | None:
        """The ``symlinks`` entry for ``table`` (``db.table``): the catalog's identity, as openlineage-spark
        forms it for hadoop (warehouse URI), hive (``hive://host:port``) and rest (catalog uri) catalogs. JDBC
        catalogs, which the reference does not name, are named by their JDBC uri."""
        if self.type == "hadoop" and self.warehouse:
            return TableName(location_uri(self.warehouse).rstrip("/"), table)
        if self.type == "hive" and self.uri:
            authority = urlsplit(self.uri.split(",")[0]).netloc
            return TableName(f"hive://{authority}", table) if authority else None
        if self.type in ("rest", "nessie", "jdbc") and self.uri:
            return TableName(self.uri, table)
        return None

    def default_table_location(self, table: str) -> str | None:
        """Where the catalog puts ``db.table`` when it chooses: ``<warehouse>/db/table``."""
        if not self.warehouse:
            return None
        return location_uri(self.warehouse).rstrip("/") + "/" + table.replace(".", "/")
