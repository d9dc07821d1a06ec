"""From a captured query to its lineage: which queries are reported, and which datasets they touched.

Pure Python: it reads :mod:`spark_lineage.plan` records and dispatches each node to its handler.
"""

from __future__ import annotations

from spark_lineage.handlers import handler_for
from spark_lineage.lineage import AnalysisContext, DatasetLineage, QueryLineage
from spark_lineage.plan import CapturedNode, CapturedPlan, CapturedQuery

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

# Spark 4 reports queries that failed analysis as funcName "analyze": they never ran, and read nothing.
_NOT_EXECUTED = frozenset({"analyze"})

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


def is_reported(root_class: str, func_name: str, *, filter_read_only: bool) -> bool:
    """Whether a query with this plan root and action is worth capturing at all."""
    if func_name in _NOT_EXECUTED:
        return False
    return not (filter_read_only and root_class in READ_ONLY_ROOTS)


def wants_write_metrics(root_class: str) -> bool:
    handler = handler_for(root_class)
    return handler is not None and handler.reports_write_metrics


def analyze(query: CapturedQuery, ctx: AnalysisContext) -> QueryLineage:
    """The datasets a query read and wrote, and why any of them might be missing."""
    result = QueryLineage(errors=list(query.capture_errors))
    ctx.errors = result.errors
    ctx.inputs_of = plan_inputs
    plan = query.plan
    if plan is None:
        return result
    root = plan.root
    handler = handler_for(root.simple_name)
    if handler is not None:
        result.outputs = _dedupe(handler.outputs(root, ctx))
        result.job_suffix = handler.job_suffix(root, ctx)
    elif not plan.leaves:  # a single-node plan (a command) nothing can read
        result.errors.append(f"no handler for plan node {root.class_name}: its inputs and outputs are not reported")
        return result
    elif query.func_name in _WRITING_ACTIONS:
        result.errors.append(f"no handler for plan node {root.class_name}: its outputs are not reported")
    result.inputs = _dedupe(plan_inputs(plan, ctx))
    result.errors.extend(_probe_errors(plan))
    return result


def plan_inputs(plan: CapturedPlan, ctx: AnalysisContext) -> list[DatasetLineage]:
    """The datasets a (possibly nested) plan reads: what its root reads itself, plus each leaf's."""
    found: list[DatasetLineage] = []
    root_handler = handler_for(plan.root.simple_name)
    if root_handler is not None:
        found.extend(root_handler.inputs(plan.root, ctx))
    elif not plan.leaves:
        ctx.errors.append(f"no handler for plan node {plan.root.class_name}: its inputs are not reported")
    for leaf in plan.leaves:
        handler = handler_for(leaf.simple_name)
        if handler is None:
            ctx.errors.append(f"no handler for plan node {leaf.class_name}: its inputs are not reported")
            continue
        found.extend(handler.inputs(leaf, ctx))
    return found


def is_empty(lineage: QueryLineage) -> bool:
    """A query that touched no dataset and lost nothing (SET, SHOW, spark.range(...).collect())."""
    return not (lineage.inputs or lineage.outputs or lineage.errors)


def _dedupe(datasets: list[DatasetLineage]) -> list[DatasetLineage]:
    by_identity: dict[tuple[str, str], DatasetLineage] = {}
    for dataset in datasets:
        key = (dataset.identifier.namespace, dataset.identifier.name)
        if key in by_identity:
            by_identity[key].merge(dataset)
        else:
            by_identity[key] = dataset
    return list(by_identity.values())


def _probe_errors(plan: CapturedPlan) -> list[str]:
    errors: list[str] = []

    def visit(node: CapturedNode) -> None:
        errors.extend(f"{node.simple_name}.{name}: {message}" for name, message in node.errors.items())
        for value in node.props.values():
            if isinstance(value, CapturedNode):
                visit(value)
            elif isinstance(value, CapturedPlan):
                visit(value.root)
                for leaf in value.leaves:
                    visit(leaf)

    visit(plan.root)
    for leaf in plan.leaves:
        visit(leaf)
    return errors
