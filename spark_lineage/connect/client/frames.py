"""The columns of each relation of a Spark Connect client's request, as far as the client can know them.

A client's plan is unresolved: its columns are names the user wrote (``"id"``, ``"a.id"``, ``df["id"]``), which
the server's analyzer resolves against the schemas of what the plan reads. The client resolves them the same way
where it can tell: a :class:`Frame` is what one relation of the tree produces, a column per name, each a node of
the driver side's :class:`~spark_lineage.columns.graph.ColumnGraph`, so that the walk from a written column to
the input columns, and the way transformations compose, are the driver side's own.

A read whose schema the client does not know (a file read without ``.schema()``, when the server is not asked)
is *open*: a name looked up in it is taken for a column of that name, which is what the server would resolve it
to (or fail the action). Where the client cannot tell which column a name means (a name over two open sides of a
join, a ``*`` over an open read) it says so: :class:`~spark_lineage.errors.UnclaimedColumnError`, whose message
goes into the run's ``extractionError`` facet, and that column gets no lineage rather than a guessed one.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from spark_lineage.columns.graph import ColumnGraph
from spark_lineage.columns.transformations import (
    AGGREGATION,
    CONDITIONAL,
    MASKED_TRANSFORMATION,
    TRANSFORMATION,
    compose,
)
from spark_lineage.connect.client.requests import ReadSource
from spark_lineage.errors import UnclaimedColumnError
from spark_lineage.lineage import InputColumn, Transformation
from spark_lineage.naming import DatasetIdentifier

AGGREGATES = frozenset(
    {
        "any", "any_value", "approx_count_distinct", "array_agg", "avg", "bit_and", "bit_or", "bit_xor", "bool_and",
        "bool_or", "collect_list", "collect_set", "corr", "count", "count_if", "covar_pop", "covar_samp", "every",
        "first", "first_value", "kurtosis", "last", "last_value", "max", "max_by", "mean", "median", "min",
        "min_by", "mode", "percentile", "percentile_approx", "product", "skewness", "some", "std", "stddev",
        "stddev_pop", "stddev_samp", "sum", "try_avg", "try_sum", "var_pop", "var_samp", "variance",
    }
)  # fmt: skip
"""Aggregate functions by the name a client sends (``F.count`` is ``count``, ``countDistinct`` is ``count`` with
``is_distinct``): the server's column lineage calls what they read ``AGGREGATION``."""
MASKING = frozenset({"count", "crc32", "hash", "mask", "md5", "sha", "sha1", "sha2", "xxhash64"})
"""Functions whose result does not reveal what they read (the driver side's list, by function name)."""
CONDITIONALS = frozenset({"coalesce", "if", "iff", "ifnull", "nvl", "nvl2", "nullif", "when"})
"""Functions whose arguments decide which value there is (the server's column lineage says ``CONDITIONAL``)."""
_TYPE_NAMES = {"integer": "int", "long": "bigint", "short": "smallint", "byte": "tinyint"}


def spark_type(name: str | None) -> str | None:
    """A Spark type's name as ``DESCRIBE`` writes it (``int``, not ``integer``), for comparing types."""
    if name is None:
        return None
    name = name.strip().lower()
    return _TYPE_NAMES.get(name, name)


def function_steps(name: str, count: int, path: Transformation) -> Sequence[tuple[Transformation, ...]]:
    """How a function's ``count`` arguments are read, each through one or more paths, as the driver side's
    rules type the expression the server makes of it."""
    if name == "when":  # CASE WHEN: conditions, then values (and the last one, ``otherwise``)
        return [
            (compose(path, CONDITIONAL),) if i % 2 == 0 and i + 1 < count else (compose(path, TRANSFORMATION),)
            for i in range(count)
        ]
    if name in ("if", "iff"):
        return [(compose(path, CONDITIONAL),)] + [(compose(path, TRANSFORMATION),)] * (count - 1)
    if name == "nvl2":
        return [(compose(path, CONDITIONAL),)] + [(compose(path, TRANSFORMATION),)] * (count - 1)
    if name == "nullif":
        return [(compose(path, CONDITIONAL), compose(path, TRANSFORMATION)), (compose(path, CONDITIONAL),)][:count]
    if name in CONDITIONALS:  # coalesce, nvl, ifnull: each argument decides and is the value
        return [(compose(path, CONDITIONAL), compose(path, TRANSFORMATION))] * count
    if name in AGGREGATES:
        inner = compose(path, AGGREGATION)
        return [(compose(inner, MASKED_TRANSFORMATION if name in MASKING else TRANSFORMATION),)] * count
    step = MASKED_TRANSFORMATION if name in MASKING else TRANSFORMATION
    return [(compose(path, step),)] * count


@dataclass(frozen=True)
class LeafColumns:
    """What one read of the tree stands for: its datasets, and its columns (name and Spark type) when known."""

    datasets: tuple[DatasetIdentifier, ...]
    columns: tuple[tuple[str, str | None], ...] | None = None
    """``None``: not known on the client (an open read)."""
    qualifiers: frozenset[str] = frozenset()
    """The names a column of it may be qualified by (a table's name, lower case)."""
    unclaimed: str | None = None
    """Why its columns cannot be followed (a view, a source with no name), if they cannot."""


