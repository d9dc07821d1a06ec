"""The handler contract, and the helpers handlers share.

A handler turns one kind of captured JVM object into datasets. It says which classes it handles
(``class_names``, simple names so one handler serves Spark 3.5 and 4.x), which values it needs from them
(``probes``, evaluated by the py4j edge), and what those values mean (``inputs``, ``outputs``,
``job_suffix``). Handlers never touch the JVM.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

from openlineage.client.generated.lifecycle_state_change_dataset import LifecycleStateChange

from spark_lineage import naming
from spark_lineage.facets import catalog_facet
from spark_lineage.lineage import AnalysisContext, DatasetLineage, InputColumn, SchemaField
from spark_lineage.plan import CapturedNode, CatalystNode, Probe, SessionInfo


class NodeHandler:
    """Base class: a handler that finds nothing. Subclasses override what applies to their nodes."""

    class_names: tuple[str, ...] = ()
    probes: ClassVar[Mapping[str, Probe]] = {}
    reports_write_metrics: ClassVar[bool] = False
    """True for write commands: the edge then reads the execution's SQL metrics (rows, bytes, files)."""
    names_datasets: ClassVar[bool] = True
    """Whether this handler's nodes stand for datasets it can name. Nodes of classes no handler claims, or
    only one that names nothing, are listed in the ``spark_unknown`` run facet when it is on."""
    wraps_reported_queries: ClassVar[bool] = False
    """True for a command that only runs other commands, each reported as a query of its own with the datasets
    it reads and writes (``saveAsTable`` on Spark 4.1+): the command's own run names no dataset, as
    openlineage-spark's does, and is reported all the same."""

    def inputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        return []

    def outputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        return []

    def job_suffix(self, node: CapturedNode, ctx: AnalysisContext) -> str | None:
        """The last part of the job name, as openlineage-spark derives it from this root node."""
        return None

    def written_plan(self, node: CapturedNode) -> CatalystNode | None:
        """For a command that writes the result of a plan it does not hold as a child (CTAS, a data source
        save), that plan: what it reads are the command's inputs, and column lineage follows the written
        columns from there. ``None`` (the default): the node's children are what it writes."""
        return None

    def column_sources(
        self, node: CapturedNode, datasets: list[DatasetLineage]
    ) -> Mapping[str, list[InputColumn]] | None:
        """For a leaf that reads ``datasets``, which input columns each of its output columns (by name) comes
        from. ``None`` (the default): each column is the same-named column of every dataset the leaf reads."""
        return None

    def describe(self, node: CapturedNode, datasets: list[DatasetLineage], ctx: AnalysisContext) -> None:
        """For an object captured beside the one that names ``datasets`` (a file scan's index), add what it
        knows about them: a Delta table's index, the table version the scan read. The default adds nothing."""

    def reported_by_outer_command(self, node: CapturedNode) -> bool:
        """Whether this query is a step Spark runs inside a command that is reported itself (the data write of
        a Delta CTAS, which openlineage-spark does not report either): it is then not reported on its own."""
        return False


def lowercase_options(node: CapturedNode) -> dict[str, str]:
    """A node's probed ``options`` map with its keys in lower case, as data sources match option names."""
    return {key.lower(): value for key, value in node.get("options", {}).items()}


def schema_fields(schema_json: str | None) -> list[SchemaField] | None:
    """A Spark ``StructType`` JSON as schema fields, with Spark's type names (``integer``, ``decimal``)."""
    if not schema_json:
        return None
    try:
        parsed = json.loads(schema_json)
    except ValueError:
        return None
    return [_field(item["name"], item["type"]) for item in parsed.get("fields", [])]


