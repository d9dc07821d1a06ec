"""DDL on session-catalog tables: datasets created, dropped, truncated, renamed and altered.

Spark calls the listener after a command ran, so a dropped or renamed-away table is looked up after it is
gone; :func:`~spark_lineage.handlers.base.table_dataset` then places it where this session last saw it.
"""

from __future__ import annotations

from openlineage.client.generated.lifecycle_state_change_dataset import LifecycleStateChange

from spark_lineage import naming
from spark_lineage.handlers.base import NodeHandler, table_dataset, table_suffix
from spark_lineage.handlers.iceberg import iceberg_dataset
from spark_lineage.handlers.registry import register
from spark_lineage.lineage import AnalysisContext, DatasetLineage
from spark_lineage.naming import DatasetIdentifier
from spark_lineage.plan import CapturedNode, Probe

SESSION_CATALOG = "spark_catalog"


class TableCommandHandler(NodeHandler):
    """A command on one table, named by the ``table`` probe, with a fixed lifecycle state."""

    lifecycle: LifecycleStateChange = LifecycleStateChange.ALTER

    def outputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        if node.get("isView") is True:
            return []
        dataset = table_dataset(node.get("table"), ctx, lifecycle=self.lifecycle)
        return [dataset] if dataset else []


@register
class CreateTableCommandHandler(TableCommandHandler):
    """``CREATE TABLE`` without a query."""

    class_names: tuple[str, ...] = ("CreateDataSourceTableCommand",)
    probes = {"table": Probe(("table",), "table")}
    lifecycle = LifecycleStateChange.CREATE

    def job_suffix(self, node: CapturedNode, ctx: AnalysisContext) -> str | None:
        return table_suffix(node.get("table"))


@register
class CreateHiveTableCommandHandler(CreateTableCommandHandler):
    """``CREATE TABLE`` of a Hive-format table (``STORED AS``, ``ROW FORMAT``, or no ``USING`` with Hive
    support), which the reference names after the table's location rather than its name."""

    class_names = ("CreateTableCommand",)

    def job_suffix(self, node: CapturedNode, ctx: AnalysisContext) -> str | None:
        dataset = table_dataset(node.get("table"), ctx)
        return naming.path_job_suffix(dataset.identifier.name) if dataset else None


@register
class DropTableCommandHandler(TableCommandHandler):
    """``DROP TABLE`` as a V1 command."""

    class_names = ("DropTableCommand",)
    probes = {"table": Probe(("tableName",), "table"), "isView": Probe(("isView",))}
    lifecycle = LifecycleStateChange.DROP


@register
class DropTableHandler(TableCommandHandler):
    """``DROP TABLE`` as a V2 command over a resolved identifier; session-catalog tables only here."""

    class_names = ("DropTable",)
    probes = {
        "catalog": Probe(("child", "catalog", "name")),
        "identifier": Probe(("child", "identifier", "toString")),
        "table": Probe(("child", "identifier", "toString"), "table"),
    }
    lifecycle = LifecycleStateChange.DROP

    def outputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        catalog, identifier = node.get("catalog", SESSION_CATALOG), node.get("identifier")
        is_iceberg = naming.IcebergCatalog.from_spark_conf(catalog, dict(ctx.session.conf)) is not None
        if is_iceberg and (catalog != SESSION_CATALOG or f"{catalog}.{identifier}" in ctx.table_locations):
            named = CapturedNode("DropTable", {"catalog": catalog, "identifier": identifier})
            dataset = iceberg_dataset(named, ctx, role="command", lifecycle=LifecycleStateChange.DROP)
            return [dataset] if dataset else []
        if catalog != SESSION_CATALOG:
            return []
        return super().outputs(node, ctx)


@register
class TruncateTableCommandHandler(TableCommandHandler):
    """``TRUNCATE TABLE``."""

    class_names = ("TruncateTableCommand",)
    probes = {"table": Probe(("tableName",), "table")}
    lifecycle = LifecycleStateChange.TRUNCATE

    def job_suffix(self, node: CapturedNode, ctx: AnalysisContext) -> str | None:
        dataset = table_dataset(node.get("table"), ctx)
        return naming.path_job_suffix(dataset.identifier.name) if dataset else None


