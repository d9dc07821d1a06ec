"""The pure-Python analysis, from plans recorded on real Spark 3.5 and 4.1 (tests/fixtures/record_plans.py)."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import pytest
from openlineage.client.generated.lifecycle_state_change_dataset import LifecycleStateChange
from openlineage.client.serde import Serde

from spark_lineage.analysis import analyze, is_empty
from spark_lineage.config import LineageConfig
from spark_lineage.delivery.encoding import EventEncoder
from spark_lineage.events import EventBuilder
from spark_lineage.lineage import AnalysisContext, QueryLineage
from spark_lineage.plan import CapturedQuery, SessionInfo
from tests.fixtures.recorded import recorded_query, recorded_session
from tests.support import validate_event

PLANS = Path(__file__).parent.parent / "fixtures" / "plans"
VERSIONS = sorted(p.name for p in PLANS.iterdir() if p.is_dir())
DATA = "/tmp/spark-lineage-fixtures/data"
WAREHOUSE = "/tmp/spark-lineage-fixtures/warehouse"


def _session(version: str) -> SessionInfo:
    return recorded_session(PLANS / version)


def _query(version: str, name: str) -> CapturedQuery:
    return recorded_query(PLANS / version, name)


def _final_command(version: str, operation: str) -> str:
    """The fixture of an operation's last query (the command; earlier ones are e.g. CSV header inference)."""
    names = sorted(p.stem for p in (PLANS / version).glob(f"{operation}*.json"))
    return names[-1]


def _analyze(version: str, name: str, ctx: AnalysisContext | None = None) -> tuple[QueryLineage, list[Any]]:
    ctx = ctx or AnalysisContext(session=_session(version))
    query = _query(version, name)
    lineage = analyze(query, ctx)
    events = EventBuilder(LineageConfig(), ctx.session, "01930000-0000-7000-8000-000000000000").query_events(
        query, lineage
    )
    for event in events:
        validate_event(json.loads(Serde.to_json(event)))
    return lineage, events


def _ids(datasets: list[Any]) -> list[tuple[str, str]]:
    return sorted((d.identifier.namespace, d.identifier.name) for d in datasets)


