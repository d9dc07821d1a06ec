"""Leaves that read data: file sources, catalog tables, cached relations; and leaves that read none."""

from __future__ import annotations

import re
from collections.abc import Mapping

from spark_lineage import naming
from spark_lineage.handlers.base import (
    CATALOG_TABLE_PROBES,
    NodeHandler,
    schema_fields,
    table_dataset,
)
from spark_lineage.handlers.registry import handler_for, nested_inputs, plan_inputs, register
from spark_lineage.lineage import AnalysisContext, DatasetLineage, InputColumn, InputStatistics
from spark_lineage.plan import CapturedNode, Probe

# A root path whose last segment carries a file extension is a file; the reference reports its directory
# when a scan names several files.
_FILE_NAME = re.compile(r"/[^/]+\.[A-Za-z0-9]{1,10}$")


@register
class LogicalRelationHandler(NodeHandler):
    """A V1 data source scan: its catalog table if it has one, else what its relation reads (files for a
    ``HadoopFsRelation``, tables for a ``JDBCRelation``: each relation class has a handler of its own)."""

    class_names = ("LogicalRelation",)
    probes = {
        "relation": Probe(("relation",), "node"),
        "catalogTable": Probe(("catalogTable", "?"), "node", if_field="catalogTable"),
        # A file stream's micro-batch scans the files new since the last batch, under the directory the stream
        # watches, which Spark passes as the base path: the stream's dataset, whichever files a batch has.
        "streamDirectory": Probe(
            ("relation", "options", "get(basePath)", "?"), "qualified_path", if_field="isStreaming"
        ),
    }

    def inputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        directory = node.get("streamDirectory")
        relation: CapturedNode | None = node.get("relation")
        if directory is not None and relation is not None:
            return [DatasetLineage(naming.from_location(directory), schema=schema_fields(relation.get("schema")))]
        return scan_inputs(relation, node.get("catalogTable"), ctx)

    def column_sources(
        self, node: CapturedNode, datasets: list[DatasetLineage]
    ) -> Mapping[str, list[InputColumn]] | None:
        relation: CapturedNode | None = node.get("relation")
        handler = handler_for(relation.simple_name) if relation is not None and not node.get("catalogTable") else None
        return handler.column_sources(relation, datasets) if handler is not None and relation is not None else None


@register
class FileSourceScanExecHandler(NodeHandler):
    """A physical file scan: met inside a cached relation's physical plan."""

    class_names = ("FileSourceScanExec",)
    probes = {
        "relation": Probe(("relation",), "node"),
        "table": Probe(("tableIdentifier", "?"), "table", if_field="tableIdentifier"),
    }

    def inputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        return scan_inputs(node.get("relation"), node.get("table"), ctx)


def scan_inputs(
    relation: CapturedNode | None, table: CapturedNode | None, ctx: AnalysisContext
) -> list[DatasetLineage]:
    """What a V1 scan reads: its catalog table if it has one, else what its relation's handler finds."""
    if table is not None:
        dataset = table_dataset(table, ctx)
        if dataset is None:
            return []
        if not dataset.schema and relation is not None:  # a catalog that keeps no schema (Delta's tables)
            dataset.schema = schema_fields(relation.get("schema")) or dataset.schema
        dataset.input_statistics = table_scan_statistics(relation)
        describe_location(relation, [dataset], ctx)
        return [dataset]
    handler = handler_for(relation.simple_name) if relation is not None else None
    if handler is None or relation is None:
        kind = relation.simple_name if relation else "unknown"
        ctx.errors.append(f"a scan over {kind} is not supported")
        return []
    return handler.inputs(relation, ctx)


def describe_location(relation: CapturedNode | None, datasets: list[DatasetLineage], ctx: AnalysisContext) -> None:
    """Let the handler of a file relation's index add what it knows about the datasets read (a Delta table's
    version)."""
    location = relation.get("location") if relation is not None else None
    handler = handler_for(location.simple_name) if isinstance(location, CapturedNode) else None
    if handler is not None and location is not None:
        handler.describe(location, datasets, ctx)


