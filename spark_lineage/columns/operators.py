"""What each kind of plan node does to columns, keyed by the node's class name like plan handlers.

Nodes that only pass their child's columns on (``Limit``, ``Sample``, ``Repartition``, ``SubqueryAlias``, ...)
need no rule: columns keep their expression ids through them. A node that makes new columns, or decides
which rows there are, has a rule that adds edges to the :class:`~spark_lineage.columns.graph.ColumnGraph`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from spark_lineage.columns.expressions import ATTRIBUTES, trace
from spark_lineage.columns.graph import ColumnGraph
from spark_lineage.columns.transformations import (
    CONDITIONAL,
    FILTER,
    GROUP_BY,
    IDENTITY,
    JOIN,
    SORT,
    TRANSFORMATION,
    described,
)
from spark_lineage.lineage import Transformation
from spark_lineage.plan import CatalystNode, Opaque, simple_class_name
from spark_lineage.registry import Registry

OperatorRule = Callable[[CatalystNode, ColumnGraph], None]
RULES: Registry[OperatorRule] = Registry("column rule of a plan node")


def operator(*class_names: str) -> Callable[[OperatorRule], OperatorRule]:
    """Decorator: the rule for plan nodes of these classes (simple names)."""
    return RULES.entry(*class_names)


def rule_for(node: CatalystNode) -> OperatorRule | None:
    return RULES.get(node.simple_name)


JOIN_TYPES = {
    "Inner": "INNER",
    "Cross": "CROSS",
    "LeftOuter": "LEFT OUTER",
    "RightOuter": "RIGHT OUTER",
    "FullOuter": "FULL OUTER",
    "LeftSemi": "LEFT SEMI",
    "LeftAnti": "LEFT ANTI",
    "ExistenceJoin": "EXISTENCE",
}
"""Spark's ``JoinType.sql`` by the join type's class, for descriptions (the tree holds a join type by its class
only)."""


_PLAIN_NAME = re.compile(r"[a-zA-Z0-9_]+")


def quoted(name: str) -> str:
    """A name as Spark writes it in SQL (``quoteIfNeeded``): as it is when made of letters, digits and ``_``
    (and not of digits only), else between backticks."""
    if _PLAIN_NAME.fullmatch(name) and not name.isdigit():
        return name
    return "`" + name.replace("`", "``") + "`"


def _named(node: CatalystNode, field: str, graph: ColumnGraph) -> None:
    """Each named expression of a list defines the column with its id (described by its SQL, ``a AS b``, in
    place of its name as SQL writes it)."""
    for expression in node.nodes(field):
        if expression.expr_id is not None:
            path = described(IDENTITY, graph.text(expression.sql))
            trace(expression, expression.expr_id, graph, path, graph.text(quoted(str(expression.get("name", "")))))


def _whole_result(
    node: CatalystNode, field: str, graph: ColumnGraph, kind: Transformation, clause: str, separator: str = ", "
) -> None:
    """The expressions of ``field`` decide the whole result (which rows, in which order, grouped how);
    descriptions write them as ``clause`` followed by their SQL (``WHERE ...``, ``GROUP BY a, b``)."""
    expressions = node.nodes(field)
    if expressions:
        texts = [graph.text(expression.sql) for expression in expressions]
        pseudo = graph.new_dataset_node(clause + separator.join(texts))
        for expression, text in zip(expressions, texts):
            trace(expression, pseudo, graph, described(kind, text), text)


def _join_type(node: CatalystNode) -> str:
    kind = node.get("joinType")
    name = simple_class_name(kind.class_name).rstrip("$") if isinstance(kind, Opaque) else ""
    return JOIN_TYPES.get(name, name.upper())


@operator("Project")
def _project(node: CatalystNode, graph: ColumnGraph) -> None:
    _named(node, "projectList", graph)


@operator("Window")
def _window(node: CatalystNode, graph: ColumnGraph) -> None:
    _named(node, "windowExpressions", graph)


@operator("Aggregate")
def _aggregate(node: CatalystNode, graph: ColumnGraph) -> None:
    if not _is_distinct_union(node):
        _whole_result(node, "groupingExpressions", graph, GROUP_BY, "GROUP BY ")
    _named(node, "aggregateExpressions", graph)


def _is_distinct_union(node: CatalystNode) -> bool:
    """``UNION`` (without ``ALL``) is an aggregate over a union that only groups: not a grouping of the data,
    as openlineage-spark sees it too."""
    if not node.children or node.children[0].simple_name != "Union":
        return False
    grouped = {e.expr_id for e in node.nodes("groupingExpressions") if e.simple_name == "AttributeReference"}
    return {e.expr_id for e in node.nodes("aggregateExpressions")} <= grouped


@operator("Join")
def _join(node: CatalystNode, graph: ColumnGraph) -> None:
    _whole_result(node, "condition", graph, JOIN, f"{_join_type(node)} JOIN ON ")


@operator("Filter")
def _filter(node: CatalystNode, graph: ColumnGraph) -> None:
    _whole_result(node, "condition", graph, FILTER, "WHERE ")


@operator("Sort")
def _sort(node: CatalystNode, graph: ColumnGraph) -> None:
    _whole_result(node, "order", graph, SORT, "SORT BY ", ";")


@operator("Generate")
def _generate(node: CatalystNode, graph: ColumnGraph) -> None:
    """Each generated column (``explode``'s values, ``posexplode``'s positions too) is made from every
    argument of the generator."""
    for generator in node.nodes("generator"):
        path = described(TRANSFORMATION, graph.text(generator.sql))
        for attribute in node.nodes("generatorOutput"):
            if attribute.expr_id is not None:
                for argument in generator.sub_nodes():
                    trace(argument, attribute.expr_id, graph, path, graph.text(attribute.sql))


@operator("Union")
def _union(node: CatalystNode, graph: ColumnGraph) -> None:
    """A union's columns are, by position, the columns of each of its inputs."""
    for child in node.children:
        for produced, read in zip(node.output, child.output):
            graph.add_edge(
                produced.expr_id,
                read.expr_id,
                described(IDENTITY, graph.text(quoted(read.name))),
                graph.text(produced.name),
            )