Leaves = Callable[[ReadSource, Any], LeafColumns]
"""What a read stands for, given as plain data and as its ``Relation`` proto (the runtime asks the server's
catalog, or the server itself, as configured)."""


@dataclass(frozen=True)
class Column:
    """One column a relation produces: its name (``None`` when the server names it: an unaliased expression),
    its node in the graph, and the names it may be qualified by."""

    name: str | None
    node: int
    qualifiers: frozenset[str] = frozenset()

    def named(self, name: str) -> bool:
        return self.name is not None and self.name.lower() == name.lower()


class Walk:
    """One action's column graph, and what its relations' columns are made of."""

    def __init__(self, leaves: Leaves, *, descriptions: bool = False, analyzed: bool = False) -> None:
        self.graph = ColumnGraph(descriptions=descriptions)
        self.leaves = leaves
        self.analyzed = analyzed
        """Whether the server writes the plan as analyzed, not optimized (a save through a data source provider:
        Kafka, JDBC, Delta): a cast to the type a column has already is still in it."""
        self.types: dict[int, str] = {}
        """The Spark type of the nodes that are an input column as it is (a read's, or one renamed)."""
        self.by_plan_id: dict[int, Frame] = {}
        """Each relation's frame by the ``plan_id`` the client gave it (``df["id"]`` names its frame so)."""
        self.unclaimed: dict[int, str] = {}
        """The nodes whose lineage the client cannot tell, and why: a column reaching one is unclaimed."""
        self.unclaimed_dataset: list[str] = []
        """Why the lineage of the whole output (a filter's, a join's columns) misses something."""
        self._nodes = itertools.count(1)

    def node(self) -> int:
        return next(self._nodes)

    def cast_is_identity(self, node: int, to_type: str | None) -> bool:
        """Whether casting the column ``node`` to ``to_type`` (a Spark type name) leaves it as it is: it has that
        type already, and the server writes the optimized plan, from which such a cast is gone."""
        return not self.analyzed and to_type is not None and spark_type(self.types.get(node)) == spark_type(to_type)

    def unclaim(self, node: int, error: UnclaimedColumnError) -> None:
        """``node``'s lineage cannot be told (the first reason is kept)."""
        self.unclaimed.setdefault(node, str(error))

    def unclaimed_reason(self, node: int) -> str | None:
        """Why a column ``node`` depends on cannot be told, if one cannot."""
        seen, pending = {node}, [node]
        while pending:
            current = pending.pop()
            reason = self.unclaimed.get(current)
            if reason is not None:
                return reason
            for source, _, _ in self.graph.edges.get(current, {}):
                if source not in seen:
                    seen.add(source)
                    pending.append(source)
        return None

    def leaf(self, read: ReadSource, relation: Any = None) -> Frame:
        found = self.leaves(read, relation)
        if found.unclaimed is not None:
            return Unknown(found.unclaimed)
        return Leaf(self, found)


class Frame:
    """The columns one relation produces."""

    def find(self, parts: Sequence[str]) -> int | None:
        """The node of the column ``parts`` names (``["id"]``, ``["a", "id"]``); ``None`` when this relation
        has no such column; raises :class:`UnclaimedColumnError` when the client cannot tell."""
        raise NotImplementedError

    def may_have(self, parts: Sequence[str]) -> bool:
        """Whether a column of that name may be in it without being listed (an open read's)."""
        return False

    def columns(self) -> list[Column] | None:
        """Every column, in order; ``None`` when the client does not know them all."""
        raise NotImplementedError

    def resolve(self, parts: Sequence[str]) -> int:
        """As :meth:`find`, but a column that is not there is unclaimed too."""
        node = self.find(parts)
        if node is None:
            raise UnclaimedColumnError(f"no column {'.'.join(parts)} is known on the client where it is read")
        return node

    def all_columns(self, why: str) -> list[Column]:
        """Every column; raises :class:`UnclaimedColumnError` (``why`` needs them) when they are not known."""
        columns = self.columns()
        if columns is None:
            raise UnclaimedColumnError(f"{why} over a source whose schema is not known on the client")
        return columns


def _matching(columns: Sequence[Column], parts: Sequence[str]) -> list[Column]:
    name = parts[-1]
    qualifier = parts[-2].lower() if len(parts) > 1 else None
    return [c for c in columns if c.named(name) and (qualifier is None or qualifier in c.qualifiers)]


def _one(matches: list[Column], parts: Sequence[str]) -> int | None:
    if len(matches) > 1:
        raise UnclaimedColumnError(f"the name {'.'.join(parts)} is ambiguous")
    return matches[0].node if matches else None


