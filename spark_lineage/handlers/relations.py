"""Leaves that read data: file sources, catalog tables, cached relations; and leaves that read none."""

from __future__ import annotations

import re

from spark_lineage import naming
from spark_lineage.handlers.base import CATALOG_TABLE_PROBES, NodeHandler, schema_fields, table_dataset
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
        table = node.get("catalogTable")
        if table is not None:
            dataset = table_dataset(table, ctx, schema_json=node.get("schema"))
            return [dataset] if dataset else []
        relation: CapturedNode | None = node.get("relation")
        if relation is None or relation.simple_name != "HadoopFsRelation":
            kind = relation.simple_name if relation else "unknown"
            ctx.errors.append(f"LogicalRelation over {kind} is not supported")
            return []
        paths = relation.get("rootPaths", [])
        files = {p for p in paths if _FILE_NAME.search(p)}
        schema = schema_fields(node.get("schema"))
        return [
            DatasetLineage(naming.from_location(path), schema=schema)
            for path in naming.input_directories(paths, files)
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
    """A cached Dataset: what it reads is what the plan it caches reads."""

    class_names = ("InMemoryRelation",)
    probes = {"cachedPlan": Probe(("cacheBuilder", "cachedPlan", "logicalLink", "?"), "plan")}

    def inputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        plan = node.get("cachedPlan")
        if plan is None:
            ctx.errors.append("the plan behind a cached relation could not be read")
            return []
        return ctx.inputs_of(plan, ctx)


@register
class NoDataLeafHandler(NodeHandler):
    """Leaves that read no dataset: literals, ranges, Python collections, and the identifiers DDL commands
    carry (their command's handler reports the table)."""

    class_names = (
        "LocalRelation",
        "OneRowRelation",
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
