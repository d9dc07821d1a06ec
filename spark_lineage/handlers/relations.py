"""Leaves that read data: file sources, catalog tables, cached relations; and leaves that read none."""

from __future__ import annotations

import re

from spark_lineage import naming
from spark_lineage.handlers.base import (
    CATALOG_TABLE_PROBES,
    NodeHandler,
    nested_inputs,
    schema_fields,
    table_dataset,
)
from spark_lineage.handlers.registry import register
from spark_lineage.lineage import AnalysisContext, DatasetLineage
from spark_lineage.plan import CapturedNode, Probe

# A root path whose last segment carries a file extension is a file; the reference reports its directory
# when a scan names several files.
_FILE_NAME = re.compile(r"/[^/]+\.[A-Za-z0-9]{1,10}$")


@register
class LogicalRelationHandler(NodeHandler):
    """A V1 data source scan: a file source (``HadoopFsRelation``), possibly backing a catalog table."""

    class_names = ("LogicalRelation",)
    probes = {
        "relation": Probe(("relation",), "node"),
        "catalogTable": Probe(("catalogTable", "?"), "node"),
        "schema": Probe(("schema", "json")),
    }

    def inputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        return file_source_inputs(node.get("relation"), node.get("catalogTable"), node.get("schema"), ctx)


@register
class FileSourceScanExecHandler(NodeHandler):
    """A physical file scan: met inside a cached relation's plan, which Spark keeps only in physical form."""

    class_names = ("FileSourceScanExec",)
    probes = {
        "relation": Probe(("relation",), "node"),
        "table": Probe(("tableIdentifier", "?"), "table"),
        "schema": Probe(("schema", "json")),
    }

    def inputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        return file_source_inputs(node.get("relation"), node.get("table"), node.get("schema"), ctx)


def file_source_inputs(
    relation: CapturedNode | None, table: CapturedNode | None, schema_json: str | None, ctx: AnalysisContext
) -> list[DatasetLineage]:
    """What a V1 scan reads: its catalog table if it has one, else the directories of its root paths."""
    if table is not None:
        dataset = table_dataset(table, ctx, schema_json=schema_json)
        return [dataset] if dataset else []
    if relation is None or relation.simple_name != "HadoopFsRelation":
        kind = relation.simple_name if relation else "unknown"
        ctx.errors.append(f"a scan over {kind} is not supported")
        return []
    paths = relation.get("rootPaths", [])
    files = {p for p in paths if _FILE_NAME.search(p)}
    schema = schema_fields(schema_json)
    return [
        DatasetLineage(naming.from_location(path), schema=schema) for path in naming.input_directories(paths, files)
    ]


@register
class HadoopFsRelationHandler(NodeHandler):
    """Probed as a ``LogicalRelation``'s relation; it is not a plan node of its own."""

    class_names = ("HadoopFsRelation",)
    probes = {"rootPaths": Probe(("location", "rootPaths"), "strings")}


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
    """A cached Dataset: what it reads is what the plan it caches reads. Spark keeps that plan in physical
    form only (the logical one is not kept in 3.5), so its leaves are physical scans."""

    class_names = ("InMemoryRelation",)
    probes = {"cachedPlan": Probe(("cacheBuilder", "cachedPlan"), "plan")}

    def inputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        plan = node.get("cachedPlan")
        if plan is None:
            ctx.errors.append("the plan behind a cached relation could not be read")
            return []
        return ctx.inputs_of(plan, ctx)


@register
class InMemoryTableScanExecHandler(NodeHandler):
    """A scan of a cached relation inside another cached relation's plan."""

    class_names = ("InMemoryTableScanExec",)
    probes = {"relation": Probe(("relation",), "node")}

    def inputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        return nested_inputs(node.get("relation"), ctx)


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
        "LogicalRDD",
        "ExternalRDD",
        "ResolvedIdentifier",
        "ResolvedNamespace",
        "ResolvedTable",
        "UnresolvedRelation",
        "ResolvedPersistentView",
        "ResolvedTempView",
        "ResolvedV1TableIdentifier",
        "CommandResult",
    )
