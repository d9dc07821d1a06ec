"""The job a Spark Connect client's action is reported as: the name the driver side gives the same action.

The server names a query's job after the command its plan runs (``<app>.<command>.<suffix>``, as
openlineage-spark does: :meth:`spark_lineage.events.EventBuilder.query_job_name`). A client does not see the
server's plan, but it knows what it asked for, and the common asks map to one command each: a file ``save``
runs ``InsertIntoHadoopFsRelationCommand``, ``saveAsTable`` a CTAS, a JDBC save ``SaveIntoDataSourceCommand``.
The suffix is the one the driver side derives from the same output. So a client's runs and a server-side
install's get one job identity; an action no rule knows is named after its kind (``<app>.sql_command``).
What the write does to its output (``lifecycleStateChange``: OVERWRITE, CREATE) is what the driver side's handler
of that command says of the same save mode (:class:`ActionCommand`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from openlineage.client.generated.lifecycle_state_change_dataset import LifecycleStateChange

from spark_lineage import naming
from spark_lineage.connect.client.datasets import FILE_WRITES
from spark_lineage.connect.client.requests import ActionKind, ClientAction
from spark_lineage.connect.client.statements import StatementKind, classify
from spark_lineage.handlers.datasources import provider_for_format, save_mode_lifecycle
from spark_lineage.handlers.registry import handler_for
from spark_lineage.handlers.writes import CreateTableAsSelectCommandHandler, insert_lifecycle
from spark_lineage.lineage import DatasetLineage

INSERT_FILES = "execute_insert_into_hadoop_fs_relation_command"
CREATE_TABLE_AS_SELECT = "execute_create_data_source_table_as_select_command"
SAVE_INTO_DATA_SOURCE = "execute_save_into_data_source_command"
"""The commands a client's common writes run, as the driver side names their plan nodes in a job name."""
V2_COMMANDS = {
    "create": "atomic_create_table_as_select",
    "replace": "atomic_replace_table_as_select",
    "create_or_replace": "atomic_replace_table_as_select",
    "append": "append_data",
    "overwrite": "overwrite_by_expression",
    "overwrite_partitions": "overwrite_partitions_dynamic",
}
"""``writeTo(...)``'s modes, and the command each runs on an Iceberg (V2) table."""
V2_NODES = {
    "atomic_create_table_as_select": "CreateTableAsSelect",
    "atomic_replace_table_as_select": "ReplaceTableAsSelect",
    "append_data": "AppendData",
    "overwrite_by_expression": "OverwriteByExpression",
    "overwrite_partitions_dynamic": "OverwritePartitionsDynamic",
}
"""The logical plan node each V2 command runs, whose handler says what it does to its table."""
SAVE_MODES = {"overwrite": "Overwrite", "append": "Append", "error_if_exists": "ErrorIfExists", "ignore": "Ignore"}
"""A client's save modes as Spark's ``SaveMode`` names them (none given: ``ErrorIfExists``, Spark's default)."""


ADAPTIVE_PLAN = "adaptive_spark_plan"
"""A write whose input moves data between partitions runs under an adaptive plan, whose root names the job."""


@dataclass(frozen=True)
class ActionCommand:
    """What the server runs for a client's action, as the driver side names it and reads what it does."""

    command: str
    """As a job name names it (``<kind>_command`` when no rule knows it)."""
    suffix: str = ""
    """The job-name suffix the driver side gives it, from its outputs (``""``: none)."""
    lifecycle: LifecycleStateChange | None = None
    """What it does to its outputs (``lifecycleStateChange``), as the driver side's handler of the command says of
    the same save mode: an overwriting insert or save OVERWRITE, a save that may create its target or a CTAS
    CREATE, a V2 write what its node's handler says; an append nothing."""


def action_command(
    action: ClientAction, outputs: list[DatasetLineage], output_tables: list[str], *, adaptive: bool = True
) -> ActionCommand:
    """The command the server runs for ``action``, its job-name suffix from its outputs, and what it does to them.
    ``adaptive``: the server plans adaptively (``spark.sql.adaptive.enabled``, on by default)."""
    found = _command(action, outputs, output_tables)
    if adaptive and action.exchanges and found.command == INSERT_FILES:
        return replace(found, command=ADAPTIVE_PLAN)
    return found