@register
class HadoopFsRelationHandler(NodeHandler):
    """Files read by a scan (probed as a ``LogicalRelation``'s relation; it is not a plan node of its own): the
    directories of its root paths."""

    class_names: tuple[str, ...] = ("HadoopFsRelation",)
    probes = {
        "rootPaths": Probe(("location", "rootPaths"), "strings"),
        "schema": Probe(("schema", "json")),
        # The file index, probed by its own class's handler where it has one (a Delta table's: its version).
        "location": Probe(("location",), "node"),
        # What the scan covers, for inputStatistics as openlineage-spark gives it: Spark's size estimate of the
        # relation (its files' sizes times spark.sql.sources.fileCompressionFactor) and how many files it has.
        "sizeInBytes": Probe(("sizeInBytes",)),
        "fileCount": Probe(("inputFiles",), "count"),
    }

    def inputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        # Delta reads its transaction log with queries of its own: the log is no dataset.
        paths = [path for path in node.get("rootPaths", []) if not naming.is_delta_log(path)]
        files = {p for p in paths if _FILE_NAME.search(p)}
        schema = schema_fields(node.get("schema"))
        stats = relation_statistics(node)
        datasets = [
            DatasetLineage(naming.from_location(path), schema=schema, input_statistics=stats)
            for path in naming.input_directories(paths, files)
        ]
        describe_location(node, datasets, ctx)
        return datasets


_UNKNOWN_SIZE = 2**63 - 1
"""What Spark estimates the size of a table it has no statistics for (``spark.sql.defaultSizeInBytes``)."""


def table_scan_statistics(relation: CapturedNode | None) -> InputStatistics | None:
    """A catalog table's scan: the relation's size when Spark knows it (from the table's statistics, or the
    files of a Delta table's snapshot), without a file count, as openlineage-spark gives a table without
    statistics of its own."""
    size = relation.get("sizeInBytes") if relation is not None else None
    if not isinstance(size, int) or size >= _UNKNOWN_SIZE:
        return None
    return InputStatistics(bytes=size)


def relation_statistics(relation: CapturedNode) -> InputStatistics | None:
    """A file relation's size and file count, when both were read (the reference gives both or none)."""
    size, files = relation.get("sizeInBytes"), relation.get("fileCount")
    if not isinstance(size, int) or not isinstance(files, int):
        return None
    return InputStatistics(bytes=size, files=files)


@register
class CatalogTableHandler(NodeHandler):
    """Probed as the table behind a relation or command; it is not a plan node of its own."""

    class_names = ("CatalogTable",)
    probes = CATALOG_TABLE_PROBES


@register
class HiveTableRelationHandler(NodeHandler):
    """A scan of a Hive-format table."""

    class_names = ("HiveTableRelation",)
    probes = {"tableMeta": Probe(("tableMeta",), "node"), "schema": Probe(("schema", "json"))}

    def inputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        dataset = table_dataset(node.get("tableMeta"), ctx, schema_json=node.get("schema"))
        return [dataset] if dataset else []


@register
class InMemoryRelationHandler(NodeHandler):
    """A cached Dataset: what it reads is what the plan it caches reads: the logical plan the cache manager
    keeps for it, or else the physical plan the relation holds (whose leaves are physical scans)."""

    class_names = ("InMemoryRelation",)
    probes = {"cachedPlan": Probe((), "cached_plan")}

    def inputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        plan = node.get("cachedPlan")
        if plan is None:
            ctx.errors.append("the plan behind a cached relation could not be read")
            return []
        return plan_inputs(plan, ctx)

    def column_sources(
        self, node: CapturedNode, datasets: list[DatasetLineage]
    ) -> Mapping[str, list[InputColumn]] | None:
        return {}  # its columns are the cached plan's, by position (see spark_lineage.columns.operators)


@register
class InMemoryTableScanExecHandler(NodeHandler):
    """A scan of a cached relation inside another cached relation's plan."""

    class_names = ("InMemoryTableScanExec",)
    probes = {"relation": Probe(("relation",), "node")}

    def inputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        return nested_inputs(node.get("relation"), ctx)

    def column_sources(
        self, node: CapturedNode, datasets: list[DatasetLineage]
    ) -> Mapping[str, list[InputColumn]] | None:
        return {}  # a physical scan of a cache: column lineage does not follow physical plans


@register
class NoDataLeafHandler(NodeHandler):
    """Leaves that read no dataset: literals, ranges, Python collections, and the identifiers DDL commands
    carry (their command's handler reports the table)."""

    class_names = (
        "LocalRelation",
        "LocalTableScanExec",
        "OneRowRelation",
        "RDDScanExec",
        "RangeExec",
        "Range",
        "ResolvedIdentifier",
        "ResolvedNamespace",
        "ResolvedTable",
        "UnresolvedRelation",
        "ResolvedPersistentView",
        "ResolvedTempView",
        "ResolvedV1TableIdentifier",
        "CommandResult",
    )
    names_datasets = False
