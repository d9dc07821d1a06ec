"""How an expression makes a column from other columns: which columns it reads, and through what.

:func:`trace` walks an expression tree from the column it defines down to the attributes it reads, and adds
an edge for each. Expressions that change the kind of dependency have a rule here, keyed by class name like
plan handlers; every other expression is a ``TRANSFORMATION`` of what it reads (a masking one for hashes).
"""

from __future__ import annotations

from collections.abc import Callable

from spark_lineage.columns.graph import ColumnGraph
from spark_lineage.columns.transformations import (
    AGGREGATION,
    CONDITIONAL,
    IDENTITY,
    MASKED_TRANSFORMATION,
    TRANSFORMATION,
    WINDOW,
    compose,
)
from spark_lineage.lineage import Transformation
from spark_lineage.plan import CatalystNode
from spark_lineage.registry import Registry

ExpressionRule = Callable[[CatalystNode, int, ColumnGraph, Transformation, str], None]
"""``(expression, target, graph, path, output)``: add the edges from ``target`` (whose text in descriptions is
``output``) to what ``expression`` reads, ``path`` being how ``target`` depends on ``expression``."""
RULES: Registry[ExpressionRule] = Registry("column rule of an expression")

ATTRIBUTES = frozenset({"AttributeReference", "PrettyAttribute"})
MASKING = frozenset(
    {
        "org.apache.spark.sql.catalyst.expressions.Crc32",
        "org.apache.spark.sql.catalyst.expressions.HiveHash",
        "org.apache.spark.sql.catalyst.expressions.Md5",
        "org.apache.spark.sql.catalyst.expressions.Murmur3Hash",
        "org.apache.spark.sql.catalyst.expressions.Sha1",
        "org.apache.spark.sql.catalyst.expressions.Sha2",
        "org.apache.spark.sql.catalyst.expressions.XxHash64",
        "org.apache.spark.sql.catalyst.expressions.Mask",
        "org.apache.spark.sql.catalyst.expressions.aggregate.Count",
    }
)
"""Functions whose result does not reveal their input: hashes, ``mask``, and ``count`` (openlineage-spark's
list)."""
RANKING = frozenset({"Rank", "DenseRank", "PercentRank", "RowNumber", "CumeDist", "NTile"})
"""Window functions whose own arguments only repeat the window's ordering."""


def rule(*class_names: str) -> Callable[[ExpressionRule], ExpressionRule]:
    """Decorator: the rule for expressions of these classes (simple names)."""
    return RULES.entry(*class_names)


def trace(
    expression: CatalystNode, target: int, graph: ColumnGraph, path: Transformation = IDENTITY, output: str = ""
) -> None:
    """Add edges from ``target`` to every column ``expression`` reads; ``path`` is how ``target`` depends on
    ``expression`` itself (its description, the SQL of the expression the plan node holds); ``output`` is the
    text ``target`` stands for in descriptions."""
    if expression.is_plan:
        return
    name = expression.simple_name
    if name in ATTRIBUTES:
        if expression.expr_id is not None:
            graph.add_edge(target, expression.expr_id, compose(path, IDENTITY), output)
        return
    special = RULES.get(name)
    if special is not None:
        special(expression, target, graph, path, output)
        return
    step = MASKED_TRANSFORMATION if expression.class_name in MASKING else TRANSFORMATION
    for child in children(expression):
        trace(child, target, graph, compose(path, step), output)


def children(expression: CatalystNode) -> list[CatalystNode]:
    """The sub-expressions of an expression (plans inside it, such as a subquery's, excluded)."""
    return [node for node in expression.sub_nodes() if not node.is_plan]


@rule("Alias")
def _alias(expression: CatalystNode, target: int, graph: ColumnGraph, path: Transformation, output: str) -> None:
    for child in children(expression):
        trace(child, target, graph, compose(path, IDENTITY), output)


@rule("CaseWhen")
def _case_when(expression: CatalystNode, target: int, graph: ColumnGraph, path: Transformation, output: str) -> None:
    for branch in expression.get("branches", []):
        condition, value = branch
        trace(condition, target, graph, compose(path, CONDITIONAL), output)
        trace(value, target, graph, compose(path, TRANSFORMATION), output)
    otherwise = expression.fields.get("elseValue")
    if isinstance(otherwise, CatalystNode):
        trace(otherwise, target, graph, compose(path, TRANSFORMATION), output)


@rule("If")
def _if(expression: CatalystNode, target: int, graph: ColumnGraph, path: Transformation, output: str) -> None:
    for name, step in (("predicate", CONDITIONAL), ("trueValue", TRANSFORMATION), ("falseValue", TRANSFORMATION)):
        for node in expression.nodes(name):
            trace(node, target, graph, compose(path, step), output)


@rule("Coalesce")
def _coalesce(expression: CatalystNode, target: int, graph: ColumnGraph, path: Transformation, output: str) -> None:
    for child in children(expression):
        trace(child, target, graph, compose(path, CONDITIONAL), output)
        trace(child, target, graph, compose(path, TRANSFORMATION), output)


@rule("AggregateExpression")
def _aggregate(expression: CatalystNode, target: int, graph: ColumnGraph, path: Transformation, output: str) -> None:
    for function in expression.nodes("aggregateFunction"):
        trace(function, target, graph, compose(path, AGGREGATION), output)
    for condition in expression.nodes("filter"):
        trace(condition, target, graph, compose(path, CONDITIONAL), output)


@rule("WindowExpression")
def _window(expression: CatalystNode, target: int, graph: ColumnGraph, path: Transformation, output: str) -> None:
    for function in expression.nodes("windowFunction"):
        if function.simple_name not in RANKING:
            trace(function, target, graph, compose(path, TRANSFORMATION), output)
    for spec in expression.nodes("windowSpec"):
        for part in children(spec):
            trace(part, target, graph, compose(path, WINDOW), output)


@rule("ScalarSubquery")
def _scalar_subquery(
    expression: CatalystNode, target: int, graph: ColumnGraph, path: Transformation, output: str
) -> None:
    """The value of a scalar subquery is its plan's one output column (whose own lineage the subquery's plan
    nodes give); its correlated references are read like arguments."""
    for plan in expression.nodes("plan"):
        if plan.output:
            graph.add_edge(target, plan.output[0].expr_id, compose(path, IDENTITY), output)
    for child in children(expression):
        trace(child, target, graph, compose(path, TRANSFORMATION), output)
