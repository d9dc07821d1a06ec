"""Column lineage of every plan shape, from plans recorded on real Spark 3.5 and 4.1 (the parity scenarios,
``tests/parity/scenarios.py``, recorded by ``tests/fixtures/record_plans.py``): exact fields, input columns
and transformations, and the dataset-level list. The parity harness checks the same shapes against
openlineage-spark itself."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from openlineage.client.serde import Serde

from spark_lineage.analysis import analyze
from spark_lineage.config import ColumnLineageConfig, LineageConfig, resolve
from spark_lineage.events import EventBuilder
from spark_lineage.extras import install_hint
from spark_lineage.lineage import AnalysisContext, ColumnSource, QueryLineage
from spark_lineage.plan import SessionInfo
from tests.fixtures.recorded import recorded_query, recorded_session
from tests.support import validate_event

PLANS = Path(__file__).parent.parent / "fixtures" / "plans"
VERSIONS = sorted(p.name for p in PLANS.iterdir() if p.is_dir())

# Per scenario (and capture, where one scenario ran several queries): each output column's input columns,
# as "<dataset's last path segment>.<column> <transformations>", and the dataset-level input columns.
EXPECTED: dict[str, tuple[dict[str, list[str]], list[str]]] = {
    "projection": (
        {
            "x": ["t1.a D/IDENTITY"],
            "b": ["t1.b D/IDENTITY"],
            "c1": ["t1.c D/TRANSFORMATION"],
            "bc": ["t1.b D/TRANSFORMATION", "t1.c D/TRANSFORMATION"],
        },
        [],
    ),
    "masking": (
        {
            "h": ["t1.b D/TRANSFORMATION/masked"],
            "m": ["t1.b D/TRANSFORMATION/masked"],
            "ha": ["t1.a D/TRANSFORMATION/masked"],
            "u": ["t1.b D/TRANSFORMATION"],
        },
        [],
    ),
    "literals_only": (
        {"a": ["t1.a D/IDENTITY"]},
        [],
    ),
    "join_inner_where": (
        {"a": ["t1.a D/IDENTITY"], "d": ["t2.d D/IDENTITY"]},
        ["t1.a I/JOIN,I/FILTER", "t1.c I/FILTER", "t2.a I/JOIN,I/FILTER"],
    ),
    "join_left": (
        {"a": ["t1.a D/IDENTITY"], "d": ["t2.d D/IDENTITY"]},
        ["t1.a I/JOIN", "t2.a I/JOIN,I/FILTER"],
    ),
    "join_semi_in_subquery": (
        {"a": ["t1.a D/IDENTITY"], "b": ["t1.b D/IDENTITY"]},
        ["t1.a I/JOIN", "t2.a I/JOIN"],
    ),
    "join_cross": (
        {"b": ["t1.b D/IDENTITY"], "d": ["t2.d D/IDENTITY"]},
        [],
    ),
    "aggregate_having": (
        {"b": ["t1.b D/IDENTITY"], "total": ["t1.c D/AGGREGATION"], "n": ["t1.a D/AGGREGATION/masked"]},
        ["t1.b I/GROUP_BY", "t1.c I/FILTER"],
    ),
    "aggregate_rollup": (
        {"b": ["t1.b D/IDENTITY"], "a": ["t1.a D/IDENTITY"], "sc": ["t1.c D/AGGREGATION"]},
        ["t1.a I/GROUP_BY", "t1.b I/GROUP_BY"],
    ),
    "window_functions": (
        {
            "a": ["t1.a D/IDENTITY"],
            "running": ["t1.a I/WINDOW", "t1.b I/WINDOW", "t1.c D/AGGREGATION"],
            "rn": ["t1.b I/WINDOW", "t1.c I/WINDOW"],
        },
        [],
    ),
    "union_all": (
        {"a": ["t1.a D/IDENTITY", "t2.a D/IDENTITY"], "b": ["t1.b D/IDENTITY", "t2.d D/IDENTITY"]},
        [],
    ),
    "union_distinct": (
        {"a": ["t1.a D/IDENTITY", "t2.a D/IDENTITY"], "b": ["t1.b D/IDENTITY", "t2.d D/IDENTITY"]},
        [],
    ),
    "case_when_if_coalesce": (
        {
            "cw": ["t1.b D/TRANSFORMATION", "t1.c I/CONDITIONAL"],
            "i": ["t1.a I/CONDITIONAL", "t1.c D/TRANSFORMATION"],
            "co": ["t1.b D/TRANSFORMATION,I/CONDITIONAL", "t2.d D/TRANSFORMATION,I/CONDITIONAL"],
        },
        ["t1.a I/JOIN", "t2.a I/JOIN,I/FILTER"],
    ),
    "explode_lateral_view": (
        {"id": ["s.id D/IDENTITY"], "tag": ["s.tags D/TRANSFORMATION"]},
        ["s.tags I/FILTER"],
    ),
    "posexplode": (
        {"id": ["s.id D/IDENTITY"], "pos": ["s.tags D/TRANSFORMATION"], "tag": ["s.tags D/TRANSFORMATION"]},
        ["s.tags I/FILTER"],
    ),
    "scalar_subquery": (
        {"a": ["t2.a D/IDENTITY"], "m": ["t1.c D/AGGREGATION"]},
        [],
    ),
    "cte_twice": (
        {"a": ["t1.a D/IDENTITY"], "ub": ["t1.b D/TRANSFORMATION"]},
        ["t1.a I/JOIN,I/FILTER", "t1.c I/FILTER"],
    ),
    "cached_dataframe": (
        {"a2": ["t1.a D/IDENTITY"], "ub": ["t1.b D/TRANSFORMATION"]},
        ["t1.c I/FILTER"],
    ),
    "temp_view": (
        {"a": ["t1.a D/IDENTITY"], "ub": ["t1.b D/TRANSFORMATION"]},
        ["t1.c I/FILTER"],
    ),
    "nested_struct_fields": (
        {"id": ["s.id D/IDENTITY"], "sx": ["s.st D/TRANSFORMATION"], "st": ["s.st D/IDENTITY"]},
        ["s.st I/FILTER"],
    ),
    "sort_limit": (
        {"a": ["t1.a D/IDENTITY"], "b": ["t1.b D/IDENTITY"]},
        ["t1.c I/SORT"],
    ),
    "jdbc_read_query": (
        {"id": ["orders.id D/IDENTITY"], "name": ["customers.name D/IDENTITY"], "amount": ["orders.amount D/IDENTITY"]},
        [],
    ),
    "iceberg_merge_update_delete-2": (
        {"a": ["merged.a D/IDENTITY", "t2.a D/IDENTITY"], "b": ["merged.b D/IDENTITY", "t2.d D/IDENTITY"]},
        ["merged._file I/FILTER", "merged.a I/JOIN", "t2.a I/JOIN"],
    ),
    "iceberg_merge_update_delete-3": (
        {"a": ["merged.a D/IDENTITY"], "b": ["merged.a I/CONDITIONAL", "merged.b D/TRANSFORMATION"]},
        ["merged._file I/FILTER"],
    ),
    "v1_ctas-0": (
        {"a": ["t1.a D/IDENTITY"], "ub": ["t1.b D/TRANSFORMATION"]},
        ["t1.c I/FILTER"],
    ),
    "jdbc_write_append_and_overwrite-1": (
        {"id": ["t1.a D/IDENTITY"], "name": ["t1.b D/TRANSFORMATION"]},
        ["t1.c I/FILTER"],
    ),
}


def _session(version: str) -> SessionInfo:
    return recorded_session(PLANS / version)


def _analyze(version: str, name: str, config: ColumnLineageConfig | None = None) -> QueryLineage:
    query = recorded_query(PLANS / version, f"cl_{name}")
    return analyze(query, AnalysisContext(session=_session(version)), config or ColumnLineageConfig())


def _render(sources: list[ColumnSource]) -> list[str]:
    return [
        f"{s.column.dataset.name.rsplit('/', 1)[-1]}.{s.column.field} "
        + ",".join(f"{t.type[0]}/{t.subtype}{'/masked' if t.masking else ''}" for t in s.transformations)
        for s in sources
    ]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("scenario", sorted(EXPECTED))
def test_column_lineage_of_each_plan_shape(version: str, scenario: str) -> None:
    if scenario.startswith("jdbc_read_query"):
        pytest.importorskip("openlineage_sql", reason="parsing JDBC queries needs the spark extra")
    lineage = _analyze(version, scenario)
    (output,) = lineage.outputs
    assert output.column_lineage is not None, lineage.errors
    fields, dataset = EXPECTED[scenario]
    assert {name: _render(sources) for name, sources in output.column_lineage.fields.items()} == fields
    assert _render(output.column_lineage.dataset) == dataset
    assert list(output.column_lineage.fields) == [f.name for f in output.schema or [] if f.name in fields]


@pytest.mark.parametrize("version", VERSIONS)
def test_the_facet_validates_and_names_inputs_as_the_inputs_are_named(version: str) -> None:
    lineage = _analyze(version, "join_inner_where")
    session = _session(version)
    query = recorded_query(PLANS / version, "cl_join_inner_where")
    events = EventBuilder(LineageConfig(), session, "01930000-0000-7000-8000-000000000000").query_events(query, lineage)
    for event in events:
        validate_event(json.loads(Serde.to_json(event)))
    facet = json.loads(Serde.to_json(events[-1]))["outputs"][0]["facets"]["columnLineage"]
    inputs = {(d.identifier.namespace, d.identifier.name) for d in lineage.inputs}
    named = {(f["namespace"], f["name"]) for v in facet["fields"].values() for f in v["inputFields"]}
    assert named <= inputs and named
    assert facet["fields"]["a"]["inputFields"][0]["transformations"] == [
        {"type": "DIRECT", "subtype": "IDENTITY", "description": "", "masking": False}
    ]
    assert {f["field"] for f in facet["dataset"]} == {"a", "c"}


@pytest.mark.parametrize("version", VERSIONS)
def test_dataset_lineage_disabled_puts_it_in_every_field(version: str) -> None:
    config = resolve({"spark.openlineage.columnLineage.datasetLineageEnabled": "false"}).column_lineage
    (output,) = _analyze(version, "join_inner_where", config).outputs
    assert output.column_lineage is not None and output.column_lineage.dataset == []
    assert {name: _render(sources) for name, sources in output.column_lineage.fields.items()} == {
        "a": ["t1.a D/IDENTITY,I/JOIN,I/FILTER", "t1.c I/FILTER", "t2.a I/JOIN,I/FILTER"],
        "d": ["t1.a I/JOIN,I/FILTER", "t1.c I/FILTER", "t2.a I/JOIN,I/FILTER", "t2.d D/IDENTITY"],
    }


@pytest.mark.parametrize("version", VERSIONS)
def test_schema_size_limit_and_disabled_facet(version: str) -> None:
    limited = resolve({"spark.openlineage.columnLineage.schemaSizeLimit": "1"}).column_lineage
    (output,) = _analyze(version, "join_inner_where", limited).outputs
    assert output.column_lineage is None  # two columns: more than the limit
    assert resolve({"spark.openlineage.facets.columnLineage.disabled": "true"}).column_lineage is None


@pytest.mark.parametrize("version", VERSIONS)
def test_a_plan_over_the_budget_keeps_its_datasets_and_says_so(version: str) -> None:
    lineage = _analyze(version, "window_functions", ColumnLineageConfig(budget_millis=0))
    (output,) = lineage.outputs
    assert output.column_lineage is None
    assert lineage.inputs and lineage.errors == [
        "column lineage: the column lineage time budget ran out; the datasets are reported without it"
    ]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_plan_no_rule_foresaw_keeps_its_datasets_and_says_so(version: str) -> None:
    query = recorded_query(PLANS / version, "cl_case_when_if_coalesce")
    assert query.tree is not None
    for node in query.tree.walk():
        if node.simple_name == "CaseWhen":
            node.fields = {**node.fields, "branches": ["not a (condition, value) pair"]}
    lineage = analyze(query, AnalysisContext(session=_session(version)), ColumnLineageConfig())
    (output,) = lineage.outputs
    assert output.column_lineage is None and len(lineage.inputs) == 2
    assert lineage.errors == [
        "column lineage failed (ValueError('too many values to unpack (expected 2)')); "
        "the datasets are reported without it"
    ]


def test_without_the_sql_parser_a_jdbc_query_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from spark_lineage.handlers import jdbc

    monkeypatch.setitem(sys.modules, "openlineage_sql", None)  # what `import` meets when it is not installed
    jdbc._jdbc_read.cache_clear()
    try:
        lineage = _analyze(VERSIONS[0], "jdbc_read_query")
    finally:
        jdbc._jdbc_read.cache_clear()
    assert lineage.inputs == [] and lineage.outputs
    assert lineage.errors == [f"reading a JDBC query needs openlineage-sql ({install_hint('spark')})"]
    assert "'openlineage-sql>=" in lineage.errors[0]


HIVE_PLANS = PLANS.parent / "hive_plans"
JOIN_ON = "INNER JOIN ON (t1.a = t2.a)"
GROUPED = "GROUP BY t1.a, t1.b"
FILTER_T1 = "WHERE ((t1.a > 1) AND (t1.a IS NOT NULL))"
FILTER_T2 = "WHERE ((spark_catalog.default.cll_source2.a IS NOT NULL) AND (spark_catalog.default.cll_source2.a > 1))"
KEYS_T1 = ["I/GROUP_BY " + GROUPED, "I/JOIN " + JOIN_ON, "I/FILTER " + FILTER_T1]
KEYS_T2 = ["I/JOIN " + JOIN_ON, "I/FILTER " + FILTER_T2]
DESCRIBED = {
    # OpenLineage's own expected events for its test of this query (pysparkCLLEnd.json), field for field.
    "ident": {
        "cll_source1.a": ["D/IDENTITY t1.a AS ident", *KEYS_T1],
        "cll_source1.b": ["I/GROUP_BY " + GROUPED],
        "cll_source2.a": KEYS_T2,
    },
    "trans": {
        "cll_source1.a": KEYS_T1,
        "cll_source1.b": ["D/TRANSFORMATION concat(t1.b, 'test') AS trans", "I/GROUP_BY " + GROUPED],
        "cll_source2.a": KEYS_T2,
    },
    "agg": {
        "cll_source1.a": KEYS_T1,
        "cll_source1.b": ["I/GROUP_BY " + GROUPED],
        "cll_source2.a": KEYS_T2,
        "cll_source2.c": ["D/AGGREGATION sum(t2.c) AS agg"],
    },
}


def _described(sources: list[ColumnSource]) -> dict[str, list[str]]:
    """Each input column's transformations, as "<D or I>/<subtype> <description>"."""
    return {
        f"{s.column.dataset.name.rsplit('/', 1)[-1]}.{s.column.field}": [
            f"{t.type[0]}/{t.subtype} {t.description}".rstrip() for t in s.transformations
        ]
        for s in sources
    }


