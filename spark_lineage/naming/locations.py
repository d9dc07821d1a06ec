"""Storage locations as datasets: files, object stores and HDFS, named as openlineage-spark names them; and
session-catalog tables, which are their location with a ``symlinks`` entry for their name."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import unquote, urlsplit

from openlineage.client.dataset.dataset import DatasetConfig
from openlineage.client.dataset.trimmers import DatasetNameTrimmer
from openlineage.client.naming import dataset as ol_naming

from spark_lineage.naming.identifiers import DatasetIdentifier, TableName

FILE_NAMESPACE = "file"
_S3_SCHEMES = frozenset({"s3", "s3a", "s3n"})
_MAX_TRIM_PASSES = 16


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


METASTORE_URI_KEYS = ("spark.sql.hive.metastore.uris", "hive.metastore.uris", "spark.hadoop.hive.metastore.uris")
"""Where openlineage-spark looks for the Hive metastore, in its order: two SparkConf keys, then the Hadoop
configuration (which ``spark.hadoop.hive.metastore.uris`` fills; a ``hive-site.xml`` is not read here)."""


@dataclass(frozen=True)
class SessionCatalog:
    """How the session catalog's tables are named beyond their location: the warehouse, and with Hive support,
    the metastore a ``hive.metastore.uris`` conf points at (as ``hive://host:port``)."""

    warehouse: str | None
    hive_support: bool = False
    metastore: str | None = None

    @classmethod
    def from_spark_conf(cls, conf: Mapping[str, str], warehouse: str | None) -> SessionCatalog:
        # openlineage-spark reads the metastore only when the session has Hive support.
        hive = conf.get("spark.sql.catalogImplementation") == "hive"
        uris = next((conf[key] for key in METASTORE_URI_KEYS if conf.get(key)), None) if hive else None
        authority = urlsplit(uris.split(",", 1)[0].strip()).netloc if uris else ""
        return cls(warehouse, hive, f"hive://{authority}" if authority else None)

    def table_symlink(self, table_location: str, database: str | None, table: str) -> TableName | None:
        """The ``symlinks`` entry of a table: in the metastore when there is one (wherever the table lives),
        else in the warehouse (see :func:`warehouse_symlink`)."""
        if self.metastore:
            return TableName(namespace=self.metastore, name=f"{database}.{table}" if database else table)
        return warehouse_symlink(table_location, self.warehouse, database, table)

    @property
    def warehouse_uri(self) -> str | None:
        """The warehouse as a URI without a trailing slash, as the ``catalog`` facet's ``warehouseUri``."""
        return location_uri(self.warehouse).rstrip("/") if self.warehouse else None


def default_table_location(warehouse: str, database: str | None, table: str) -> str:
    """Where the session catalog puts a managed table when its database has no location of its own."""
    base = location_uri(warehouse).rstrip("/")
    if database in (None, "", "default"):
        return f"{base}/{table}"
    return f"{base}/{database}.db/{table}"


def use_trimmers(disabled: tuple[str, ...] = (), extra: tuple[str, ...] = ()) -> None:
    """Which trimmers :func:`trim_name` applies (``dataset.disabledTrimmers`` / ``dataset.extraTrimmers``, as
    openlineage-python dotted class paths): openlineage-python's built-in ones but ``disabled``, and ``extra``.

    Process-wide, as dataset names are: a process has one SparkContext, whose confs these keys are, and every
    name a process reports must follow one convention for its datasets to join up."""
    global _active_trimmers
    _active_trimmers = tuple(
        DatasetConfig(disabled_trimmers=list(disabled), extra_trimmers=list(extra)).get_dataset_name_trimmers()
    )
    from_location.cache_clear()


def trim_name(name: str) -> str:
    """Drop trailing partition-like directories (``/dt=2024-01-01``, ``/20240101``, ``/2024/01``) with
    openlineage-python's dataset-name trimmers, the same set openlineage-spark applies (see
    :func:`use_trimmers`)."""
    for _ in range(_MAX_TRIM_PASSES):
        trimmed = name
        for trimmer in _active_trimmers:
            trimmed = trimmer.trim(trimmed)
        if trimmed == name:
            break
        name = trimmed
    return name


@lru_cache(maxsize=1024)
def from_location(location: str) -> DatasetIdentifier:
    """The dataset a storage location stands for: a file-source path, a table's location.

    Accepts URIs (``file:/x``, ``file:///x``, ``s3a://bucket/key``, ``hdfs://nn:8020/p``, ...) and bare
    absolute paths. Trailing slashes are dropped, and trailing partition-like directories trimmed, as
    openlineage-spark does. Each location is named once (the trimmers' regular expressions are most of the
    cost, and a job reads the same locations query after query), until :func:`use_trimmers` changes them.
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


def read_directories(paths: list[str], files: set[str] | frozenset[str]) -> list[str]:
    """The directories openlineage-spark reports for paths an RDD reads: a file's directory, a directory (or
    a glob) itself; a path whose directory is already reported adds nothing; in order."""
    seen: list[str] = []
    for path in paths:
        parent = path.rsplit("/", 1)[0]
        if parent in seen:
            continue
        directory = parent if path in files else path
        if directory not in seen:
            seen.append(directory)
    return seen


def _strip_slash(path: str) -> str:
    stripped = path.rstrip("/")
    return stripped or "/"


_active_trimmers: tuple[DatasetNameTrimmer, ...] = tuple(DatasetConfig().get_dataset_name_trimmers())
