"""The JVM wire formats (:mod:`spark_lineage.jvm.wire`) round trip: a pure-Python writer of each
(``tests/wire_writer.py``) writes a text as the JVM-side functions do, and the decoders read back what was
written, for hand-picked cases and for cases hypothesis generates (any text in strings and names, any depth)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_lineage.errors import DecodeError
from spark_lineage.jvm import catalyst_tree, probes
from spark_lineage.jvm.capture import FAILED, TooLong, _FieldReader
from spark_lineage.jvm.catalyst_tree import decode_plan
from spark_lineage.jvm.sessions import PendingSessionEvent, read_session_event
from spark_lineage.jvm.wire import CLASS_PREFIXES, CaptureTag, ProbeTag, Separator, SessionEventKind, TreeTag
from spark_lineage.plan import (
    SKIPPED_EXPRESSION,
    CatalystNode,
    ConnectClient,
    ConnectSessionEnded,
    ConnectSessionStarted,
    Opaque,
)
from tests.wire_writer import (
    CaptureModel,
    Expression,
    ExprId,
    JavaEnum,
    Nested,
    Other,
    Plan,
    Probed,
    ProbeModel,
    Rows,
    Skipped,
    TreeModel,
    Tuple,
    capture_text,
    plan_nodes_among,
    probes_text,
    short_class_name,
    tree_text,
)

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _no_names(class_name: str) -> tuple[str, ...]:
    return ()


# --- what a model decodes to --------------------------------------------------------------------------------


def expected(value: TreeModel) -> Any:
    """What the decoder should make of a model value, in the comparable form :func:`comparable` gives."""
    if isinstance(value, ExprId):
        return value.id
    if isinstance(value, JavaEnum):
        return value.name
    if isinstance(value, Other):
        return Opaque(value.class_name)
    if isinstance(value, Rows):
        return Opaque(value.class_name, value.count)
    if isinstance(value, Skipped):
        return SKIPPED_EXPRESSION
    if isinstance(value, list):
        return [expected(item) for item in value]
    if isinstance(value, Tuple):
        return tuple(expected(item) for item in value.items)
    if isinstance(value, Expression):
        return ("expression", value.class_name, value.expr_id, value.sql, tuple(expected(f) for f in value.fields))
    if isinstance(value, Plan):
        typed = value.output is not None and value.types is not None and len(value.types) == len(value.output)
        output = tuple(
            (*column, *(value.types[i] if typed and value.types is not None else (None, None)))
            for i, column in enumerate(value.output or ())
        )
        children = len(plan_nodes_among(value.fields))
        return ("plan", value.class_name, output, tuple(expected(f) for f in value.fields), children)
    return value


def comparable(value: Any) -> Any:
    """A decoded value with its nodes as tuples (nodes compare by identity); checks each plan's children are
    the plan nodes among its fields, in order."""
    if isinstance(value, list):
        return [comparable(item) for item in value]
    if isinstance(value, tuple):
        return tuple(comparable(item) for item in value)
    if isinstance(value, CatalystNode):
        fields = tuple(comparable(f) for f in value.fields.values())
        assert list(value.fields) == [f"_{i}" for i in range(len(fields))]
        if not value.is_plan:
            return ("expression", value.class_name, value.expr_id, value.sql, fields)
        among = catalyst_tree._plan_nodes_in(list(value.fields.values()))
        assert len(value.children) == len(among) and all(a is b for a, b in zip(value.children, among))
        output = tuple((a.expr_id, a.name, a.type, a.metadata) for a in value.output)
        return ("plan", value.class_name, output, fields, len(value.children))
    return value


def round_trip(value: TreeModel) -> None:
    text = tree_text(value)
    root, plan_nodes = decode_plan(text, _no_names)
    assert comparable(root) == expected(value)
    assert [node.index for node in plan_nodes] == list(range(len(plan_nodes)))


# --- generated cases -------------------------------------------------------------------------------------------

names = st.text(st.characters(blacklist_characters=";", blacklist_categories=("Cs",)), min_size=1, max_size=12)
class_names = st.one_of(
    st.from_regex(r"[a-z]{1,4}(\.[A-Za-z$_][A-Za-z0-9$_]{0,8}){1,3}", fullmatch=True),
    st.builds(lambda package, name: package + name, st.sampled_from([p for p, _ in CLASS_PREFIXES]), names),
).filter(lambda name: short_class_name(name) == name or "~" not in name)
any_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)  # every tag character included
scalars = st.one_of(st.booleans(), st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False, allow_infinity=False))
leaves = st.one_of(
    st.none(),
    any_text,
    scalars,
    st.builds(ExprId, st.integers(0, 2**63 - 1)),
    st.builds(JavaEnum, names),
    st.builds(Other, class_names),
    st.builds(Rows, class_names, st.integers(0, 10**6)),
    st.just(Skipped()),
)
outputs = st.one_of(st.none(), st.lists(st.tuples(st.integers(0, 10**9), any_text), max_size=4).map(tuple))
output_types = st.one_of(st.none(), st.lists(st.tuples(any_text, any_text), max_size=4).map(tuple))


def _extend(children: st.SearchStrategy[TreeModel]) -> st.SearchStrategy[TreeModel]:
    fields = st.lists(children, max_size=4).map(tuple)
    return st.one_of(
        st.lists(children, max_size=4),
        st.builds(Tuple, fields),
        st.builds(
            Expression, class_names, fields, st.one_of(st.none(), st.integers(0, 2**40)), st.one_of(st.none(), any_text)
        ),
        st.builds(Plan, class_names, fields, outputs, output_types),
    )


trees = st.recursive(leaves, _extend, max_leaves=40)


@SETTINGS
@given(trees)
def test_any_tree_round_trips(value: TreeModel) -> None:
    round_trip(value)


@SETTINGS
@given(st.builds(Plan, class_names, st.lists(trees, max_size=5).map(tuple), outputs))
def test_any_plan_round_trips_with_its_nodes_in_the_order_the_text_opens_them(plan: Plan) -> None:
    round_trip(plan)


capture_values: st.SearchStrategy[CaptureModel] = st.recursive(
    st.one_of(st.none(), any_text, scalars, st.just(FAILED), st.builds(TooLong, st.integers(0, 10**9))),
    lambda children: st.lists(children, max_size=4),
    max_leaves=12,
)


@SETTINGS
@given(st.lists(capture_values, max_size=12))
def test_any_header_or_body_round_trips(fields: list[CaptureModel]) -> None:
    reader = _FieldReader(capture_text(fields))
    assert [reader.value() for _ in fields] == fields
    reader.end()


def _probed(values: st.SearchStrategy[ProbeModel]) -> st.SearchStrategy[Probed]:
    return st.one_of(
        st.builds(Probed, st.lists(values, max_size=4).map(tuple)),
        st.builds(Probed, st.none(), st.sampled_from([ProbeTag.NO_PROBES, ProbeTag.UNKNOWN])),
    )


probe_values: st.SearchStrategy[ProbeModel] = st.recursive(
    st.one_of(st.none(), any_text, scalars, st.sampled_from([ProbeTag.RESOLVE, ProbeTag.FAILED, ProbeTag.SKIPPED])),
    lambda children: st.builds(Nested, class_names, _probed(children), st.booleans()),
    max_leaves=10,
)


def _expected_probed(value: Probed) -> Any:
    return value.kind if value.values is None else [_expected_probe(v) for v in value.values]


def _expected_probe(value: ProbeModel) -> Any:
    if isinstance(value, Nested):
        nested = ("nested", value.class_name, _expected_probed(value.probed))
        return ("table", nested) if value.table else nested
    return value


def _read_probe(value: Any) -> Any:
    if isinstance(value, list):
        return [_read_probe(v) for v in value]
    if isinstance(value, probes._Table):
        return ("table", _read_probe(value.nested))
    if isinstance(value, probes._Nested):
        return ("nested", value.class_name, _read_probe(value.probes))
    return value


@SETTINGS
@given(st.lists(_probed(probe_values), max_size=6))
def test_any_probe_text_round_trips(objects: list[Probed]) -> None:
    reader = probes._ProbeReader(probes_text(objects))
    assert [_read_probe(reader.probed()) for _ in objects] == [_expected_probed(o) for o in objects]
    reader.end()


fields = st.text(
    st.characters(blacklist_characters=[s.value for s in Separator], blacklist_categories=("Cs",)), max_size=20
)


@SETTINGS
@given(
    st.sampled_from([SessionEventKind.STARTED, SessionEventKind.CLOSED, SessionEventKind.CLIENT]),
    fields,
    fields,
    st.integers(0, 2**62),
    fields,
)
def test_any_connect_session_event_round_trips(
    kind: SessionEventKind, session: str, user: str, time_ms: int, agent: str
) -> None:
    parts = [kind.value, session, user, str(time_ms)] + ([agent] if kind is SessionEventKind.CLIENT else [])
    read = read_session_event(PendingSessionEvent(Separator.FIELD.value.join(parts)))
    if kind is SessionEventKind.CLIENT:
        assert read == ConnectClient(session, user, time_ms, agent or None)
    else:
        made = ConnectSessionStarted if kind is SessionEventKind.STARTED else ConnectSessionEnded
        assert read == made(session, user, time_ms)


# --- hand-picked cases ------------------------------------------------------------------------------------------


def test_a_plan_reads_as_the_jvm_writes_it() -> None:
    """The text of a small plan, written out: a project over a filter, with an alias, a literal and a relation."""
    relation = Plan(
        "org.apache.spark.sql.execution.datasources.LogicalRelation",
        (Other("org.apache.spark.sql.execution.datasources.HadoopFsRelation"), [], None, False),
        ((1, "id"), (2, "name;{x}")),
    )
    condition = Expression("org.apache.spark.sql.catalyst.expressions.GreaterThan", (ExprId(1), 0))
    alias = Expression("org.apache.spark.sql.catalyst.expressions.Alias", ("n", ExprId(3)), 3)
    project = Plan(
        "org.apache.spark.sql.catalyst.plans.logical.Project",
        ([alias], Plan("org.apache.spark.sql.catalyst.plans.logical.Filter", (condition, relation), ((1, "id"),))),
        ((3, "n"),),
    )
    text = tree_text(project)
    assert text == (
        "{~l.Project;1000;@3:1:n;[(~e.Alias;#3;s1:ne3;)]{~l.Filter;1001;@1:2:id;(~e.GreaterThan;e1;v0;)"
        "{~d.LogicalRelation;1002;@1:2:id2:8:name;{x};o~d.HadoopFsRelation;[]Nvfalse;|}|1002;}|1001;}"
    )
    round_trip(project)


@pytest.mark.parametrize("tag", [t for t in TreeTag if len(t.value) == 1 and t.value not in ";:"])
def test_every_tag_inside_a_string_is_text(tag: TreeTag) -> None:
    round_trip(Plan("a.B", (tag.value * 3, [tag.value]), ((1, tag.value),)))


def test_the_capture_tags_read_the_values_the_tree_writer_writes() -> None:
    """The header and body are written with the walk's string and scalar writers: the tags must agree."""
    assert (CaptureTag.STRING.value, CaptureTag.NUMBER.value, CaptureTag.NONE.value) == (
        TreeTag.STRING.value,
        TreeTag.SCALAR.value,
        TreeTag.NONE.value,
    )
    assert (ProbeTag.STRING.value, ProbeTag.SCALAR.value, ProbeTag.NONE.value) == (
        TreeTag.STRING.value,
        TreeTag.SCALAR.value,
        TreeTag.NONE.value,
    )


def test_each_format_tells_its_tags_apart() -> None:
    for tags in (TreeTag, CaptureTag, ProbeTag):
        values = [t.value for t in tags]
        assert len(values) == len(set(values)), tags


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("{a.B;1;|2;}", "a child of a.B is not among its fields"),
        ("s5:abc", "ends early"),
        ("[s1:a", "ends early"),
        ("v1;v2;", "unexpected text at 3 of 6"),
        ("?", "unknown tag '?' at 0"),
    ],
)
def test_a_text_the_writer_cannot_write_is_an_error(text: str, error: str) -> None:
    with pytest.raises(DecodeError, match=error.replace("(", r"\(").replace("?", r"\?")):
        decode_plan(text, _no_names)
