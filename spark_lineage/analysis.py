"""From a captured query to its lineage: which queries are reported, and which datasets they touched.

Pure Python: it reads :mod:`spark_lineage.plan` records and dispatches each node to its handler.
"""

from __future__ import annotations

from collections.abc import Mapping

from spark_lineage import costs, naming
from spark_lineage.columns import attach_column_lineage
from spark_lineage.config import ColumnLineageConfig
from spark_lineage.costs import Stage
from spark_lineage.handlers import handler_for
from spark_lineage.handlers.registry import plan_inputs, probed
from spark_lineage.lineage import AnalysisContext, DatasetLineage, QueryLineage
from spark_lineage.plan import CapturedNode, CapturedQuery, CatalystNode
from spark_lineage.unknown_nodes import find_unknown

# Roots of plans openlineage-spark does not report: read-only actions (collect, count, show) and
# session bookkeeping. Kept identical to the reference's SparkNodesFilter and CreateViewFilter.
READ_ONLY_ROOTS = frozenset(
    {
        "ShowTables",
        "CreateNamespace",
        "SetCatalogAndNamespace",
        "Project",
        "Aggregate",
        "Repartition",
        "CreateDatabaseCommand",
        "RefreshTableCommand",
        "LocalRelation",
        "CreateViewCommand",
    }
)

# Roots openlineage-spark also skips in a session with Delta Lake's extension (its DeltaEventFilter): Delta reads
# its transaction log with queries of these shapes (a snapshot's state, a table's files), and may copy a MERGE's
# source so.
DELTA_SESSION_ROOTS = frozenset({"SerializeFromObject", "Filter"})

# Spark 4 reports queries that failed analysis as funcName "analyze": they never ran, and read nothing.
_NOT_EXECUTED = frozenset({"analyze"})

# Executions an engine runs inside a command that is reported itself: Delta Lake writes the files of a save,
# MERGE, UPDATE or DELETE as an execution of its own (openlineage-spark filters them too, by plan shape).
_INNER_EXECUTIONS = frozenset({"deltaTransactionalWrite"})

# funcNames of actions that write or run a command: if their root has no handler, outputs may be missing.
_WRITING_ACTIONS = frozenset(
    {
        "command",
        "save",
        "saveAsTable",
        "insertInto",
        "append",
        "overwrite",
        "overwritePartitions",
        "create",
        "replace",
        "createOrReplace",
    }
)


# A micro-batch that writes to a DSv2 sink (Kafka, Iceberg, foreach) runs its write as a nested collect on the
# stream's session, which our listener hears: the micro-batch is reported by the streaming query's own events.
# Batch V2 writes are planned as AppendData and its kin, so this root with this action is a stream's only.
_MICRO_BATCH_WRITE = ("WriteToDataSourceV2", "collect")


def is_reported(
    root_class: str,
    func_name: str,
    *,
    filter_read_only: bool,
    read_only_roots: frozenset[str] = READ_ONLY_ROOTS,
    allowed: frozenset[str] = frozenset(),
    denied: frozenset[str] = frozenset(),
) -> bool:
    """Whether a query with this plan root and action is worth capturing at all. ``allowed`` and ``denied``
    (``filter.allowedSparkNodes`` / ``deniedSparkNodes``) change which roots are read-only as in the reference:
    an allowed root is reported, else a denied one is not."""
    if func_name in _NOT_EXECUTED or func_name in _INNER_EXECUTIONS or (root_class, func_name) == _MICRO_BATCH_WRITE:
        return False
    if root_class in allowed:
        return True
    if root_class in denied:
        return False
    return not (filter_read_only and root_class in read_only_roots)


def read_only_roots(conf: Mapping[str, str]) -> frozenset[str]:
    """The plan roots of queries not reported in a session with this configuration."""
    return READ_ONLY_ROOTS | DELTA_SESSION_ROOTS if naming.has_delta_extension(conf) else READ_ONLY_ROOTS


