"""Delta Lake: path and table writes, ``MERGE``, ``UPDATE``, ``DELETE``, CTAS and reads (time travel too), named
as openlineage-spark names them.

- A Delta table is its directory; a catalog table is named like any session-catalog table (its location, and
  ``db.table`` in ``symlinks``); a path table (``save(path)``, ``delta.`/path```) by its path alone.
- ``storage`` (delta, parquet) describes every Delta table, and ``catalog`` (framework delta) a catalog table;
  ``version`` is the table version from the Delta log: the one a read saw (time travel included), the one a
  write produced (read from the log right after the write; path saves keep no handle on the log).
- Delta reads its transaction log, and writes the files of its commands, with Spark executions of its own:
  the log is no dataset (:func:`spark_lineage.naming.is_delta_log`), its file writes (funcName
  ``deltaTransactionalWrite``) and a CTAS's data write into the table it creates are not reported on their
  own, as openlineage-spark filters them too.

Delta plans reads and writes of its tables as V1 scans (``LogicalRelation``) over a Delta file index, V2 writes
(``AppendData`` to a ``DeltaTableV2``, CTAS) and commands of its own (``MergeIntoCommand``, ``UpdateCommand``,
``DeleteCommand``), which hold the plans they read as fields, not children.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from openlineage.client.facet_v2 import dataset_version_dataset, storage_dataset
from openlineage.client.generated.lifecycle_state_change_dataset import LifecycleStateChange

from spark_lineage import naming
from spark_lineage.facets import PRODUCER, catalog_facet
from spark_lineage.handlers.base import NodeHandler, schema_fields, table_dataset
from spark_lineage.handlers.datasources import DataSourceProvider, data_source_provider
from spark_lineage.handlers.iceberg import V2TableFormat, v2_table_format
from spark_lineage.handlers.registry import register
from spark_lineage.handlers.relations import HadoopFsRelationHandler
from spark_lineage.lineage import AnalysisContext, DatasetLineage, SchemaField
from spark_lineage.plan import Attribute, CapturedNode, CatalystNode, Probe

DELTA = "delta"
_STAGED_TABLES = ("DeltaCatalog$StagedDeltaTableV2", "AbstractDeltaCatalog$StagedDeltaTableV2")
"""The table a Delta CTAS or RTAS writes into while it creates it (the class moved in Delta 4)."""


def delta_dataset(
    ctx: AnalysisContext,
    *,
    table: CapturedNode | None = None,
    path: str | None = None,
    version: Any = None,
    schema: list[SchemaField] | None = None,
    lifecycle: LifecycleStateChange | None = None,
    catalog: str | None = None,
) -> DatasetLineage | None:
    """A Delta table as a dataset: a catalog ``table`` (a captured ``CatalogTable``) by its location with its
    ``symlinks`` entry, else the table's ``path``; with ``storage``, ``catalog`` (for a catalog table, in the
    Spark catalog ``catalog``) and ``version``."""
    if table is not None:
        dataset = table_dataset(table, ctx, location=None, lifecycle=lifecycle)
        if dataset is not None and (schema or not dataset.schema):
            dataset.schema = schema
    elif path:
        dataset = DatasetLineage(naming.from_location(path), schema=schema, lifecycle=lifecycle)
    else:
        ctx.errors.append("a Delta table whose location could not be read is not reported")
        return None
    if dataset is None:
        return None
    describe_delta(dataset, version=version, catalog=catalog if table is not None else None)
    return dataset


def describe_delta(dataset: DatasetLineage, *, version: Any = None, catalog: str | None = None) -> None:
    """The facets every Delta table gets: ``storage`` (Delta keeps its data in parquet), ``catalog`` when it is a
    catalog's table, ``version`` when the log says which one."""
    dataset.extra_facets["storage"] = storage_dataset.StorageDatasetFacet(
        storageLayer=DELTA, fileFormat="parquet", producer=PRODUCER
    )
    if catalog:
        dataset.extra_facets["catalog"] = catalog_facet(framework=DELTA, type=DELTA, name=catalog, source="spark")
    if version is not None:
        dataset.extra_facets["version"] = dataset_version_dataset.DatasetVersionDatasetFacet(
            datasetVersion=str(version), producer=PRODUCER
        )


