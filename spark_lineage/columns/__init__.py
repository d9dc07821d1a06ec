"""Column-level lineage: which input columns each output column of a query comes from, and how.

Pure Python over the query's :class:`~spark_lineage.plan.CatalystNode` tree:

- :mod:`~spark_lineage.columns.operators`: what each plan node does to columns (a rule per class name);
- :mod:`~spark_lineage.columns.expressions`: what each expression does (a rule per class name);
- :mod:`~spark_lineage.columns.graph`: the column dependency graph and its walk;
- :mod:`~spark_lineage.columns.transformations`: the transformation types and how they compose.

Leaves name their columns after the datasets their handlers found (``ctx.datasets_read``), so column lineage
and input datasets always agree. To support a new plan node, add a rule in ``operators.py``; a new
expression, in ``expressions.py``.
"""

from __future__ import annotations

import time

from spark_lineage.columns.graph import ColumnGraph, merge_sources
from spark_lineage.columns.operators import link_ctes, rule_for
from spark_lineage.config import ColumnLineageConfig
from spark_lineage.errors import BudgetExceededError
from spark_lineage.handlers import handler_for
from spark_lineage.handlers.registry import evaluated_nodes, probed
from spark_lineage.lineage import AnalysisContext, ColumnLineage, DatasetLineage, InputColumn
from spark_lineage.plan import CatalystNode

__all__ = ["attach_column_lineage"]


def attach_column_lineage(
    tree: CatalystNode,
    written: CatalystNode | None,
    outputs: list[DatasetLineage],
    ctx: AnalysisContext,
    config: ColumnLineageConfig,
) -> None:
    """Give each output dataset with a schema its column lineage. ``written`` is the plan whose columns are
    written when it is not the tree's root (see ``NodeHandler.written_plan``). A plan that cannot be analyzed
    within the budget, or at all, leaves the outputs without column lineage and says so in ``ctx.errors``."""
    deadline = time.monotonic() + config.budget_millis / 1000
    try:
        graph = _graph(written or tree, ctx, deadline, config.descriptions)
        dataset_sources = graph.dataset_sources()
        for dataset in outputs:
            if dataset.schema is None or len(dataset.schema) > config.schema_size_limit:
                continue
            names = [field.name for field in dataset.schema]
            columns = written_columns(written or tree, names)
            fields = {}
            for name in names:
                if name in columns:
                    sources = graph.sources(columns[name], name)
                    if sources:
                        fields[name] = sources
            if not fields:
                continue
            if config.dataset_lineage:
                dataset.column_lineage = ColumnLineage(fields, dataset_sources)
            else:
                merged = {name: merge_sources(sources, dataset_sources) for name, sources in fields.items()}
                dataset.column_lineage = ColumnLineage(merged)
    except BudgetExceededError as error:
        ctx.errors.append(f"column lineage: {error}; the datasets are reported without it")
    except Exception as error:  # noqa: BLE001 - a plan no rule foresaw must not cost the query its datasets
        ctx.errors.append(f"column lineage failed ({error!r}); the datasets are reported without it")


def _graph(tree: CatalystNode, ctx: AnalysisContext, deadline: float, descriptions: bool) -> ColumnGraph:
    graph = ColumnGraph(deadline, descriptions=descriptions)
    plans = _all_plans(tree)
    for count, node in enumerate(plans):
        rule = rule_for(node)
        if rule is not None:
            rule(node, graph)
        if not node.children and id(node) in ctx.datasets_read:
            _read_columns(node, ctx.datasets_read[id(node)], graph)
        if count % 256 == 0:
            graph.check_time()
    link_ctes(plans, graph)
    return graph


def _all_plans(tree: CatalystNode) -> list[CatalystNode]:
    """Every plan node that makes the written columns: the plan's, and those of plans its nodes' handlers
    read beside it (the plan a cache holds)."""
    plans: list[CatalystNode] = []
    pending = [tree]
    while pending:
        for node in evaluated_nodes(pending.pop()):
            plans.append(node)
            if node.probed is not None:
                pending.extend(v for v in node.probed.props.values() if isinstance(v, CatalystNode))
    return plans


def _read_columns(leaf: CatalystNode, datasets: list[DatasetLineage], graph: ColumnGraph) -> None:
    """Tie a leaf's columns to the input columns they stand for."""
    handler = handler_for(leaf.simple_name)
    sources = handler.column_sources(probed(leaf), datasets) if handler is not None else None
    for attribute in leaf.output:
        if sources is None:
            for dataset in datasets:
                graph.add_input(attribute.expr_id, InputColumn(dataset.identifier, attribute.name))
        else:
            for column in sources.get(attribute.name, ()):
                graph.add_input(attribute.expr_id, column)


def written_columns(plan: CatalystNode, names: list[str]) -> dict[str, int]:
    """The expression id of each written column: the output of the first node, from the top, whose output
    has columns of these names (a write command's own output is empty; its query's is what it writes)."""
    wanted = set(names)
    folded = {name.lower(): name for name in names}
    pending = [plan]
    while pending:
        node = pending.pop(0)
        found: dict[str, int] = {}
        for attribute in node.output:
            name = attribute.name if attribute.name in wanted else folded.get(attribute.name.lower())
            if name is not None and name not in found:
                found[name] = attribute.expr_id
        if found:
            return found
        pending.extend(node.children)
    return {}
