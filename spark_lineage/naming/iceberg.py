"""Iceberg catalogs: what kind a catalog is, and the ``symlinks`` identity its tables get, for Spark and
pyiceberg alike."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from spark_lineage.naming.identifiers import TableName
from spark_lineage.naming.jdbc import jdbc_uri
from spark_lineage.naming.locations import location_uri

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