@pytest.fixture(params=VERSIONS)
def version(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_file_write(version: str) -> None:
    lineage, events = _analyze(version, _final_command(version, "write_parquet"))
    assert _ids(lineage.inputs) == [("file", f"{DATA}/people.csv")]
    assert _ids(lineage.outputs) == [("file", f"{DATA}/people_pq")]
    assert [f.name for f in lineage.outputs[0].schema or []] == ["id", "name", "city"]
    assert lineage.outputs[0].lifecycle is None
    assert lineage.errors == []
    start, complete = events
    assert complete.job.name == "fixture_recorder.execute_insert_into_hadoop_fs_relation_command.data_people_pq"
    stats = complete.outputs[0].outputFacets["outputStatistics"]
    assert (stats.rowCount, stats.fileCount) == (3, 1)
    assert "outputStatistics" not in (start.outputs[0].outputFacets or {})


def test_save_as_table_and_ctas(version: str) -> None:
    ctx = AnalysisContext(session=_session(version))
    lineage, events = _analyze(version, "save_as_table-1", ctx)
    assert _ids(lineage.outputs) == [("file", f"{WAREHOUSE}/people")]
    (output,) = lineage.outputs
    assert output.lifecycle == LifecycleStateChange.CREATE
    assert [(s.namespace, s.name, s.type) for s in output.symlinks] == [
        (f"file:{WAREHOUSE}", "default.people", "TABLE")
    ]
    assert events[-1].job.name == "fixture_recorder.execute_create_data_source_table_as_select_command.default_people"
    if version >= "spark-4.1":
        # Spark 4.1 runs that CTAS inside a command of its own, which names no dataset, as in openlineage-spark.
        lineage, events = _analyze(version, "save_as_table-2", ctx)
        assert (lineage.inputs, lineage.outputs, lineage.errors) == ([], [], [])
        assert not is_empty(lineage)
        assert [e.job.name for e in events] == ["fixture_recorder.execute_save_as_v1_table_command"] * 2

    lineage, _ = _analyze(version, _final_command(version, "ctas"), ctx)
    assert _ids(lineage.inputs) == [("file", f"{WAREHOUSE}/people")]
    assert _ids(lineage.outputs) == [("file", f"{WAREHOUSE}/cities")]
    assert [f.name for f in lineage.outputs[0].schema or []] == ["city"]


def test_sql_insert_reads_and_writes_one_table(version: str) -> None:
    lineage, events = _analyze(version, "insert_into_sql")
    assert _ids(lineage.inputs) == _ids(lineage.outputs) == [("file", f"{WAREHOUSE}/people")]
    assert events[0].job.facets["sql"].query == "INSERT INTO people SELECT * FROM people WHERE city = 'oslo'"


def test_cached_relation_reads_through_the_cache(version: str) -> None:
    lineage, _ = _analyze(version, "cached_write")
    assert _ids(lineage.inputs) == [("file", f"{DATA}/people.csv")]
    assert _ids(lineage.outputs) == [("file", f"{DATA}/from_cache")]


def test_join_and_union_report_every_input(version: str) -> None:
    lineage, _ = _analyze(version, "join_union")
    assert _ids(lineage.inputs) == [
        ("file", f"{DATA}/people.csv"),
        ("file", f"{DATA}/people_pq"),
        ("file", f"{WAREHOUSE}/cities"),
    ]
    assert _ids(lineage.outputs) == [("file", f"{DATA}/joined")]


def test_ddl_lifecycle_states(version: str) -> None:
    ctx = AnalysisContext(session=_session(version))
    states = {}
    for name in ("truncate", "rename", "add_columns", "drop_table"):
        lineage, _ = _analyze(version, name, ctx)
        (output,) = lineage.outputs
        states[name] = (output.identifier.name, output.lifecycle, output.previous)
    assert states["truncate"] == (f"{WAREHOUSE}/cities", LifecycleStateChange.TRUNCATE, None)
    assert states["rename"][:2] == (f"{WAREHOUSE}/towns", LifecycleStateChange.RENAME)
    assert states["rename"][2].name == f"{WAREHOUSE}/cities"
    assert states["add_columns"] == (f"{WAREHOUSE}/towns", LifecycleStateChange.ALTER, None)
    assert states["drop_table"] == (f"{WAREHOUSE}/towns", LifecycleStateChange.DROP, None)


def test_failed_query_builds_start_and_fail(version: str) -> None:
    lineage, events = _analyze(version, "failed_write")
    assert _ids(lineage.outputs) == [("file", f"{DATA}/failed")]
    assert [e.eventType.value for e in events] == ["START", "FAIL"]
    assert "boom" in events[1].run.facets["errorMessage"].message


def test_unknown_nodes_are_reported_not_fatal(version: str) -> None:
    lineage, events = _analyze(version, "noop_write")
    assert _ids(lineage.inputs) == [("file", f"{DATA}/people.csv")]
    assert lineage.errors == [
        "V2 table of class org.apache.spark.sql.execution.datasources.noop.NoopTable$ is not supported "
        "(Iceberg tables are): it is not reported"
    ]
    facet = events[-1].run.facets["extractionError"]
    assert (facet.failedTasks, facet.errors[0].errorMessage) == (1, lineage.errors[0])

    query = _query(version, _final_command(version, "write_parquet"))
    assert query.tree is not None
    query.tree.leaves()[0].class_name = "com.example.MysteryRelation"
    lineage = analyze(query, AnalysisContext(session=_session(version)))
    assert lineage.errors == ["no handler for plan node com.example.MysteryRelation: its inputs are not reported"]
    assert _ids(lineage.outputs) == [("file", f"{DATA}/people_pq")]


def test_failed_probes_become_extraction_errors(version: str) -> None:
    query = _query(version, _final_command(version, "write_parquet"))
    assert query.tree is not None and query.tree.probed is not None
    query.tree.probed.errors["outputPath"] = "Method outputPath([]) does not exist"
    del query.tree.probed.props["outputPath"]
    lineage = analyze(query, AnalysisContext(session=_session(version)))
    assert "InsertIntoHadoopFsRelationCommand.outputPath: Method outputPath([]) does not exist" in lineage.errors


def test_queries_that_touch_nothing_are_empty(version: str) -> None:
    query = CapturedQuery(func_name="command", start_ms=1, end_ms=2, tree=None)
    assert is_empty(analyze(query, AnalysisContext(session=_session(version))))


def test_captures_round_trip_through_json(version: str) -> None:
    for path in (PLANS / version).glob("*.json"):
        if path.name == "session.json":
            continue
        data = json.loads(path.read_text())
        assert CapturedQuery.from_dict(data).to_dict() == data


def test_a_query_leaves_no_reference_cycle(version: str) -> None:
    """Every recorded query, analyzed, its events built and encoded, is freed by reference counting alone: a
    cycle (a probed node and its record holding each other, closures calling each other) left each query's tree
    to the garbage collector, whose young collections then ran more often and cost more during the next
    queries."""
    ctx = AnalysisContext(session=_session(version))
    builder = EventBuilder(LineageConfig(), ctx.session, "01930000-0000-7000-8000-000000000000")
    names = sorted(path.stem for path in (PLANS / version).glob("*.json") if path.name != "session.json")
    texts = [(PLANS / version / f"{name}.json").read_text() for name in names]

    def report(text: str) -> None:
        query = CapturedQuery.from_dict(json.loads(text))
        encoder = EventEncoder()
        for event in builder.query_events(query, analyze(query, ctx)):
            encoder.encode(event)

    report(texts[0])  # what is made once per process (caches, lasting facets) is made before the count
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector finds is kept in gc.garbage, to be looked at
    try:
        for text in texts:
            report(text)
        gc.collect()
        # Only lineage's own objects count: another test's threads (a sender's lane) may leave garbage meanwhile.
        ours = sorted(
            {_owner(value) for value in gc.garbage if _owner(value).startswith(("spark_lineage", "openlineage"))}
        )
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert len(texts) > 60
    assert ours == []


def _owner(value: object) -> str:
    """The module of a function's code, or of any other object's class."""
    code = getattr(value, "__code__", None)
    if code is not None:
        return f"{getattr(value, '__module__', '')}.{code.co_name}"
    return f"{type(value).__module__}.{type(value).__qualname__}"
