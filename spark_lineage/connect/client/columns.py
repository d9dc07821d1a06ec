"""Column lineage of what a Spark Connect client's action writes, derived on the client from its request.

A DataFrame write's request holds its input as an unresolved relation tree; a SQL command's, its text. Each
relation kind has a rule here (``@relation("project")``: what it makes of its child's columns, in a
:class:`~spark_lineage.connect.client.frames.Frame`), each expression kind too (``@expression("alias")``), and
SQL goes through :mod:`~spark_lineage.connect.client.sql`. They build the driver side's
:class:`~spark_lineage.columns.graph.ColumnGraph` with the driver side's transformations, and follow what the
server's optimizer does to lineage where it shows (the ``IS NOT NULL`` filters it infers from a join's
condition, a cast to a type the column has already), so that what the client claims equals what a server-side
install reports. What it cannot claim honestly (a UDF, a window, a relation kind without a rule, a name over a
schema it does not know) is said per column in :attr:`ClientColumns.unclaimed`.

To follow a new relation kind, add a rule with ``@relation("<its field in Relation>")``; a new expression
kind, ``@expression("<its field in Expression>")``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from spark_lineage.columns.graph import merge_sources
from spark_lineage.columns.transformations import (
    CONDITIONAL,
    FILTER,
    GROUP_BY,
    IDENTITY,
    JOIN,
    SORT,
    TRANSFORMATION,
    compose,
    sort_key,
)
from spark_lineage.connect.client import sql as sql_text
from spark_lineage.connect.client.frames import (
    Column,
    Frame,
    Joined,
    Leaf,
    LeafColumns,
    Leaves,
    Listed,
    Qualified,
    Unknown,
    Walk,
    function_steps,
    spark_type,
)
from spark_lineage.connect.client.requests import RELATION, enum_name, has_field, messages, read_source
from spark_lineage.errors import UnclaimedColumnError
from spark_lineage.lineage import ColumnSource, Transformation
from spark_lineage.registry import Registry

RelationRule = Callable[[Any, Walk], Frame]
"""``(message, walk)``: the frame a relation of this kind makes (``message`` is the kind's own message)."""
ExpressionRule = Callable[[Any, int, Frame, Walk, Transformation], None]
"""``(message, target, frame, walk, path)``: add the edges from ``target`` to what the expression reads in
``frame``, ``path`` being how ``target`` depends on the expression."""
RELATIONS: Registry[RelationRule] = Registry("client column rule of a relation")
EXPRESSIONS: Registry[ExpressionRule] = Registry("client column rule of an expression")

PASSING = ("limit", "offset", "tail", "sample", "repartition", "repartition_by_expression", "hint", "with_watermark")
"""Relations that pass their input's columns on as they are."""
COMPARISONS = frozenset({"==", "<", ">", "<=", ">=", "!="})
"""Null-intolerant comparisons: the server infers ``IS NOT NULL`` filters from those a join's condition holds."""
UNSURE_FUNCTIONS = frozenset({"mask"})
"""Functions the server's optimizer replaces by others whose lineage the client cannot tell."""


@dataclass
class ClientColumns:
    """What a client claims of an action's column lineage, and what it does not, and why."""

    fields: dict[str, list[ColumnSource]] = field(default_factory=dict)
    dataset: list[ColumnSource] = field(default_factory=list)
    """What the output as a whole depends on (filters, join conditions, groupings): only with :attr:`fields`."""
    unclaimed: list[str] = field(default_factory=list)
    """Messages for the run's ``extractionError`` facet: the columns without lineage, grouped by why."""


def relation(*kinds: str) -> Callable[[RelationRule], RelationRule]:
    """Decorator: the rule for relations of these kinds (their field names in ``Relation``)."""
    return RELATIONS.entry(*kinds)


def expression(*kinds: str) -> Callable[[ExpressionRule], ExpressionRule]:
    """Decorator: the rule for expressions of these kinds (their field names in ``Expression``)."""
    return EXPRESSIONS.entry(*kinds)


# --- entry points ----------------------------------------------------------------------------------------------


def dataframe_columns(
    tree: Any,
    leaves: Leaves,
    *,
    names: Sequence[str] | None = None,
    target: Sequence[tuple[str, str | None]] | None = None,
    positional: bool = False,
    schema_size_limit: int = 1000,
    analyzed: bool = False,
) -> ClientColumns:
    """The column lineage of writing the relation ``tree``. ``names``: the columns it writes, when the server
    was asked; ``target``: the columns (name, type) of the table it writes into, when it exists (by position
    for ``positional`` writes: ``insertInto``); ``analyzed``: the server writes the plan as analyzed (see
    :attr:`Walk.analyzed`)."""
    walk = Walk(leaves, analyzed=analyzed)
    frame = _frame_or_unknown(lambda: frame_of(tree, walk))
    return written(
        walk,
        frame,
        names=names,
        target=target,
        positional=positional,
        limit=schema_size_limit,
        hint="; python.connect.resolveSchemas=true asks the server",
    )


def sql_columns(
    text: str,
    leaves: Leaves,
    *,
    target: Sequence[tuple[str, str | None]] | None = None,
    schema_size_limit: int = 1000,
) -> ClientColumns:
    """The column lineage of a SQL command that writes (``INSERT … SELECT``, ``CREATE TABLE … AS SELECT``);
    ``target``: the columns of the table it inserts into, when it exists."""
    walk = Walk(leaves)
    statement = sql_text.written_query(text)
    if statement.query is None:
        return ClientColumns(unclaimed=[f"no column lineage is derived on the client for {statement.unfollowed}"])
    query = statement.query
    frame = _frame_or_unknown(lambda: sql_text.query_frame(query, walk))
    columns = statement.columns or None
    if columns is not None and target is not None:
        by_name = {name.lower(): (name, type_) for name, type_ in target}
        target = [by_name.get(name.lower(), (name, None)) for name in columns]
    return written(walk, frame, target=target, positional=statement.positional, limit=schema_size_limit)


def _frame_or_unknown(make: Callable[[], Frame]) -> Frame:
    try:
        return make()
    except RecursionError:
        return Unknown("the plan is too deep to follow on the client")
    except UnclaimedColumnError as error:
        return Unknown(str(error))


def written(
    walk: Walk,
    frame: Frame,
    *,
    names: Sequence[str] | None = None,
    target: Sequence[tuple[str, str | None]] | None = None,
    positional: bool = False,
    limit: int = 1000,
    hint: str = "",
) -> ClientColumns:
    """The lineage of each column ``frame`` writes, named as the output names them; ``hint``: what to do when
    which columns are written is not known."""
    result = ClientColumns()
    try:
        columns: list[tuple[str | None, int | None, str | None]] = [
            (c.name, c.node, None) for c in frame.all_columns("a *")
        ]
        if names is not None and len(names) == len(columns):
            columns = [(name, node, None) for name, (_, node, _) in zip(names, columns)]
    except UnclaimedColumnError as error:
        if names is not None:
            columns = [(name, *_found(frame, name)) for name in names]
        elif isinstance(frame, Unknown) and target is not None:  # nothing of it followed: the table's columns
            columns = [(name, None, str(error)) for name, _ in target]
        else:
            result.unclaimed.append(
                f"no column lineage: which columns are written is not known on the client ({error}){hint}"
            )
            return result
    if len(columns) > limit:
        return result
    named = _output_names(columns, target, positional)
    if isinstance(named, str):
        result.unclaimed.append(named)
        return result
    types = {name.lower(): type_ for name, type_ in target or () if type_}
    unclaimed: dict[str, list[str]] = {}
    for position, ((name, node, missing), output) in enumerate(zip(columns, named), start=1):
        label = output or name or f"the {_ordinal(position)}"
        reason = "an expression the server names (give it an alias)" if output is None else missing
        if node is not None and reason is None:
            reason = walk.unclaimed_reason(node)
        if node is None or reason is not None:
            unclaimed.setdefault(reason or "not found on the client", []).append(label)
            continue
        assert output is not None
        sources = walk.graph.sources(node, output)
        wanted = types.get(output.lower())
        if wanted is not None and spark_type(walk.types.get(node)) not in (None, spark_type(wanted)):
            sources = _cast(sources)  # the server casts what it writes to the table's type
        if sources:
            result.fields[output] = sources
    if result.fields:  # the dataset's sources go with its fields' (no field followed: no columnLineage facet)
        result.dataset = walk.graph.dataset_sources()
    for pseudo in walk.graph.dataset_nodes:  # a filter, grouping, ... over a column the client could not follow
        reason = walk.unclaimed_reason(pseudo)
        if reason is not None and reason not in walk.unclaimed_dataset:
            walk.unclaimed_dataset.append(reason)
    result.unclaimed += [f"columns without lineage ({', '.join(cols)}): {why}" for why, cols in unclaimed.items()]
    result.unclaimed += [f"the lineage of the output as a whole misses: {why}" for why in walk.unclaimed_dataset]
    return result


def _ordinal(position: int) -> str:
    suffix = "th" if 10 <= position % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(position % 10, "th")
    return f"{position}{suffix}"


def _found(frame: Frame, name: str) -> tuple[int | None, str | None]:
    try:
        return frame.resolve([name]), None
    except UnclaimedColumnError as error:
        return None, str(error)


def _output_names(
    columns: Sequence[tuple[str | None, int | None, str | None]],
    target: Sequence[tuple[str, str | None]] | None,
    positional: bool,
) -> list[str | None] | str:
    """The output's name of each written column, or why they cannot be paired with the table's columns."""
    if target is None:
        return [name for name, _, _ in columns]
    if positional:
        if len(target) != len(columns):
            return f"no column lineage: {len(columns)} columns are written into a table of {len(target)}"
        return [name for name, _ in target]
    spelled = {name.lower(): name for name, _ in target}
    return [spelled.get(name.lower(), name) if name else None for name, _, _ in columns]


def _cast(sources: list[ColumnSource]) -> list[ColumnSource]:
    return [
        ColumnSource(
            s.column, tuple(sorted({compose(t, TRANSFORMATION): None for t in s.transformations}, key=sort_key))
        )
        for s in sources
    ]


def merged(columns: ClientColumns) -> dict[str, list[ColumnSource]]:
    """Each field's sources with the dataset's merged in (``columnLineage.datasetLineageEnabled=false``)."""
    return {name: merge_sources(sources, columns.dataset) for name, sources in columns.fields.items()}


# --- relations ---------------------------------------------------------------------------------------------------


def frame_of(tree: Any, walk: Walk) -> Frame:
    """The columns relation ``tree`` produces (a relation no rule follows: an :class:`Unknown` frame)."""
    kind = tree.WhichOneof("rel_type")
    rule = RELATIONS.get(kind or "")
    if rule is None:
        frame: Frame = Unknown(f"a {kind} relation is not followed on the client")
    else:
        try:
            frame = rule(getattr(tree, kind), walk)
        except UnclaimedColumnError as error:
            frame = Unknown(str(error))
    if has_field(tree, "common") and has_field(tree.common, "plan_id"):
        walk.by_plan_id[int(tree.common.plan_id)] = frame
    return frame


def _input(message: Any, walk: Walk, name: str = "input") -> Frame:
    return frame_of(getattr(message, name), walk) if has_field(message, name) else Listed([])


@relation("read")
def _read(read: Any, walk: Walk) -> Frame:
    return walk.leaf(read_source(read), read)


@relation(*PASSING)
def _passing(message: Any, walk: Walk) -> Frame:
    return _input(message, walk)


@relation("subquery_alias")
def _subquery_alias(alias: Any, walk: Walk) -> Frame:
    return Qualified(_input(alias, walk), str(alias.alias))


@relation("project")
def _project(project: Any, walk: Walk) -> Frame:
    child = _input(project, walk)
    columns: list[Column] = []
    rest: Frame | None = None
    for item in project.expressions:
        kind = item.WhichOneof("expr_type")
        if kind == "unresolved_star":
            stars = _star(item.unresolved_star, child, walk)
            if stars is None:
                rest = child
            else:
                columns += stars
        else:
            columns.append(_kept_or_made(item, child, walk))
    return Listed(columns, rest=rest)


def _star(star: Any, child: Frame, walk: Walk) -> list[Column] | None:
    """The columns a ``*`` stands for, ``None`` over a child whose columns are not all known."""
    target = str(star.unparsed_target) if has_field(star, "unparsed_target") else ""
    source = walk.by_plan_id.get(int(star.plan_id), child) if has_field(star, "plan_id") else child
    columns = source.columns()
    if columns is None:
        return None
    qualifier = identifier_parts(target.removesuffix(".*"))[-1].lower() if target else None
    return [c for c in columns if qualifier is None or qualifier in c.qualifiers]


def _kept_or_made(item: Any, child: Frame, walk: Walk) -> Column:
    """A column a projection or grouping lists: a column of its child as it is (the server keeps its id), or one
    an expression makes."""
    if item.WhichOneof("expr_type") != "unresolved_attribute":
        return _made(item, child, walk)
    parts = identifier_parts(item.unresolved_attribute.unparsed_identifier)
    node = walk.node()
    try:
        node = _attribute(item.unresolved_attribute, child, walk)
    except UnclaimedColumnError as error:
        walk.unclaim(node, error)
    return Column(parts[-1], node)


def _made(item: Any, child: Frame, walk: Walk) -> Column:
    """A column an expression makes, traced into the graph (unclaimed when it cannot be)."""
    node = walk.node()
    traced(item, node, child, walk, IDENTITY)
    return Column(output_name(item), node)


def traced(item: Any, target: int, frame: Frame, walk: Walk, path: Transformation) -> None:
    """:func:`trace`, a failure unclaiming ``target``."""
    try:
        trace(item, target, frame, walk, path)
    except UnclaimedColumnError as error:
        walk.unclaim(target, error)
    except RecursionError:
        walk.unclaim(target, UnclaimedColumnError("an expression too deep to follow on the client"))


def _whole(items: Sequence[Any], frame: Frame, walk: Walk, kind: Transformation, what: str) -> None:
    """Expressions that decide the whole output (a filter, a join condition, grouping or sorting keys)."""
    if not items:
        return
    pseudo = walk.graph.new_dataset_node()
    for item in items:
        try:
            trace(item, pseudo, frame, walk, kind)
        except (UnclaimedColumnError, RecursionError) as error:
            walk.unclaimed_dataset.append(f"{what}: {error}")


@relation("filter")
def _filter(message: Any, walk: Walk) -> Frame:
    child = _input(message, walk)
    _whole([message.condition], child, walk, FILTER, "a filter")
    return child


@relation("sort")
def _sort(message: Any, walk: Walk) -> Frame:
    child = _input(message, walk)
    _whole([order.child for order in message.order], child, walk, SORT, "a sort")
    return child


@relation("with_columns")
def _with_columns(message: Any, walk: Walk) -> Frame:
    child = _input(message, walk)
    made: list[Column] = []
    for alias in message.aliases:
        node = walk.node()
        traced(alias.expr, node, child, walk, IDENTITY)
        made.append(Column(str(alias.name[0]), node))
    columns = child.columns()
    if columns is None:
        return Listed(made, rest=child)
    by_name = {c.name.lower(): c for c in made if c.name}
    kept = [by_name.pop(c.name.lower(), c) if c.name else c for c in columns]
    return Listed(kept + [c for c in made if c.name and c.name.lower() in by_name])


@relation("with_columns_renamed")
def _renamed(message: Any, walk: Walk) -> Frame:
    child = _input(message, walk)
    renames = [(str(r.col_name), str(r.new_col_name)) for r in getattr(message, "renames", ())]
    renames += [(str(old), str(new)) for old, new in message.rename_columns_map.items()]
    columns = child.columns()
    if columns is not None:
        new_names = {old.lower(): new for old, new in renames}
        return Listed([Column(new_names.get(c.name.lower(), c.name), c.node) if c.name else c for c in columns])
    made = [Column(new, child.resolve([old])) for old, new in renames]
    return Listed(made, rest=child, hidden=frozenset(old.lower() for old, _ in renames))


@relation("drop")
def _drop(message: Any, walk: Walk) -> Frame:
    child = _input(message, walk)
    names = {str(name).lower() for name in message.column_names}
    for item in message.columns:
        if item.WhichOneof("expr_type") != "unresolved_attribute":
            raise UnclaimedColumnError("a drop of an expression is not followed on the client")
        names.add(identifier_parts(item.unresolved_attribute.unparsed_identifier)[-1].lower())
    columns = child.columns()
    if columns is None:
        return Listed([], rest=child, hidden=frozenset(names))
    return Listed([c for c in columns if not (c.name and c.name.lower() in names)])


@relation("to_df")
def _to_df(message: Any, walk: Walk) -> Frame:
    columns = _input(message, walk).all_columns("toDF()")
    return Listed([Column(str(name), c.node) for name, c in zip(message.column_names, columns)])


@relation("range")
def _range(message: Any, walk: Walk) -> Frame:
    return Listed([Column("id", walk.node())])


@relation("local_relation")
def _local(message: Any, walk: Walk) -> Frame:
    return Leaf(walk, LeafColumns(()))  # rows the client sent: columns of no dataset


@relation("sql")
def _sql(message: Any, walk: Walk) -> Frame:
    return sql_text.query_frame(str(message.query), walk)


@relation("aggregate")
def _aggregate(message: Any, walk: Walk) -> Frame:
    child = _input(message, walk)
    if not enum_name(message, "group_type").endswith(("GROUPBY", "UNSPECIFIED")):
        raise UnclaimedColumnError("a rollup, cube, pivot or grouping sets is not followed on the client")
    _whole(list(message.grouping_expressions), child, walk, GROUP_BY, "a grouping")
    columns = []
    for item in message.grouping_expressions:
        columns.append(_kept_or_made(item, child, walk))
    columns += [_made(item, child, walk) for item in message.aggregate_expressions]
    return Listed(columns)


@relation("deduplicate")
def _deduplicate(message: Any, walk: Walk) -> Frame:
    """``distinct()``: the server groups by every column. ``dropDuplicates(subset)``: the others are a
    ``first()`` the server keeps under their own ids, which the client does not follow."""
    child = _input(message, walk)
    if message.column_names and not message.all_columns_as_keys:
        raise UnclaimedColumnError("dropDuplicates() of some columns is not followed on the client")
    columns = child.all_columns("distinct()")
    pseudo = walk.graph.new_dataset_node()
    for column in columns:
        walk.graph.add_edge(pseudo, column.node, GROUP_BY)
    return Listed(columns)


@relation("set_op")
def _set_op(message: Any, walk: Walk) -> Frame:
    if not enum_name(message, "set_op_type").endswith("UNION"):
        raise UnclaimedColumnError("an intersect or except is not followed on the client")
    left = _input(message, walk, "left_input").all_columns("a union")
    right = _input(message, walk, "right_input").all_columns("a union")
    if message.by_name:
        by_name = {c.name.lower(): c for c in right if c.name}
        right = [by_name[c.name.lower()] for c in left if c.name and c.name.lower() in by_name]
    if len(left) != len(right):
        raise UnclaimedColumnError("a union of different widths")
    columns = []
    for ours, theirs in zip(left, right):
        node = walk.node()
        walk.graph.add_edge(node, ours.node, IDENTITY)
        walk.graph.add_edge(node, theirs.node, IDENTITY)
        columns.append(Column(ours.name, node))
    return Listed(columns)


JOIN_FILTERED_SIDES = {
    "INNER": (True, True),
    "CROSS": (True, True),
    "UNSPECIFIED": (True, True),
    "LEFT_SEMI": (True, True),
    "LEFT_OUTER": (False, True),
    "LEFT_ANTI": (False, True),
    "RIGHT_OUTER": (True, False),
    "FULL_OUTER": (False, False),
}
"""The sides of a join (left, right) the server's optimizer filters with ``IS NOT NULL`` for the columns its
condition compares (``InferFiltersFromConstraints``): a ``FILTER`` dependency of the whole output."""


@relation("join")
def _join(message: Any, walk: Walk) -> Frame:
    left, right = _input(message, walk, "left"), _input(message, walk, "right")
    kind = enum_name(message, "join_type").removeprefix("JOIN_TYPE_")
    filtered = JOIN_FILTERED_SIDES.get(kind)
    if filtered is None:
        raise UnclaimedColumnError(f"a {kind.lower()} join is not followed on the client")
    sides = (left, right)
    joined_on = walk.graph.new_dataset_node()
    inferred = walk.graph.new_dataset_node()
    using: dict[str, int] = {}
    for name in message.using_columns:
        try:
            nodes = (left.resolve([str(name)]), right.resolve([str(name)]))
        except UnclaimedColumnError as error:
            walk.unclaimed_dataset.append(f"a join on {name}: {error}")
            node = walk.node()
            walk.unclaim(node, error)
            using[str(name).lower()] = node
            continue
        for side_filtered, node in zip(filtered, nodes):
            walk.graph.add_edge(joined_on, node, JOIN)
            if side_filtered:
                walk.graph.add_edge(inferred, node, FILTER)
        using[str(name).lower()] = _using_column(kind, nodes, walk)
    frame = Joined(left, right, using)
    if has_field(message, "join_condition"):
        _whole([message.join_condition], frame, walk, JOIN, "a join condition")
        _infer_filters(message, sides, filtered, inferred, walk)
    return left if kind in ("LEFT_SEMI", "LEFT_ANTI") else frame


def _using_column(kind: str, nodes: tuple[int, int], walk: Walk) -> int:
    """The column a join ``USING`` keeps: the left's, the right's for a right join, and for a full join the
    first of the two that is not null."""
    if kind == "RIGHT_OUTER":
        return nodes[1]
    if kind != "FULL_OUTER":
        return nodes[0]
    node = walk.node()
    for side in nodes:
        walk.graph.add_edge(node, side, CONDITIONAL)
        walk.graph.add_edge(node, side, TRANSFORMATION)
    return node


def _infer_filters(
    message: Any, sides: tuple[Frame, Frame], filtered: tuple[bool, bool], inferred: int, walk: Walk
) -> None:
    """The ``IS NOT NULL`` filters the server adds on each side for the columns a condition's top-level
    comparisons hold."""
    plan_ids = (_plan_ids(message.left), _plan_ids(message.right))
    for compared in _compared(message.join_condition):
        if compared.WhichOneof("expr_type") != "unresolved_attribute":
            if compared.WhichOneof("expr_type") != "literal":
                walk.unclaimed_dataset.append(
                    "the IS NOT NULL filters the server infers from a join condition that compares expressions"
                )
            continue
        attribute = compared.unresolved_attribute
        for side, side_filtered, ids in zip(sides, filtered, plan_ids):
            if not side_filtered:
                continue
            try:
                if has_field(attribute, "plan_id"):
                    node = _attribute(attribute, side, walk) if int(attribute.plan_id) in ids else None
                else:
                    node = side.find(identifier_parts(attribute.unparsed_identifier))
            except UnclaimedColumnError:
                node = None
            if node is not None:
                walk.graph.add_edge(inferred, node, FILTER)


def _compared(condition: Any) -> list[Any]:
    """The operands of the comparisons a condition's top-level conjunction holds."""
    if condition.WhichOneof("expr_type") != "unresolved_function":
        return []
    function = condition.unresolved_function
    name = str(function.function_name).lower()
    if name == "and":
        return [operand for argument in function.arguments for operand in _compared(argument)]
    return list(function.arguments) if name in COMPARISONS else []


def _plan_ids(tree: Any) -> set[int]:
    return {
        int(message.common.plan_id)
        for message in messages(tree)
        if message.DESCRIPTOR.full_name == RELATION
        and message.HasField("common")
        and has_field(message.common, "plan_id")
    }


# --- expressions -------------------------------------------------------------------------------------------------


def trace(item: Any, target: int, frame: Frame, walk: Walk, path: Transformation) -> None:
    """Add the edges from ``target`` to every column expression ``item`` reads in ``frame``."""
    kind = item.WhichOneof("expr_type")
    rule = EXPRESSIONS.get(kind or "")
    if rule is None:
        raise UnclaimedColumnError(f"{_KINDS.get(kind or '', f'a {kind} expression')} is not followed on the client")
    rule(getattr(item, kind), target, frame, walk, path)


_KINDS = {
    "common_inline_user_defined_function": "a user-defined function (UDF)",
    "window": "a window function",
    "lambda_function": "a lambda function",
    "subquery_expression": "a subquery",
    "unresolved_regex": "a column regex",
}


@expression("literal")
def _literal(message: Any, target: int, frame: Frame, walk: Walk, path: Transformation) -> None:
    return None


@expression("unresolved_attribute")
def _attribute_rule(message: Any, target: int, frame: Frame, walk: Walk, path: Transformation) -> None:
    node = _attribute(message, frame, walk)
    walk.graph.add_edge(target, node, compose(path, IDENTITY))
    if node in walk.types and compose(path, IDENTITY) == IDENTITY:
        walk.types.setdefault(target, walk.types[node])


def _attribute(attribute: Any, frame: Frame, walk: Walk) -> int:
    """The node of the column an attribute names: in the relation its ``plan_id`` names (``df["id"]``), or in
    ``frame``."""
    parts = identifier_parts(str(attribute.unparsed_identifier))
    if has_field(attribute, "plan_id"):
        named = walk.by_plan_id.get(int(attribute.plan_id))
        if named is None:
            raise UnclaimedColumnError(f"{'.'.join(parts)} names a DataFrame that is not in this plan")
        return named.resolve(parts)
    return frame.resolve(parts)


@expression("alias")
def _alias(message: Any, target: int, frame: Frame, walk: Walk, path: Transformation) -> None:
    trace(message.expr, target, frame, walk, compose(path, IDENTITY))


@expression("sort_order")
def _sort_order(message: Any, target: int, frame: Frame, walk: Walk, path: Transformation) -> None:
    trace(message.child, target, frame, walk, path)


@expression("unresolved_extract_value")
def _extract(message: Any, target: int, frame: Frame, walk: Walk, path: Transformation) -> None:
    trace(message.child, target, frame, walk, compose(path, TRANSFORMATION))
    trace(message.extraction, target, frame, walk, compose(path, TRANSFORMATION))


@expression("cast")
def _cast_rule(message: Any, target: int, frame: Frame, walk: Walk, path: Transformation) -> None:
    """A cast to the type a column has already is gone from the server's optimized plan: the column as it is
    (not where the server writes the analyzed plan, which keeps it)."""
    inner = message.expr
    to_type = _castspark_type(message)
    if inner.WhichOneof("expr_type") == "unresolved_attribute" and to_type is not None:
        node = _attribute(inner.unresolved_attribute, frame, walk)
        if walk.cast_is_identity(node, to_type):
            walk.graph.add_edge(target, node, compose(path, IDENTITY))
            return
    trace(inner, target, frame, walk, compose(path, TRANSFORMATION))


def _castspark_type(cast: Any) -> str | None:
    if has_field(cast, "type_str"):
        return spark_type(str(cast.type_str))
    if has_field(cast, "type"):
        kind = cast.type.WhichOneof("kind")
        return (
            spark_type(kind) if kind and kind not in ("decimal", "array", "map", "struct", "char", "var_char") else None
        )
    return None


@expression("expression_string")
def _expression_string(message: Any, target: int, frame: Frame, walk: Walk, path: Transformation) -> None:
    sql_text.trace_expression(str(message.expression), target, frame, walk, path)


@expression("unresolved_function", "call_function")
def _function(message: Any, target: int, frame: Frame, walk: Walk, path: Transformation) -> None:
    name = str(message.function_name).lower()
    arguments = list(message.arguments)
    if getattr(message, "is_user_defined_function", False):
        raise UnclaimedColumnError(f"the user-defined function {name} is not followed on the client")
    if name in UNSURE_FUNCTIONS:
        raise UnclaimedColumnError(f"{name}() is rewritten by the server in ways the client does not follow")
    steps = function_steps(name, len(arguments), path)
    for argument, step in zip(arguments, steps):
        if name == "count" and argument.WhichOneof("expr_type") == "unresolved_star":
            continue  # count(*) reads no column
        for one in step:
            trace(argument, target, frame, walk, one)


def output_name(item: Any) -> str | None:
    """The name the server gives the column an expression makes, where the client knows it (an alias, a
    column); ``None`` for any other expression."""
    kind = item.WhichOneof("expr_type")
    if kind == "alias":
        return str(item.alias.name[0]) if item.alias.name else None
    if kind == "unresolved_attribute":
        return identifier_parts(str(item.unresolved_attribute.unparsed_identifier))[-1]
    if kind == "expression_string":
        return sql_text.expression_name(str(item.expression_string.expression))
    return None


def identifier_parts(identifier: str) -> list[str]:
    """A column's name as the user wrote it (``a.id``, ```odd.name```), in its parts, without quotes."""
    if "`" not in identifier:
        return identifier.split(".")
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    i = 0
    while i < len(identifier):
        char = identifier[i]
        if char == "`":
            if quoted and identifier[i + 1 : i + 2] == "`":
                current.append("`")
                i += 1
            else:
                quoted = not quoted
        elif char == "." and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
        i += 1
    parts.append("".join(current))
    return parts