@pytest.mark.parametrize("version", sorted(p.name for p in HIVE_PLANS.iterdir() if p.is_dir()))
def test_descriptions_are_the_sql_of_each_expression_and_clause(version: str) -> None:
    """``columnLineage.descriptionsEnabled``: the CTAS of OpenLineage's own column-lineage test (recorded with
    the SQL of each expression a plan node holds), described as openlineage-spark describes it; without the
    setting the same plan is described by nothing."""
    query = recorded_query(HIVE_PLANS / version, "hive_ctas_column_lineage-2")  # the CTAS's optimized plan
    session = recorded_session(HIVE_PLANS / version)
    config = ColumnLineageConfig(dataset_lineage=False, descriptions=True)
    (output,) = analyze(query, AnalysisContext(session=session), config).outputs
    assert output.column_lineage is not None
    fields = output.column_lineage.fields
    assert {name: _described(sources) for name, sources in fields.items()} == DESCRIBED

    plain = ColumnLineageConfig(dataset_lineage=False)
    (output,) = analyze(query, AnalysisContext(session=session), plain).outputs
    assert output.column_lineage is not None
    assert {name: _described(sources) for name, sources in output.column_lineage.fields.items()} == {
        name: {column: [text.split(" ")[0] for text in texts] for column, texts in columns.items()}
        for name, columns in DESCRIBED.items()
    }