# --- path saves: df.write.format("delta").save(path) ------------------------------------------------------


@data_source_provider
class DeltaProvider(DataSourceProvider):
    """``df.write.format("delta").save(path)``: the table at ``path``."""

    providers = ("DeltaDataSource",)
    formats = ("delta",)
    option_keys = frozenset({"path"})

    def dataset(
        self, options: Mapping[str, str], schema: list[SchemaField] | None, errors: list[str]
    ) -> DatasetLineage | None:
        path = options.get("path")
        if not path:
            errors.append("a Delta save without a path: its output is not reported")
            return None
        dataset = DatasetLineage(naming.from_location(path), schema=schema)
        describe_delta(dataset)
        return dataset

    def job_suffix(self, options: Mapping[str, str]) -> str | None:
        path = options.get("path")
        return naming.path_job_suffix(naming.trim_name(path)) if path else None


# --- reads: file indexes and relations --------------------------------------------------------------------


class DeltaFileIndexHandler(NodeHandler):
    """A Delta table's file index, probed as a scan's ``location``: the table version the scan read."""

    def describe(self, node: CapturedNode, datasets: list[DatasetLineage], ctx: AnalysisContext) -> None:
        for dataset in datasets:
            describe_delta(dataset, version=node.get("version"), catalog=_catalog_of(dataset))


@register
class PreparedDeltaFileIndexHandler(DeltaFileIndexHandler):
    """The index of a planned scan (Delta's optimizer rule prepares every scan so): the version it scans."""

    class_names = ("PreparedDeltaFileIndex", "TahoeBatchFileIndex")
    probes = {"version": Probe(("version",))}


@register
class TahoeLogFileIndexHandler(DeltaFileIndexHandler):
    """The index of a scan as analyzed (the target a MERGE, UPDATE or DELETE reads): the snapshot it was
    analyzed with, which a time-travel query pins."""

    class_names = ("TahoeLogFileIndex",)
    probes = {"version": Probe(("snapshotAtAnalysis", "version"))}


@register
class DeltaRelationHandler(HadoopFsRelationHandler):
    """The relation Delta makes for the target of its commands: an anonymous ``HadoopFsRelation`` subclass
    (``DeltaLog.createRelation``; the class name is the same in Delta 3.3 and 4.1)."""

    class_names = ("DeltaLog$$anon$2",)


def _catalog_of(dataset: DatasetLineage) -> str | None:
    """The Spark catalog of a dataset named as a session-catalog table (it has a ``symlinks`` entry)."""
    return "spark_catalog" if dataset.symlinks else None


# --- V2 tables: INSERT INTO, saveAsTable, CTAS, CREATE TABLE ---------------------------------------------


@register
class DeltaTableV2Handler(NodeHandler):
    """A Delta table as the V2 catalog gives it; probed as a V2 relation's or command's table."""

    class_names = ("DeltaTableV2",)
    probes = {
        "path": Probe(("path", "toString")),
        "catalogTable": Probe(("catalogTable", "?"), "node"),
        "name": Probe(("name",)),
        # The latest version the log knows: after a write, the one it produced.
        "version": Probe(("deltaLog", "unsafeVolatileSnapshot", "version")),
        "schema": Probe(("schema", "json")),
    }


@v2_table_format
class DeltaTables(V2TableFormat):
    """Delta tables in V2 relations and commands (``INSERT INTO``, ``saveAsTable``, CTAS, ``CREATE TABLE``)."""

    table_classes = ("DeltaTableV2", *_STAGED_TABLES)

    def dataset(
        self,
        relation: CapturedNode,
        table: CapturedNode,
        ctx: AnalysisContext,
        *,
        role: str,
        lifecycle: LifecycleStateChange | None,
    ) -> DatasetLineage | None:
        return delta_dataset(
            ctx,
            table=table.get("catalogTable"),
            path=table.get("path"),
            version=table.get("version"),
            schema=schema_fields(table.get("schema")),
            lifecycle=lifecycle,
            catalog=relation.get("catalog"),
        )

    def inner_write(self, table: CapturedNode) -> bool:
        return table.simple_name in _STAGED_TABLES


