"""DataSource V2 plans over Iceberg tables: reads, writes, row-level operations, CTAS/RTAS, CREATE and DROP.

The V2 handlers here serve other table formats too: a format plugs in as a small :class:`V2TableFormat`
piece, by the class of its tables (Delta Lake's, in :mod:`spark_lineage.handlers.delta`); Iceberg is the rest.

An Iceberg table's location is the dataset; ``db.table`` in its catalog goes into ``symlinks``; ``catalog``,
``storage`` and ``version`` (the snapshot id read or produced) describe it; the commit and scan reports that
Iceberg itself produced for the query become ``icebergCommitReport`` / ``icebergScanReport`` facets and the
output statistics.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar

from openlineage.client.generated.lifecycle_state_change_dataset import LifecycleStateChange

from spark_lineage import naming
from spark_lineage.facets.iceberg import (
    attach_commit_report,
    attach_scan_report,
    describe_table,
    iceberg_table_dataset,
    set_version,
)
from spark_lineage.handlers.base import NodeHandler, schema_fields
from spark_lineage.handlers.registry import nested_inputs, register
from spark_lineage.lineage import AnalysisContext, DatasetLineage, InputStatistics
from spark_lineage.plan import CapturedNode, CatalystNode, Probe
from spark_lineage.registry import Registrar, Registry


@register
class SparkTableHandler(NodeHandler):
    """Iceberg's Spark table; probed as the table of a V2 relation, not a plan node of its own."""

    class_names = ("SparkTable", "StagedSparkTable")
    probes = {
        "location": Probe(("table", "location")),
        "name": Probe(("table", "name")),
        "connectorName": Probe(("name",)),
        "format": Probe(("properties", "get(format)")),
        "snapshotId": Probe(("snapshotId",)),
        "currentSnapshotId": Probe(("table", "currentSnapshot", "snapshotId")),
        "schema": Probe(("schema", "json")),
    }


@register
class RowLevelOperationTableHandler(NodeHandler):
    """The table a MERGE, UPDATE or DELETE rewrites, as its own scan sees it."""

    class_names = ("RowLevelOperationTable",)
    probes = {"table": Probe(("table",), "node")}


@register
class DataSourceV2RelationHandler(NodeHandler):
    """A V2 table in a plan: read where it is a leaf, written where a write command names it."""

    class_names = ("DataSourceV2Relation",)
    probes = {
        "table": Probe(("table",), "node"),
        "catalog": Probe(("catalog", "?", "name")),
        "identifier": Probe(("identifier", "?", "toString")),
        "name": Probe(("name",)),
    }

    def inputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        # The target of MERGE/UPDATE/DELETE is read too (the rows they keep come from it), as the reference says.
        dataset = v2_dataset(node, ctx, role="input")
        return [dataset] if dataset else []


@register
class DataSourceV2ScanRelationHandler(NodeHandler):
    """A planned V2 scan: the relation it scans, and for an Iceberg scan the rows it reads."""

    class_names = ("DataSourceV2ScanRelation",)
    probes = {"scan": Probe(("scan",), "node")}

    def inputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        datasets = nested_inputs(node.probed_field("relation"), ctx)
        rows = scanned_rows(node.get("scan"))
        if rows is not None and len(datasets) == 1:
            statistics = datasets[0].input_statistics or InputStatistics()
            datasets[0].input_statistics = replace(statistics, rows=rows)
        return datasets


@register
class IcebergScanHandler(NodeHandler):
    """Iceberg's planned Spark scan; probed as the scan of a ``DataSourceV2ScanRelation``, not a plan node of
    its own."""

    class_names = ("SparkBatchQueryScan", "SparkCopyOnWriteScan")  # the scans whose files the reference counts
    # The planner asked for it already (to size the scan), so its files are planned and it costs one call.
    probes = {"rows": Probe(("estimateStatistics", "numRows"))}


def scanned_rows(scan: CapturedNode | None) -> int | None:
    """The rows an Iceberg scan reads, as openlineage-spark's ``inputStatistics`` counts them: the records of
    the data files it plans (its ``estimateStatistics``: Iceberg adds up its tasks' records, or takes the
    snapshot's total for a whole partitioned table); ``None`` for other scans."""
    text = scan.get("rows") if scan is not None else None
    found = re.fullmatch(r"OptionalLong\[(\d+)\]", str(text)) if text is not None else None
    return int(found.group(1)) if found else None