@operator("Expand")
def _expand(node: CatalystNode, graph: ColumnGraph) -> None:
    """``ROLLUP``, ``CUBE``, grouping sets and several ``DISTINCT`` aggregates: each output column is, by
    position, one expression of every projection."""
    for projection in node.get("projections", []):
        for produced, expression in zip(node.output, projection):
            if isinstance(expression, CatalystNode):
                path = described(IDENTITY, graph.text(expression.sql))
                trace(expression, produced.expr_id, graph, path, graph.text(produced.name))


@operator("InMemoryRelation")
def _cached(node: CatalystNode, graph: ColumnGraph) -> None:
    """A cached Dataset's columns are, by position, the columns of the plan it caches (which its handler
    probed as ``cachedPlan``; its own nodes are analyzed with the query's)."""
    cached = node.probed.get("cachedPlan") if node.probed is not None else None
    if isinstance(cached, CatalystNode):
        for produced, read in zip(node.output, cached.output):
            graph.add_edge(produced.expr_id, read.expr_id, IDENTITY)


@operator("MergeRows")
def _merge_rows(node: CatalystNode, graph: ColumnGraph) -> None:
    """``MERGE``/``UPDATE``/``DELETE``: each output column is, by position, the value every instruction
    (keep, insert, update, split) writes there."""
    for field in ("matchedInstructions", "notMatchedInstructions", "notMatchedBySourceInstructions"):
        for instruction in node.nodes(field):
            for outputs in ("output", "otherOutput"):
                values = instruction.fields.get(outputs)
                if not isinstance(values, list):
                    continue
                for produced, value in zip(node.output, values):
                    if isinstance(value, CatalystNode):
                        trace(value, produced.expr_id, graph)


# Delta Lake's commands hold the plans they read as fields; their handler presents what each writes as a node of
# the command's class whose children are the target (first) and what else it reads, and whose output is the
# target's columns with ids of their own (``DeltaCommandHandler.written_plan``).


def _kept(node: CatalystNode) -> list[tuple[int, int]]:
    """Each written column of a Delta command with the target column it rewrites: ``(written, target)`` ids."""
    target = node.children[0].output if node.children else ()
    return [(written.expr_id, kept.expr_id) for written, kept in zip(node.output, target)]


@operator("MergeIntoCommand")
def _delta_merge(node: CatalystNode, graph: ColumnGraph) -> None:
    """Delta's ``MERGE``: each target column keeps the target's value (the rows no clause changes), or takes
    the value a clause's action assigns it; the ``ON`` condition joins target and source."""
    by_name: dict[str, int] = {}
    for (written, kept), column in zip(_kept(node), node.output):
        graph.add_edge(written, kept, IDENTITY)
        by_name[column.name.lower()] = written
    for field in ("matchedClauses", "notMatchedClauses", "notMatchedBySourceClauses"):
        for clause in node.nodes(field):
            for action in clause.nodes("actions"):
                parts = action.get("targetColNameParts") or []
                written_column = by_name.get(str(parts[0]).lower()) if parts else None  # a nested field: its column
                if written_column is None:
                    continue
                for value in action.sub_nodes():
                    if not value.is_plan:
                        trace(value, written_column, graph)
    _whole_result(node, "condition", graph, JOIN, "MERGE ON ")


@operator("UpdateCommand")
def _delta_update(node: CatalystNode, graph: ColumnGraph) -> None:
    """Delta's ``UPDATE``: a column it sets is its new value where the condition holds, else the old one (as
    Spark's own rewrite of ``UPDATE``, ``IF(condition, value, column)``, gives it); the others are kept."""
    for (written, kept), value in zip(_kept(node), node.nodes("updateExpressions")):
        if value.simple_name in ATTRIBUTES and value.expr_id == kept:
            graph.add_edge(written, kept, IDENTITY)
            continue
        graph.add_edge(written, kept, TRANSFORMATION)
        trace(value, written, graph, TRANSFORMATION)
        for condition in node.nodes("condition"):
            trace(condition, written, graph, CONDITIONAL)


@operator("DeleteCommand")
def _delta_delete(node: CatalystNode, graph: ColumnGraph) -> None:
    """Delta's ``DELETE``: the rows it keeps, column for column; its condition decides which."""
    for written, kept in _kept(node):
        graph.add_edge(written, kept, IDENTITY)
    _whole_result(node, "condition", graph, FILTER, "WHERE ")


def link_ctes(plans: list[CatalystNode], graph: ColumnGraph) -> None:
    """Tie each ``CTERelationRef`` to the ``CTERelationDef`` with its id, column by column."""
    definitions = {node.get("id"): node for node in plans if node.simple_name == "CTERelationDef"}
    for node in plans:
        if node.simple_name == "CTERelationRef":
            definition = definitions.get(node.get("cteId"))
            if definition is not None:
                for produced, read in zip(node.output, definition.output):
                    graph.add_edge(produced.expr_id, read.expr_id, IDENTITY)