def reports_query_jobs(conf: Mapping[str, str]) -> bool:
    """Whether a query run gets RUNNING events for its Spark jobs in a session with this configuration: not with
    Delta's session extension, where openlineage-spark drops every SQL execution's job events (its Delta event
    filter, which would otherwise report Delta's commands twice)."""
    return not naming.has_delta_extension(conf)


def wants_write_metrics(root_class: str) -> bool:
    handler = handler_for(root_class)
    return handler is not None and handler.reports_write_metrics


def analyze(
    query: CapturedQuery, ctx: AnalysisContext, columns: ColumnLineageConfig | None = None, *, unknown: bool = False
) -> QueryLineage:
    """The datasets a query read and wrote, and why any of them might be missing; with ``columns``, each
    output's column lineage too; with ``unknown``, the plan nodes no handler knows (``spark_unknown``)."""
    result = QueryLineage(errors=list(query.capture_errors))
    ctx.errors = result.errors
    ctx.datasets_read = {}
    tree = query.tree
    if tree is None:
        return result
    if unknown:
        result.unknown = find_unknown(tree, query.logical_plan)
    handler = handler_for(tree.simple_name)
    root = probed(tree)
    if handler is not None and handler.reported_by_outer_command(root):
        return result
    if handler is not None and handler.wraps_reported_queries:
        result.wraps_reported_queries = True
        return result
    inputs: list[DatasetLineage] = []
    written = handler.written_plan(root) if handler is not None else None
    if handler is not None:
        result.outputs = _dedupe(handler.outputs(root, ctx))
        result.job_suffix = handler.job_suffix(root, ctx)
        inputs = handler.inputs(root, ctx)
        ctx.datasets_read[id(tree)] = inputs
        if written is not None:
            inputs = inputs + plan_inputs(written, ctx)
    elif not tree.children:  # a single-node plan (a command) nothing can read
        result.errors.append(f"no handler for plan node {tree.class_name}: its inputs and outputs are not reported")
        return result
    elif query.func_name in _WRITING_ACTIONS:
        result.errors.append(f"no handler for plan node {tree.class_name}: its outputs are not reported")
    if tree.children:
        inputs = inputs + plan_inputs(tree, ctx)
    result.inputs = _dedupe(inputs)
    result.errors.extend(_probe_errors(tree))
    if columns is not None and result.outputs:
        with costs.stage(Stage.COLUMN_LINEAGE):
            attach_column_lineage(tree, written, result.outputs, ctx, columns)
    return result


def is_empty(lineage: QueryLineage) -> bool:
    """A query that touched no dataset and lost nothing (SET, SHOW, spark.range(...).collect()), and is not a
    command that is reported without datasets."""
    return not (lineage.inputs or lineage.outputs or lineage.errors or lineage.wraps_reported_queries)


def _dedupe(datasets: list[DatasetLineage]) -> list[DatasetLineage]:
    by_identity: dict[tuple[str, str], DatasetLineage] = {}
    for dataset in datasets:
        key = (dataset.identifier.namespace, dataset.identifier.name)
        if key in by_identity:
            by_identity[key].merge(dataset)
        else:
            by_identity[key] = dataset
    return list(by_identity.values())


def _probe_errors(tree: CatalystNode) -> list[str]:
    """Probes that failed anywhere in the plan, nested captures and nested plans included."""
    errors: list[str] = []
    _plan_probe_errors(tree, errors, set())
    return errors


# Functions of the module, not closures of ``_probe_errors``: two closures that call each other are a reference
# cycle, left for the garbage collector after every query.
def _plan_probe_errors(plan: CatalystNode, errors: list[str], seen: set[int]) -> None:
    for node in plan.plan_nodes():
        if node.probed is not None and id(node.probed) not in seen:
            _node_probe_errors(node.probed, errors, seen)


def _node_probe_errors(node: CapturedNode, errors: list[str], seen: set[int]) -> None:
    seen.add(id(node))
    errors.extend(f"{node.simple_name}.{name}: {message}" for name, message in node.errors.items())
    for value in node.props.values():
        if isinstance(value, CapturedNode):
            _node_probe_errors(value, errors, seen)
        elif isinstance(value, CatalystNode):
            _plan_probe_errors(value, errors, seen)