class V2WriteHandler(NodeHandler):
    """A write to the V2 table its ``target_field`` holds (a ``DataSourceV2Relation``, probed as a plan node)."""

    lifecycle: LifecycleStateChange | None = None
    target_field = "table"
    name_with_catalog = False
    """Whether the job-name suffix is the connector table's name with the relation's catalog before it
    (openlineage-spark names appends so), rather than the relation's own name (the other writes)."""
    probes: ClassVar[Mapping[str, Probe]] = {}

    def outputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        relation = node.probed_field(self.target_field)
        if relation is None:
            ctx.errors.append(f"the table {node.simple_name} writes could not be read: its output is not reported")
            return []
        dataset = v2_dataset(relation, ctx, role="output", lifecycle=self.lifecycle)
        return [dataset] if dataset else []

    def reported_by_outer_command(self, node: CapturedNode) -> bool:
        relation = node.probed_field(self.target_field)
        table = relation.get("table") if relation is not None else None
        table_format = _format_of(table)
        return table_format is not None and table is not None and table_format.inner_write(table)

    def job_suffix(self, node: CapturedNode, ctx: AnalysisContext) -> str | None:
        """As openlineage-spark names V2 writes: the relation's name as Spark gives it (``table.name()`` on
        Spark 3.5, ``catalog.identifier`` on 4.x); for appends (see :attr:`name_with_catalog`) the connector
        table's name with the relation's catalog before it when it has none."""
        relation = node.probed_field(self.target_field)
        if relation is None:
            return None
        if not self.name_with_catalog:
            return str(relation.get("name") or _qualified_name(relation) or "") or None
        table: CapturedNode | None = relation.get("table")
        name = (table.get("connectorName") or table.get("name")) if table is not None else None
        if not name:
            return _qualified_name(relation)
        catalog = relation.get("catalog")
        return f"{catalog}.{name}" if catalog and not str(name).startswith(f"{catalog}.") else str(name)


@register
class AppendDataHandler(V2WriteHandler):
    """``INSERT INTO``, ``writeTo().append()``, and the data write of CTAS."""

    class_names = ("AppendData",)
    name_with_catalog = True


@register
class OverwriteHandler(V2WriteHandler):
    """``INSERT OVERWRITE``, ``overwritePartitions()``, and the data write of RTAS."""

    class_names = ("OverwriteByExpression", "OverwritePartitionsDynamic")
    lifecycle = LifecycleStateChange.OVERWRITE


@register
class RowLevelWriteHandler(V2WriteHandler):
    """``MERGE INTO``, ``UPDATE`` and ``DELETE``, copy-on-write (ReplaceData) or merge-on-read (WriteDelta)."""

    class_names = ("ReplaceData", "WriteDelta")
    target_field = "originalTable"


class V2TableCommandHandler(NodeHandler):
    """A command that names a V2 table by identifier (``CREATE TABLE``, CTAS, RTAS, ``DROP TABLE``). The
    table is loaded from its catalog after the command ran: its version is the snapshot the command left; its
    schema is the one the command declares (``tableSchema``), where it declares one."""

    lifecycle = LifecycleStateChange.CREATE
    probes = {
        "catalog": Probe(("name", "catalog", "name")),
        "identifier": Probe(("name", "identifier", "toString")),
        "table": Probe(("name",), "v2table"),
        "tableSchema": Probe(("tableSchema", "json")),
    }

    def outputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        dataset = v2_dataset(node, ctx, role="command", lifecycle=self.lifecycle)
        return [dataset] if dataset else []

    def job_suffix(self, node: CapturedNode, ctx: AnalysisContext) -> str | None:
        """``db.table``, without the catalog, as the reference names these jobs."""
        identifier = node.get("identifier")
        return str(identifier) if identifier else None


@register
class CreateV2TableHandler(V2TableCommandHandler):
    class_names = ("CreateTable",)


@register
class ReplaceV2TableHandler(V2TableCommandHandler):
    class_names = ("ReplaceTable",)
    lifecycle = LifecycleStateChange.OVERWRITE


@register
class AlterV2TableHandler(V2TableCommandHandler):
    """``ALTER TABLE`` on a V2 table (add, drop, rename or change columns, properties, location, comment): the
    table as the command left it, with its new schema, as openlineage-spark reports it."""

    class_names = (
        "AddColumns",
        "ReplaceColumns",
        "DropColumns",
        "RenameColumn",
        "AlterColumn",
        "AlterColumns",
        "CommentOnTable",
        "SetTableLocation",
        "SetTableProperties",
        "UnsetTableProperties",
    )
    lifecycle = LifecycleStateChange.ALTER
    probes = {
        "catalog": Probe(("table", "catalog", "name")),
        "identifier": Probe(("table", "identifier", "toString")),
        "table": Probe(("table",), "v2table"),
    }


@register
class CreateV2TableAsSelectHandler(V2TableCommandHandler):
    """CTAS into a V2 catalog: the data write runs as a nested append, reported as a query of its own."""

    class_names: tuple[str, ...] = ("CreateTableAsSelect",)

    def written_plan(self, node: CapturedNode) -> CatalystNode | None:
        return node.plan_field("query")


@register
class ReplaceV2TableAsSelectHandler(CreateV2TableAsSelectHandler):
    class_names = ("ReplaceTableAsSelect",)
    lifecycle = LifecycleStateChange.OVERWRITE


class V2TableFormat:
    """A table format other than Iceberg behind DataSource V2 relations and commands: how its tables are named.
    Plugs in with :func:`v2_table_format`, beside that format's other handlers."""

    table_classes: tuple[str, ...] = ()
    """Simple class names of the V2 ``Table`` implementations it serves (probed as a relation's ``table``)."""

    def dataset(
        self,
        relation: CapturedNode,
        table: CapturedNode,
        ctx: AnalysisContext,
        *,
        role: str,
        lifecycle: LifecycleStateChange | None,
    ) -> DatasetLineage | None:
        """The dataset for ``table``, named by ``relation`` (a V2 relation or command); ``role`` is ``input``,
        ``output`` or ``command``."""
        return None

    def inner_write(self, table: CapturedNode) -> bool:
        """Whether a write to ``table`` is the data step of a command that is reported itself (a CTAS writing
        into the table it is creating)."""
        return False