def _command(action: ClientAction, outputs: list[DatasetLineage], output_tables: list[str]) -> ActionCommand:
    write = action.write
    first = outputs[0] if outputs else None
    if write is not None and action.kind == ActionKind.WRITE:
        source = (write.format or "").lower()
        saved = provider_for_format(source) if write.method == "save" else None
        if saved is not None:  # a save through a data source provider: suffixed as the driver side's handler does
            mode = SAVE_MODES.get(write.mode or "", "ErrorIfExists")
            lifecycle = save_mode_lifecycle(mode) if saved.save_mode_is_lifecycle else None
            return ActionCommand(SAVE_INTO_DATA_SOURCE, saved.job_suffix(write.save_options()) or "", lifecycle)
        if write.table and _catalog_of(write.table) is not None:
            return _v2(_v2_write(write.method, write.mode), write.table)
        if write.method == "saveAsTable" and write.table:
            return ActionCommand(CREATE_TABLE_AS_SELECT, _table_suffix(first, write.table), _CTAS_LIFECYCLE)
        if not source or source in FILE_WRITES or write.method == "insertInto":
            return ActionCommand(INSERT_FILES, _path_suffix(first), insert_lifecycle(write.mode == "overwrite"))
    if write is not None and action.kind == ActionKind.WRITE_V2:
        return _v2(V2_COMMANDS.get(write.mode or "", V2_COMMANDS["append"]), write.table or "")
    if action.kind == ActionKind.SQL and action.sql:
        statement = classify(action.sql[0])
        if statement.kind is StatementKind.CREATE_AS_SELECT and output_tables:
            table = output_tables[0]
            if _catalog_of(table) is None:
                return ActionCommand(CREATE_TABLE_AS_SELECT, _table_suffix(first, table), _CTAS_LIFECYCLE)
            return _v2(V2_COMMANDS["replace" if statement.replaces else "create"], table)
        if statement.kind is StatementKind.INSERT:
            return ActionCommand(INSERT_FILES, _path_suffix(first), insert_lifecycle(statement.overwrites))
    return ActionCommand(f"{action.kind.value}_command", _path_suffix(first))


_CTAS_LIFECYCLE = CreateTableAsSelectCommandHandler.lifecycle


def _v2(command: str, table: str) -> ActionCommand:
    """A V2 write (Iceberg's), named as the driver side names it, doing what its logical node's handler says."""
    handler = handler_for(V2_NODES[command])
    lifecycle = getattr(handler, "lifecycle", None)
    return ActionCommand(
        command, _v2_suffix(command, table), lifecycle if isinstance(lifecycle, LifecycleStateChange) else None
    )


def _v2_write(method: str, mode: str | None) -> str:
    """The command a ``saveAsTable`` or ``insertInto`` runs on a table of a V2 catalog (Iceberg's), by mode."""
    if method == "insertInto":
        return V2_COMMANDS["overwrite" if mode == "overwrite" else "append"]
    return V2_COMMANDS[{"overwrite": "replace", "append": "append"}.get(mode or "", "create")]


def _catalog_of(table: str) -> str | None:
    """The catalog a table name names before its database, unless it is the session catalog."""
    parts = table.replace("`", "").split(".")
    return parts[0] if len(parts) > 2 and parts[0].lower() != "spark_catalog" else None


def _v2_suffix(command: str, table: str) -> str:
    """As the driver side names a V2 write: a create or replace by the table's identifier in its catalog, an
    append or overwrite with the catalog before it."""
    name = table.replace("`", "")
    if command.startswith("atomic_") and _catalog_of(name) is not None:
        return name.split(".", 1)[1]
    return name


def _path_suffix(dataset: DatasetLineage | None) -> str:
    return naming.path_job_suffix(dataset.identifier.name) if dataset is not None else ""


def _table_suffix(dataset: DatasetLineage | None, written: str) -> str:
    """``db_table``, from the table's symlink (its ``db.table``), else from the name written."""
    symlink = dataset.symlinks[0] if dataset is not None and dataset.symlinks else None
    name = symlink.name if symlink is not None else written.replace("`", "")
    return name.replace(".", "_")
