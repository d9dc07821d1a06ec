"""Commands that write data to files and session-catalog tables."""

from __future__ import annotations

from openlineage.client.generated.lifecycle_state_change_dataset import LifecycleStateChange

from spark_lineage import naming
from spark_lineage.handlers.base import NodeHandler, add_hive_catalog, schema_fields, table_dataset, table_suffix
from spark_lineage.handlers.registry import register
from spark_lineage.lineage import AnalysisContext, DatasetLineage
from spark_lineage.plan import CapturedNode, CatalystNode, Probe


def insert_lifecycle(overwrite: bool) -> LifecycleStateChange | None:
    """What an insert into files or a table does to it: an overwrite is OVERWRITE; an append changes nothing
    about the dataset itself."""
    return LifecycleStateChange.OVERWRITE if overwrite else None


@register
class InsertIntoHadoopFsRelationCommandHandler(NodeHandler):
    """``df.write.parquet(...)``, ``insertInto``, ``INSERT INTO/OVERWRITE`` a file-based table."""

    class_names = ("InsertIntoHadoopFsRelationCommand",)
    probes = {
        "outputPath": Probe(("outputPath",)),
        "mode": Probe(("mode",)),
        "catalogTable": Probe(("catalogTable", "?"), "node", if_field="catalogTable"),
        "schema": Probe(("query", "schema", "json")),
    }
    reports_write_metrics = True

    def outputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        lifecycle = insert_lifecycle(node.get("mode") == "Overwrite")
        dataset = table_dataset(
            node.get("catalogTable"),
            ctx,
            location=node.get("outputPath"),
            lifecycle=lifecycle,
            schema_json=node.get("schema"),
            # The reference names this write from its path, and gives it no catalog facet.
            with_catalog=False,
        )
        return [dataset] if dataset else []

    def job_suffix(self, node: CapturedNode, ctx: AnalysisContext) -> str | None:
        path = node.get("outputPath")
        return naming.path_job_suffix(naming.from_location(path).name) if path else None


@register
class InsertIntoHiveTableHandler(NodeHandler):
    """``INSERT INTO/OVERWRITE`` a Hive-format table."""

    class_names = ("InsertIntoHiveTable",)
    probes = {
        "table": Probe(("table",), "node"),
        "overwrite": Probe(("overwrite",)),
        "schema": Probe(("query", "schema", "json")),
    }
    reports_write_metrics = True

    def outputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        lifecycle = insert_lifecycle(node.get("overwrite") is True)
        dataset = table_dataset(node.get("table"), ctx, lifecycle=lifecycle, schema_json=node.get("schema"))
        return [dataset] if dataset else []

    def job_suffix(self, node: CapturedNode, ctx: AnalysisContext) -> str | None:
        dataset = table_dataset(node.get("table"), ctx)
        return naming.path_job_suffix(dataset.identifier.name) if dataset else None


@register
class CreateTableAsSelectCommandHandler(NodeHandler):
    """``CREATE TABLE ... AS SELECT`` and ``saveAsTable`` into the session catalog. Spark runs the write
    itself as a nested insert, which is reported as a query of its own, as the reference does."""

    class_names: tuple[str, ...] = ("CreateDataSourceTableAsSelectCommand",)
    lifecycle = LifecycleStateChange.CREATE
    """What the command does to its table (the ``Optimized`` Hive command overwrites it)."""
    probes = {
        "table": Probe(("table",), "table"),
        "schema": Probe(("query", "schema", "json")),
    }

    def written_plan(self, node: CapturedNode) -> CatalystNode | None:
        return node.plan_field("query")

    def outputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        lifecycle = LifecycleStateChange.OVERWRITE if node.simple_name.startswith("Optimized") else self.lifecycle
        dataset = table_dataset(node.get("table"), ctx, lifecycle=lifecycle, schema_json=node.get("schema"))
        return [dataset] if dataset else []

    def job_suffix(self, node: CapturedNode, ctx: AnalysisContext) -> str | None:
        return table_suffix(node.get("table"))


