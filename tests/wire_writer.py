"""A pure-Python writer of the JVM wire formats (:mod:`spark_lineage.jvm.wire`), writing each text as the
JVM-side functions do: the other half of the round-trip tests (``tests/unit/test_wire.py``).

Values are described with the small classes below where the format tells kinds apart that Python values do
not (an ``ExprId`` from a number, a plan node from an expression).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from spark_lineage.jvm.capture import FAILED, Failed, TooLong
from spark_lineage.jvm.wire import CLASS_PREFIXES, CaptureTag, ProbeTag, TreeTag


@dataclass(frozen=True)
class ExprId:
    id: int


@dataclass(frozen=True)
class JavaEnum:
    name: str


@dataclass(frozen=True)
class Other:
    """A value of a class the walk does not read: only its class name crosses."""

    class_name: str


@dataclass(frozen=True)
class Rows:
    """A sequence of ``count`` values the walk does not read (rows of a local relation)."""

    class_name: str
    count: int


@dataclass(frozen=True)
class Skipped:
    """An expression not read (only the plan's shape)."""


@dataclass(frozen=True)
class Tuple:
    items: tuple[TreeModel, ...]


@dataclass(frozen=True)
class Expression:
    class_name: str
    fields: tuple[TreeModel, ...] = ()
    expr_id: int | None = None
    sql: str | None = None
    """Its SQL text, written when column-lineage descriptions are read."""


@dataclass(frozen=True)
class Plan:
    class_name: str
    fields: tuple[TreeModel, ...] = ()
    output: tuple[tuple[int, str], ...] | None = ()
    """The output columns (expression id, name); ``None`` writes none (its output could not be computed)."""
    types: tuple[tuple[str, str], ...] | None = None
    """Each output column's type name and metadata JSON, written as the typed output when given."""


TreeModel = Union[None, str, int, float, bool, ExprId, JavaEnum, Other, Rows, Skipped, Tuple, Expression, Plan, list]


def short_class_name(name: str) -> str:
    """The class name as the JVM writes it: each package of :data:`CLASS_PREFIXES` replaced, in order."""
    for package, short in CLASS_PREFIXES:
        name = name.replace(package, short)
    return name


def _string(text: str) -> str:
    return f"{TreeTag.STRING.value}{len(text)}{TreeTag.LENGTH_END.value}{text}"


def _scalar(value: int | float | bool) -> str:
    text = ("true" if value else "false") if isinstance(value, bool) else repr(value)
    return f"{TreeTag.SCALAR.value}{text}{TreeTag.END.value}"


def plan_nodes_among(fields: tuple[TreeModel, ...]) -> list[Plan]:
    """The plan nodes a plan node's fields hold (in sequences and tuples too): its children."""
    found: list[Plan] = []
    for value in fields:
        if isinstance(value, Plan):
            found.append(value)
        elif isinstance(value, list):
            found.extend(plan_nodes_among(tuple(value)))
        elif isinstance(value, Tuple):
            found.extend(plan_nodes_among(value.items))
    return found


@dataclass
class TreeWriter:
    """Writes a tree's text; each plan node gets the next identity hash."""

    parts: list[str] = field(default_factory=list)
    identities: dict[int, str] = field(default_factory=dict)

    def text(self, value: TreeModel) -> str:
        self.write(value)
        return "".join(self.parts)

    def write(self, value: TreeModel) -> None:
        t, out = TreeTag, self.parts
        end = t.END.value
        if value is None:
            out.append(t.NONE.value)
        elif isinstance(value, str):
            out.append(_string(value))
        elif isinstance(value, (bool, int, float)):
            out.append(_scalar(value))
        elif isinstance(value, ExprId):
            out.append(f"{t.EXPR_ID.value}{value.id}{end}")
        elif isinstance(value, JavaEnum):
            out.append(f"{t.ENUM.value}{value.name}{end}")
        elif isinstance(value, Other):
            out.append(f"{t.OPAQUE.value}{short_class_name(value.class_name)}{end}")
        elif isinstance(value, Rows):
            out.append(f"{t.ROWS.value}{short_class_name(value.class_name)}{end}{value.count}{end}")
        elif isinstance(value, Skipped):
            out.append(t.SKIPPED_EXPRESSION.value)
        elif isinstance(value, list):
            out.append(t.LIST.value)
            for item in value:
                self.write(item)
            out.append(t.LIST_END.value)
        elif isinstance(value, Tuple):
            out.append(t.TUPLE.value)
            for item in value.items:
                self.write(item)
            out.append(t.TUPLE_END.value)
        elif isinstance(value, Expression):
            out.append(f"{t.EXPRESSION.value}{short_class_name(value.class_name)}{end}")
            if value.expr_id is not None:
                out.append(f"{t.EXPR_ID_OF.value}{value.expr_id}{end}")
            if value.sql is not None:
                out.append(t.SQL_OF.value + _string(value.sql))
            for item in value.fields:
                self.write(item)
            out.append(t.EXPRESSION_END.value)
        else:
            self._plan(value)

    def _plan(self, plan: Plan) -> None:
        t, out = TreeTag, self.parts
        end, length_end = t.END.value, t.LENGTH_END.value
        identity = self.identities[id(plan)] = str(len(self.identities) + 1000)
        out.append(f"{t.PLAN.value}{short_class_name(plan.class_name)}{end}{identity}{end}")
        if plan.output is not None:
            typed = plan.types is not None and len(plan.types) == len(plan.output)
            out.append(t.TYPED_OUTPUT.value if typed else t.OUTPUT.value)
            for position, (expr_id, name) in enumerate(plan.output):
                out.append(f"{expr_id}{length_end}{len(name)}{length_end}{name}")
                if typed and plan.types is not None:
                    out.extend(f"{len(text)}{length_end}{text}" for text in plan.types[position])
            out.append(end)
        for item in plan.fields:
            self.write(item)
        out.append(t.PLAN_CHILDREN.value)
        out.extend(f"{self.identities[id(child)]}{end}" for child in plan_nodes_among(plan.fields))
        out.append(t.PLAN_END.value)


def tree_text(value: TreeModel) -> str:
    return TreeWriter().text(value)


CaptureModel = Union[None, str, int, float, bool, Failed, TooLong, list]


def capture_text(fields: list[CaptureModel]) -> str:
    """A header's or a body's text: one value per field."""
    parts: list[str] = []

    def write(value: CaptureModel) -> None:
        if value is None:
            parts.append(CaptureTag.NONE.value)
        elif value is FAILED:
            parts.append(CaptureTag.FAILED.value)
        elif isinstance(value, TooLong):
            parts.append(f"{CaptureTag.TOO_LONG.value}{value.length}{TreeTag.END.value}")
        elif isinstance(value, str):
            parts.append(_string(value))
        elif isinstance(value, (bool, int, float)):
            parts.append(_scalar(value))
        else:
            parts.append(CaptureTag.LIST.value)
            for item in value:
                write(item)
            parts.append(CaptureTag.LIST_END.value)

    for value in fields:
        write(value)
    return "".join(parts)


@dataclass(frozen=True)
class Probed:
    """What the probers write of one object: ``values`` one per probe, or ``None`` for ``kind``."""

    values: tuple[ProbeModel, ...] | None
    kind: ProbeTag = ProbeTag.PROBES


@dataclass(frozen=True)
class Nested:
    class_name: str
    probed: Probed
    table: bool = False


ProbeModel = Union[None, str, int, float, bool, ProbeTag, Nested]


def probes_text(objects: list[Probed]) -> str:
    """The probe text of several objects, in the order the walk met them."""
    parts: list[str] = []

    def probed(value: Probed) -> None:
        if value.values is None:
            parts.append(value.kind.value)
            return
        parts.append(ProbeTag.PROBES.value)
        for item in value.values:
            write(item)
        parts.append(ProbeTag.END.value)

    def write(value: ProbeModel) -> None:
        if value is None:
            parts.append(ProbeTag.NONE.value)
        elif isinstance(value, ProbeTag):
            parts.append(value.value)
        elif isinstance(value, str):
            parts.append(_string(value))
        elif isinstance(value, (bool, int, float)):
            parts.append(_scalar(value))
        else:
            if value.table:
                parts.append(ProbeTag.TABLE.value)
            parts.append(f"{ProbeTag.NESTED.value}{short_class_name(value.class_name)}{TreeTag.END.value}")
            probed(value.probed)

    for item in objects:
        probed(item)
    return "".join(parts)
