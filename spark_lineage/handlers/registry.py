"""The handler registry: plan-node class name -> handler. Adding a node type means adding one handler.

Also the two walks every handler may need: the datasets a (possibly nested) plan reads, and what a captured
object nested in a node reads by its own class's handler.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from spark_lineage.handlers.base import NodeHandler
from spark_lineage.lineage import AnalysisContext, DatasetLineage
from spark_lineage.plan import CapturedNode, CatalystNode, Probe
from spark_lineage.registry import Registrar, Registry

HANDLERS: Registry[NodeHandler] = Registry("plan-node handler")


register = Registrar(HANDLERS, "class_names")
"""Class decorator: serve every class name the handler lists. A name another handler serves already is an
error, unless ``@register(replace=True)``: how a user's own handler takes a built-in one's place."""


def handler_for(simple_class_name: str) -> NodeHandler | None:
    return HANDLERS.get(simple_class_name)


def probes_for(simple_class_name: str) -> Mapping[str, Probe]:
    handler = HANDLERS.get(simple_class_name)
    return handler.probes if handler is not None else {}


def probed(node: CatalystNode) -> CapturedNode:
    """What was probed of a plan node: its probes' values, or none when its handler wants none."""
    if node.probed is None:
        node.probed = CapturedNode(node.class_name, tree=node)
    return node.probed


_PRUNING = frozenset({"DynamicPruningExpression", "DynamicPruningSubquery"})
"""Filters the optimizer adds to skip files or partitions: their subqueries read nothing the plan does not."""


def evaluated_nodes(plan: CatalystNode) -> Iterator[CatalystNode]:
    """The plan nodes that run when a plan runs, in pre-order: through children, and through the plans of
    subqueries in its expressions; not through plans a node holds for another purpose (a write's target
    table, a command's query or the analyzed copy of it, which their own handlers look at), nor through the
    optimizer's pruning filters."""
    stack = [plan]
    while stack:
        node = stack.pop()
        yield node
        subqueries: list[CatalystNode] = []
        for expression in node.sub_nodes():
            if not expression.is_plan:
                subqueries.extend(_subqueries(expression))
        stack.extend(reversed([*node.children, *subqueries]))


def input_leaves(plan: CatalystNode) -> Iterator[CatalystNode]:
    """The leaves a plan reads from (see :func:`evaluated_nodes`)."""
    return (node for node in evaluated_nodes(plan) if not node.children)


def _subqueries(expression: CatalystNode) -> Iterator[CatalystNode]:
    """The outermost plans inside an expression."""
    if expression.simple_name in _PRUNING:
        return
    for nested in expression.sub_nodes():
        if nested.is_plan:
            yield nested
        else:
            yield from _subqueries(nested)


def plan_inputs(plan: CatalystNode, ctx: AnalysisContext) -> list[DatasetLineage]:
    """The datasets a plan reads (each leaf by its handler), remembered per leaf for column lineage."""
    found: list[DatasetLineage] = []
    for leaf in input_leaves(plan):
        handler = handler_for(leaf.simple_name)
        if handler is None:
            ctx.errors.append(f"no handler for plan node {leaf.class_name}: its inputs are not reported")
            continue
        datasets = handler.inputs(probed(leaf), ctx)
        ctx.datasets_read[id(leaf)] = datasets
        found.extend(datasets)
    return found


def nested_inputs(node: CapturedNode | None, ctx: AnalysisContext) -> list[DatasetLineage]:
    """What a captured object nested in a node reads, by its own class's handler (a scan's relation, say)."""
    handler = handler_for(node.simple_name) if node is not None else None
    return handler.inputs(node, ctx) if handler is not None and node is not None else []