@register
class CreateHiveTableAsSelectCommandHandler(CreateTableAsSelectCommandHandler):
    """``CREATE TABLE ... STORED AS ... AS SELECT`` with Hive support."""

    class_names = ("CreateHiveTableAsSelectCommand", "OptimizedCreateHiveTableAsSelectCommand")
    probes = {
        "table": Probe(("tableDesc",), "table"),
        "schema": Probe(("query", "schema", "json")),
    }


@register
class SaveAsV1TableCommandHandler(NodeHandler):
    """``saveAsTable`` into the session catalog on Spark 4.1+, which plans it as a command of its own around
    the CTAS or the insert that writes the table: those are reported with the table; the save itself is a run
    without datasets, named ``<app>.execute_save_as_v1_table_command`` as openlineage-spark names it."""

    class_names = ("SaveAsV1TableCommand",)
    wraps_reported_queries = True


@register
class InsertIntoDataSourceDirCommandHandler(NodeHandler):
    """``INSERT OVERWRITE DIRECTORY '/d' USING parquet SELECT …`` (and ``STORED AS PARQUET``/``ORC`` with Hive,
    which Spark converts to it). The directory is the output; the job name keeps no suffix, as the reference's
    has none for this command. Spark writes the files as a nested insert, reported as a query of its own."""

    class_names = ("InsertIntoDataSourceDirCommand",)
    probes = {
        "location": Probe(("storage", "locationUri", "?", "toString")),
        "overwrite": Probe(("overwrite",)),
        "schema": Probe(("query", "schema", "json")),
    }

    def written_plan(self, node: CapturedNode) -> CatalystNode | None:
        return node.plan_field("query")

    def outputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        return directory_output(node)


@register
class InsertIntoHiveDirCommandHandler(NodeHandler):
    """``INSERT OVERWRITE [LOCAL] DIRECTORY '/d' STORED AS TEXTFILE SELECT …`` with Hive support: the directory
    is the output, and its last two segments end the job name, as the reference names it."""

    class_names = ("InsertIntoHiveDirCommand",)
    probes = InsertIntoDataSourceDirCommandHandler.probes
    reports_write_metrics = True

    def outputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        datasets = directory_output(node)
        # The reference gives a Hive directory the session's Hive catalog facet, though no table is involved.
        for dataset in datasets:
            add_hive_catalog(dataset, ctx.session)
        return datasets

    def job_suffix(self, node: CapturedNode, ctx: AnalysisContext) -> str | None:
        location = node.get("location")
        return naming.path_job_suffix(naming.from_location(location).name) if location else None


def directory_output(node: CapturedNode) -> list[DatasetLineage]:
    """The directory an ``INSERT OVERWRITE DIRECTORY`` writes, with the query's schema; OVERWRITE as the
    statement says (Spark's parser knows no other form, but the command keeps the flag)."""
    location = node.get("location")
    if not location:
        return []
    lifecycle = LifecycleStateChange.OVERWRITE if node.get("overwrite") is True else None
    return [
        DatasetLineage(naming.from_location(location), schema=schema_fields(node.get("schema")), lifecycle=lifecycle)
    ]


@register
class LoadDataCommandHandler(NodeHandler):
    """``LOAD DATA [LOCAL] INPATH '/f' [OVERWRITE] INTO TABLE t``: the table is the output, named as any
    session-catalog table, and the path it loads the input. Like the reference, no lifecycle state, even for
    OVERWRITE."""

    class_names = ("LoadDataCommand",)
    probes = {"table": Probe(("table",), "table"), "path": Probe(("path",))}

    def inputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        path = node.get("path")
        return [DatasetLineage(naming.from_location(path))] if path else []

    def outputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        dataset = table_dataset(node.get("table"), ctx)
        return [dataset] if dataset else []

    def job_suffix(self, node: CapturedNode, ctx: AnalysisContext) -> str | None:
        return table_suffix(node.get("table"))