FORMATS: Registry[V2TableFormat] = Registry("table format")


v2_table_format = Registrar(FORMATS, "table_classes")
"""Class decorator: name the tables of every class the format lists (``@v2_table_format(replace=True)`` in a
built-in one's place)."""


def _format_of(table: Any) -> V2TableFormat | None:
    return FORMATS.get(table.simple_name) if isinstance(table, CapturedNode) else None


def v2_dataset(
    relation: CapturedNode, ctx: AnalysisContext, *, role: str, lifecycle: LifecycleStateChange | None = None
) -> DatasetLineage | None:
    """The dataset for the V2 table a relation or command names: by its table's format, else as an Iceberg
    table."""
    table = relation.get("table")
    table_format = _format_of(table)
    if table_format is not None:
        return table_format.dataset(relation, table, ctx, role=role, lifecycle=lifecycle)
    return iceberg_dataset(relation, ctx, role=role, lifecycle=lifecycle)


def iceberg_dataset(
    relation: CapturedNode, ctx: AnalysisContext, *, role: str, lifecycle: LifecycleStateChange | None = None
) -> DatasetLineage | None:
    """The dataset for an Iceberg table named by a V2 relation (or V2 command): ``catalog`` and ``identifier``
    props, and the ``table`` captured from it (absent when it could not be loaded, e.g. after DROP)."""
    catalog_name, identifier = relation.get("catalog"), relation.get("identifier")
    table: CapturedNode | None = relation.get("table")
    catalog = naming.IcebergCatalog.from_spark_conf(catalog_name, dict(ctx.session.conf)) if catalog_name else None
    if catalog is None or identifier is None:
        kind = table.class_name if table is not None else "unknown"
        ctx.errors.append(f"V2 table of class {kind} is not supported (Iceberg tables are): it is not reported")
        return None
    if table is not None and table.simple_name == "RowLevelOperationTable":
        table = table.get("table")
    key = f"{catalog.name}.{identifier}"
    location = (table.get("location") if table else None) or ctx.table_locations.get(key)
    location = location or catalog.default_table_location(identifier)
    if location is None:
        ctx.errors.append(f"no location known for Iceberg table {key}")
        return None
    ctx.table_locations[key] = location
    dataset = iceberg_table_dataset(catalog, identifier, location, source="spark", lifecycle=lifecycle)
    if table is None:
        return dataset
    file_format = str(table.get("format") or "iceberg/parquet").replace("iceberg/", "")
    schema = schema_fields(relation.get("tableSchema") or table.get("schema"))
    describe_table(dataset, schema=schema, file_format=file_format)
    report_names = [table.get("name") or key, key, identifier]
    version = table.get("snapshotId") or table.get("currentSnapshotId")
    if role == "output":
        report = _claim(ctx.iceberg_commits, report_names, table.get("currentSnapshotId"))
        if report is not None:
            version = attach_commit_report(dataset, report)
    elif role == "input":
        report = _claim(ctx.iceberg_scans, report_names, version)
        if report is not None:
            version = attach_scan_report(dataset, report) or version
            dataset.input_statistics = scan_statistics(dataset)
    set_version(dataset, version)
    return dataset


def scan_statistics(dataset: DatasetLineage) -> InputStatistics | None:
    """What an Iceberg scan read, from its scan report: its data files and their bytes, as openlineage-spark's
    ``inputStatistics`` gives them from the scan's tasks (it adds their records, which Iceberg's scan report
    does not count)."""
    facet = dataset.input_facets.get("icebergScanReport")
    metrics = getattr(facet, "scanMetrics", None) or {}
    if "resultDataFiles" not in metrics:
        return None
    return InputStatistics(bytes=metrics.get("totalFileSizeInBytes"), files=metrics["resultDataFiles"])


def _claim(
    reports: dict[str, list[dict[str, Any]]], names: list[str], snapshot_id: Any = None
) -> dict[str, Any] | None:
    """Take the reports waiting for the table, under any of its ``names`` (Iceberg names a table
    ``catalog.db.table``, or ``db.table`` inside a create/replace transaction). The one for ``snapshot_id`` is
    preferred; otherwise the latest (a write commits once)."""
    waiting: list[dict[str, Any]] = []
    for name in dict.fromkeys(names):
        waiting.extend(reports.pop(name, []))
    if not waiting:
        return None
    matching = [r for r in waiting if snapshot_id is not None and r.get("snapshot-id") == snapshot_id]
    return (matching or waiting)[-1]


def _qualified_name(node: CapturedNode) -> str | None:
    catalog, identifier = node.get("catalog"), node.get("identifier")
    if identifier is None:
        return None
    return f"{catalog}.{identifier}" if catalog else str(identifier)