# --- MERGE, UPDATE, DELETE --------------------------------------------------------------------------------


def _command_probes(*, log: str, location: str) -> dict[str, Probe]:
    """What a Delta command's handler reads: its catalog table if it has one, the table's location, and the
    table version and schema the log knows after the command (the ones it produced)."""
    snapshot = (*log.split("."), "unsafeVolatileSnapshot")
    return {
        "table": Probe(("catalogTable", "?"), "table", if_field="catalogTable"),
        "path": Probe((*location.split("."), "toString")),
        "version": Probe((*snapshot, "version")),
        "schema": Probe((*snapshot, "schema", "json")),
    }


class DeltaCommandHandler(NodeHandler):
    """A Delta command that rewrites its ``target``: the target is written, and read (the rows it keeps come
    from it), with what else it reads (a MERGE's ``source``). The command holds those plans as fields; its
    :meth:`written_plan` presents them as the children of what it writes, so that inputs and column lineage
    come from them (``spark_lineage.columns.operators`` has the rule for each command)."""

    read_fields: tuple[str, ...] = ("target",)
    """The fields holding the plans it reads, the target first."""

    def outputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        dataset = delta_dataset(
            ctx,
            table=node.get("table"),
            path=node.get("path"),
            version=node.get("version"),
            schema=schema_fields(node.get("schema")),
            catalog="spark_catalog",
        )
        return [dataset] if dataset else []

    def written_plan(self, node: CapturedNode) -> CatalystNode | None:
        """The rows the command writes, as a plan node of the command's class and fields whose children are the
        plans it reads and whose output is the target's columns, with expression ids of their own."""
        tree = node.tree
        plans = [tree.node(name) for name in self.read_fields] if tree is not None else []
        if tree is None or not plans or plans[0] is None:
            return None
        target = plans[0]
        first = _next_expr_id(tree)
        return CatalystNode(
            class_name=tree.class_name,
            fields=tree.fields,
            is_plan=True,
            output=tuple(Attribute(first + index, column.name) for index, column in enumerate(target.output)),
            children=tuple(plan for plan in plans if plan is not None and plan.is_plan),
        )


@register
class MergeIntoCommandHandler(DeltaCommandHandler):
    """``MERGE INTO``: the target, and what it reads (the target and the source)."""

    class_names = ("MergeIntoCommand",)
    probes = _command_probes(log="targetFileIndex.deltaLog", location="targetFileIndex.path")
    read_fields = ("target", "source")

    def job_suffix(self, node: CapturedNode, ctx: AnalysisContext) -> str | None:
        """As openlineage-spark names it: from the alias of the target under the statement's own alias (the
        table's name, or the path of ``delta.`/path```); none when the statement gives the target no alias."""
        target = node.plan_field("target")
        aliased = target is not None and target.simple_name == "SubqueryAlias"
        if not aliased or target is None or not target.children or target.children[0].simple_name != "SubqueryAlias":
            return None
        table: CapturedNode | None = node.get("table")
        if table is not None:
            name = table.get("info", {}).get("Table") or table.get("table")
            return str(name) if name else None
        path = node.get("path")
        return naming.path_job_suffix(naming.from_location(path).name) if path else None


@register
class UpdateCommandHandler(DeltaCommandHandler):
    """``UPDATE``. Its job has no suffix, as openlineage-spark (which finds no dataset in it) names it."""

    class_names = ("UpdateCommand",)
    probes = _command_probes(log="tahoeFileIndex.deltaLog", location="tahoeFileIndex.path")


@register
class DeleteCommandHandler(DeltaCommandHandler):
    """``DELETE``. Its job has no suffix, as openlineage-spark (which finds no dataset in it) names it."""

    class_names = ("DeleteCommand",)
    probes = _command_probes(log="deltaLog", location="deltaLog.dataPath")


def _next_expr_id(tree: CatalystNode) -> int:
    """An expression id no column or expression of the command uses."""
    return 1 + max((_expr_ids(tree)), default=0)


def _expr_ids(tree: CatalystNode) -> Iterator[int]:
    for node in tree.walk():
        if node.expr_id is not None:
            yield node.expr_id
        for column in node.output:
            yield column.expr_id