def _field(name: str, spark_type: Any) -> SchemaField:
    if isinstance(spark_type, str):
        return SchemaField(name, spark_type.split("(", 1)[0])
    kind = spark_type.get("type", "unknown")
    if kind == "struct":
        return SchemaField(name, "struct", tuple(_field(f["name"], f["type"]) for f in spark_type["fields"]))
    if kind == "array":
        return SchemaField(name, "array", (_field("_element", spark_type["elementType"]),))
    if kind == "map":
        return SchemaField(
            name, "map", (_field("key", spark_type["keyType"]), _field("value", spark_type["valueType"]))
        )
    return SchemaField(name, str(kind))


CATALOG_TABLE_PROBES: Mapping[str, Probe] = {
    # A table's storage properties may hold credentials (a JDBC table's password): only what naming needs.
    "info": Probe(("toLinkedHashMap",), "map", keys=frozenset({"database", "table", "location"})),
    "schema": Probe(("schema", "json")),
}


def table_dataset(
    table: CapturedNode | None,
    ctx: AnalysisContext,
    *,
    location: str | None = None,
    lifecycle: LifecycleStateChange | None = None,
    schema_json: str | None = None,
    with_catalog: bool = True,
) -> DatasetLineage | None:
    """The dataset for a session-catalog table: its location is the dataset, its ``db.table`` a symlink.

    ``table`` is a captured ``CatalogTable`` (probed, or looked up by the edge). A table that is gone by the
    time we look (after DROP) is placed where this session last saw it, else where the catalog would put it.
    In a session with Hive support the dataset also gets Hive's ``catalog`` facet, as every dataset the
    reference builds from a ``CatalogTable`` does; ``with_catalog=False`` for the one write it builds from the
    written path (``InsertIntoHadoopFsRelationCommand``).
    """
    if table is None:
        if location is None:
            return None
        return DatasetLineage(naming.from_location(location), schema=schema_fields(schema_json), lifecycle=lifecycle)
    info: Mapping[str, str] = table.get("info", {})
    database = info.get("Database") or table.get("database")
    name = info.get("Table") or table.get("table")
    key = f"{database}.{name}" if database else str(name)
    location = (
        location
        or info.get("Location")
        or ctx.table_locations.get(key)
        or table.get("defaultLocation")
        or (
            naming.default_table_location(ctx.session.warehouse, database, name)
            if ctx.session.warehouse and name
            else None
        )
    )
    if location is None or name is None:
        ctx.errors.append(f"no location known for table {key}")
        return None
    ctx.table_locations[key] = location
    dataset = DatasetLineage(
        naming.from_location(location),
        schema=schema_fields(schema_json or table.get("schema")),
        lifecycle=lifecycle,
    )
    symlink = session_catalog(ctx.session).table_symlink(location, database, name)
    if symlink:
        dataset.symlinks.append(symlink)
    if with_catalog:
        add_hive_catalog(dataset, ctx.session)
    return dataset


def session_catalog(session: SessionInfo) -> naming.SessionCatalog:
    """What naming needs to know of the session catalog, read from the session's confs."""
    return naming.SessionCatalog.from_spark_conf(session.conf, session.warehouse)


def add_hive_catalog(dataset: DatasetLineage, session: SessionInfo) -> None:
    """The ``catalog`` facet openlineage-spark gives a dataset of a session with Hive support (an in-memory
    session catalog gets none): Hive's ``default`` catalog, the warehouse, and the metastore when one is set."""
    catalog = session_catalog(session)
    if not catalog.hive_support or catalog.warehouse_uri is None:
        return
    dataset.extra_facets["catalog"] = catalog_facet(
        framework="hive",
        type="hive",
        name="default",
        warehouse=catalog.warehouse_uri,
        metadata=catalog.metastore,
        source="spark",
    )


def table_suffix(table: CapturedNode | None) -> str | None:
    """``db_table``: the job-name suffix openlineage-spark gives commands that create a table."""
    if table is None:
        return None
    info: Mapping[str, str] = table.get("info", {})
    database = info.get("Database") or table.get("database")
    name = info.get("Table") or table.get("table")
    if not name:
        return None
    return f"{database}_{name}" if database else str(name)