@register
class AlterTableRenameCommandHandler(NodeHandler):
    """``ALTER TABLE ... RENAME TO``: the renamed table, with the identity it had before."""

    class_names = ("AlterTableRenameCommand",)
    probes = {
        "table": Probe(("newName",), "table"),
        "oldTable": Probe(("oldName", "table")),
        "isView": Probe(("isView",)),
    }

    def outputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        table: CapturedNode | None = node.get("table")
        if node.get("isView") is True or table is None:
            return []
        new_name, old_name = table.get("table"), node.get("oldTable")
        dataset = table_dataset(
            table,
            ctx,
            location=self._moved_external_location(table, old_name, ctx),
            lifecycle=LifecycleStateChange.RENAME,
        )
        if dataset is None:
            return []
        if new_name and old_name:
            # openlineage-spark derives the old identity by substituting the table name in the new location.
            dataset.previous = DatasetIdentifier(
                dataset.identifier.namespace, dataset.identifier.name.replace(new_name, old_name)
            )
        return [dataset]

    @staticmethod
    def _moved_external_location(table: CapturedNode, old_name: str | None, ctx: AnalysisContext) -> str | None:
        """Where a renamed table lives when it was gone again by the time we looked: a managed table moves to
        its new default location, an external one stays where this session last saw it under its old name."""
        if table.get("exists") is not False or not old_name:
            return None
        database = table.get("database")
        remembered = ctx.table_locations.get(f"{database}.{old_name}" if database else old_name)
        warehouse = ctx.session.warehouse
        if remembered is None or warehouse is None:
            return None
        managed = naming.location_uri(remembered).rstrip("/") == naming.default_table_location(
            warehouse, database, old_name
        )
        return None if managed else remembered


@register
class AlterTableHandler(TableCommandHandler):
    """Other ``ALTER TABLE`` commands that name their table ``tableName``."""

    class_names = (
        "AlterTableSetPropertiesCommand",
        "AlterTableUnsetPropertiesCommand",
        "AlterTableChangeColumnCommand",
        "AlterTableSetLocationCommand",
        "AlterTableSerDePropertiesCommand",
        "AlterTableAddPartitionCommand",
        "AlterTableDropPartitionCommand",
        "AlterTableRenamePartitionCommand",
        "AlterTableRecoverPartitionsCommand",
        "RepairTableCommand",
    )
    probes = {"table": Probe(("tableName",), "table"), "isView": Probe(("isView",))}
    lifecycle = LifecycleStateChange.ALTER


@register
class AlterTableAddColumnsHandler(TableCommandHandler):
    """``ALTER TABLE ... ADD COLUMNS``, whose command names its table ``table``."""

    class_names = ("AlterTableAddColumnsCommand",)
    probes = {"table": Probe(("table",), "table")}
    lifecycle = LifecycleStateChange.ALTER


@register
class SessionCommandHandler(NodeHandler):
    """Commands that change or show session state and touch no dataset: known, so that they are not
    reported as plan nodes the analysis could not read."""

    class_names = (
        "SetCommand",
        "ResetCommand",
        "SetNamespaceCommand",
        "SetCatalogCommand",
        "ShowTablesCommand",
        "ShowColumnsCommand",
        "ShowPartitionsCommand",
        "ShowCreateTableCommand",
        "ShowTablePropertiesCommand",
        "ShowFunctionsCommand",
        "ShowNamespacesCommand",
        "DescribeTableCommand",
        "DescribeColumnCommand",
        "DescribeFunctionCommand",
        "DescribeDatabaseCommand",
        "ExplainCommand",
        "CacheTableCommand",
        "UncacheTableCommand",
        "ClearCacheCommand",
        "AddJarsCommand",
        "AddFilesCommand",
        "AddArchivesCommand",
        "ListJarsCommand",
        "ListFilesCommand",
        "CreateFunctionCommand",
        "DropFunctionCommand",
        "CreateViewCommand",
        "AlterViewAsCommand",
        "CreateDatabaseCommand",
        "DropDatabaseCommand",
        "AlterDatabasePropertiesCommand",
        "RefreshTableCommand",
        "RefreshResourceCommand",
        "AnalyzeTableCommand",
        "AnalyzeColumnCommand",
        "AnalyzeTablesCommand",
        "ShowTables",
        "ShowNamespaces",
        "SetCatalogAndNamespace",
        "CreateNamespace",
        "DropNamespace",
    )