class Leaf(Frame):
    """A read: its columns are input columns of its datasets."""

    def __init__(self, walk: Walk, found: LeafColumns) -> None:
        self._walk = walk
        self._found = found
        self._made: list[Column] = []
        if found.columns is not None:
            self._made = [self._column(name, type_) for name, type_ in found.columns]

    def _column(self, name: str, type_: str | None) -> Column:
        node = self._walk.node()
        for dataset in self._found.datasets:
            self._walk.graph.add_input(node, InputColumn(dataset, name))
        if type_:
            self._walk.types[node] = type_.lower()
        column = Column(name, node, self._found.qualifiers)
        self._made.append(column)
        return column

    def find(self, parts: Sequence[str]) -> int | None:
        found = _one(_matching(self._made, parts), parts)
        if found is not None or self._found.columns is not None:
            return found
        if len(parts) > 1 and parts[-2].lower() not in self._found.qualifiers:
            return None
        return self._column(parts[-1], None).node  # an open read: the name is its column's

    def may_have(self, parts: Sequence[str]) -> bool:
        return self._found.columns is None and (len(parts) == 1 or parts[-2].lower() in self._found.qualifiers)

    def columns(self) -> list[Column] | None:
        return list(self._made) if self._found.columns is not None else None


class Listed(Frame):
    """Columns made or kept by a relation; names not listed are looked up in ``rest`` (an open child), unless
    ``hidden`` (dropped or renamed away)."""

    def __init__(
        self, columns: Sequence[Column], rest: Frame | None = None, hidden: frozenset[str] = frozenset()
    ) -> None:
        self._columns = list(columns)
        self._rest = rest
        self._hidden = hidden

    def find(self, parts: Sequence[str]) -> int | None:
        found = _one(_matching(self._columns, parts), parts)
        if found is not None or self._rest is None or parts[-1].lower() in self._hidden:
            return found
        return self._rest.find(parts)

    def may_have(self, parts: Sequence[str]) -> bool:
        if _matching(self._columns, parts) or self._rest is None or parts[-1].lower() in self._hidden:
            return False
        return self._rest.may_have(parts)

    def columns(self) -> list[Column] | None:
        return list(self._columns) if self._rest is None else None


class Qualified(Frame):
    """A relation under an alias (``df.alias("a")``): its columns are qualified by that name alone."""

    def __init__(self, child: Frame, alias: str) -> None:
        self._child = child
        self._alias = alias.lower()

    def find(self, parts: Sequence[str]) -> int | None:
        if len(parts) > 1 and parts[-2].lower() != self._alias:
            return None
        return self._child.find(parts[-1:])

    def may_have(self, parts: Sequence[str]) -> bool:
        return (len(parts) == 1 or parts[-2].lower() == self._alias) and self._child.may_have(parts[-1:])

    def columns(self) -> list[Column] | None:
        columns = self._child.columns()
        if columns is None:
            return None
        return [Column(c.name, c.node, frozenset({self._alias})) for c in columns]


class Joined(Frame):
    """Both sides of a join; ``using``: the columns it is joined on by name (``join(other, "id")``), each kept
    once, first."""

    def __init__(self, left: Frame, right: Frame, using: dict[str, int] | None = None) -> None:
        self._sides = (left, right)
        self._using = using or {}

    def find(self, parts: Sequence[str]) -> int | None:
        if len(parts) == 1 and parts[0].lower() in self._using:
            return self._using[parts[0].lower()]
        found = [node for node in (side.find(parts) for side in self._probed(parts)) if node is not None]
        if len(found) > 1:
            raise UnclaimedColumnError(f"the name {'.'.join(parts)} is on both sides of a join")
        return found[0] if found else None

    def _probed(self, parts: Sequence[str]) -> tuple[Frame, ...]:
        """The sides to look ``parts`` up in: where it is known to be; a side that may have it without listing
        it only when no other side has it or may have it."""
        listed = [side for side in self._sides if _listed(side, parts)]
        maybe = [side for side in self._sides if side.may_have(parts)]
        if (listed and maybe) or len(maybe) > 1:
            raise UnclaimedColumnError(
                f"which side of a join {'.'.join(parts)} comes from is not known on the client (a side's schema "
                "is not known)"
            )
        return tuple(listed or maybe)

    def may_have(self, parts: Sequence[str]) -> bool:
        return any(side.may_have(parts) for side in self._sides)

    def columns(self) -> list[Column] | None:
        left, right = (side.columns() for side in self._sides)
        if left is None or right is None:
            return None
        kept = [Column(name, node) for name, node in self._using.items()]
        return kept + [c for c in (*left, *right) if not (c.name and c.name.lower() in self._using)]


def _listed(frame: Frame, parts: Sequence[str]) -> bool:
    """Whether ``frame`` lists a column ``parts`` names (without making one)."""
    if frame.may_have(parts):
        return False
    try:
        return frame.find(parts) is not None
    except UnclaimedColumnError:
        return True  # there, and ambiguous: asking it says so


@dataclass
class Unknown(Frame):
    """A relation the client cannot follow: every column of it is unclaimed, for ``reason``."""

    reason: str

    def find(self, parts: Sequence[str]) -> int | None:
        raise UnclaimedColumnError(self.reason)

    def may_have(self, parts: Sequence[str]) -> bool:
        return False

    def columns(self) -> list[Column] | None:
        raise UnclaimedColumnError(self.reason)
