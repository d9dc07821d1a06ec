"""RDD lineage: DataFrames over RDDs, from plans recorded on real Spark (tests/fixtures/record_plans.py); runs of
RDD jobs from the records the edge reads; and the pure-Python pieces (directories, input paths, job names)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from openlineage.client.serde import Serde

from spark_lineage.analysis import analyze
from spark_lineage.config import LineageConfig, resolve
from spark_lineage.events import EventBuilder
from spark_lineage.handlers.rdd import add_job_statistics, rdd_inputs, rdd_job_lineage
from spark_lineage.jvm.listener import JobSink, PendingJob
from spark_lineage.jvm.rdd import split_input_paths
from spark_lineage.lineage import AnalysisContext, OutputStatistics
from spark_lineage.naming import normalize_job_name, rdd_job_suffix, read_directories
from spark_lineage.plan import CapturedNode, JobIo, RddJobEnd, RddJobStart, RddRecord
from tests.fixtures.recorded import recorded_query, recorded_session
from tests.support import validate_event

PLANS = Path(__file__).parent.parent / "fixtures" / "plans"
VERSIONS = sorted(p.name for p in PLANS.iterdir() if p.is_dir())
DATA = "/tmp/spark-lineage-fixtures/data"


@pytest.fixture(params=VERSIONS)
def version(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize(
    ("operation", "output"),
    [("rdd_text_file", f"{DATA}/lines"), ("rdd_of_dataframe", f"{DATA}/people_rdd")],
)
def test_a_dataframe_over_an_rdd_reads_what_its_rdd_lineage_reads(version: str, operation: str, output: str) -> None:
    session = recorded_session(PLANS / version)
    ctx = AnalysisContext(session=session)
    query = recorded_query(PLANS / version, operation)
    lineage = analyze(query, ctx)
    assert lineage.errors == []
    # A file read through textFile or a file scan is reported as its directory, as the reference does.
    assert [(d.identifier.namespace, d.identifier.name) for d in lineage.inputs] == [("file", DATA)]
    assert [(d.identifier.namespace, d.identifier.name) for d in lineage.outputs] == [("file", output)]
    assert lineage.inputs[0].schema is None
    assert lineage.outputs[0].column_lineage is None or not lineage.outputs[0].column_lineage.fields
    for event in EventBuilder(LineageConfig(), session, "01930000-0000-7000-8000-000000000000").query_events(
        query, lineage
    ):
        validate_event(json.loads(Serde.to_json(event)))


def _rdd(
    rdd_id: int, class_name: str, *deps: int, paths: tuple[str, ...] = (), files: tuple[str, ...] = ()
) -> RddRecord:
    return RddRecord(rdd_id, f"org.apache.spark.rdd.{class_name}", None, deps, paths, frozenset(files))


def test_only_file_reading_rdds_give_inputs_each_once() -> None:
    graph = (
        _rdd(4, "UnionRDD", 3, 2, 1),
        _rdd(
            3, "HadoopRDD", paths=("file:/d/a/1.txt", "file:/d/a/2.txt"), files=("file:/d/a/1.txt", "file:/d/a/2.txt")
        ),
        _rdd(2, "NewHadoopRDD", paths=("hdfs://nn:8020/logs/*.gz", "file:/d/a")),
        _rdd(1, "ParallelCollectionRDD"),
    )
    assert [(d.identifier.namespace, d.identifier.name) for d in rdd_inputs(graph)] == [
        ("file", "/d/a"),
        ("hdfs://nn:8020", "/logs/*.gz"),
    ]


def test_read_directories_reports_a_files_directory_and_a_directory_itself() -> None:
    paths = ["file:/x/a.csv", "file:/x/b.csv", "file:/y", "file:/y/c.csv", "file:/z/*.csv"]
    assert read_directories(paths, {"file:/x/a.csv", "file:/x/b.csv", "file:/y/c.csv"}) == [
        "file:/x",
        "file:/y",
        "file:/z/*.csv",
    ]


def test_hadoop_input_paths_split_on_unescaped_commas() -> None:
    assert split_input_paths("file:/a,file:/b/{x\\,y},file:/c\\\\d") == ("file:/a", "file:/b/{x,y}", "file:/c\\d")
    assert split_input_paths("") == ()


def test_an_rdd_graph_round_trips_through_json() -> None:
    node = CapturedNode(
        "LogicalRDD", props={"rdd": (_rdd(2, "MapPartitionsRDD", 1), _rdd(1, "HadoopRDD", paths=("f",)))}
    )
    assert CapturedNode.from_dict(json.loads(json.dumps(node.to_dict()))) == node


def _text_file_job(output: str | None) -> RddJobStart:
    """``sc.textFile(/in).map(f).saveAsTextFile(output)`` from PySpark, as the edge reads it."""
    graph = (
        _rdd(5, "MapPartitionsRDD", 4),
        _rdd(4, "MapPartitionsRDD", 3),
        RddRecord(3, "org.apache.spark.api.python.PythonRDD", None, (1,)),
        RddRecord(1, "org.apache.spark.rdd.MapPartitionsRDD", "/in", (0,)),
        RddRecord(0, "org.apache.spark.rdd.HadoopRDD", "/in", (), ("file:/in",)),
    )
    return RddJobStart(7, 1_700_000_000_000, graph, output)


def test_rdd_jobs_are_named_after_their_rdds_as_the_reference_names_them() -> None:
    assert rdd_job_suffix(_text_file_job(None).graph) == "map_partitions_python_map_partitions_hadoop"
    named = (
        _rdd(2, "ShuffledRDD", 1),
        RddRecord(1, "org.apache.spark.rdd.MapPartitionsRDD", None, (0,)),
        RddRecord(0, "org.apache.spark.rdd.ParallelCollectionRDD", "list of words", ()),
    )
    assert rdd_job_suffix(named) == "shuffled_map_partitions_list of words"
    assert normalize_job_name(rdd_job_suffix(named)) == "shuffled_map_partitions_list_of_words"
    union = (_rdd(3, "UnionRDD", 1, 2), _rdd(1, "ParallelCollectionRDD"), _rdd(2, "ParallelCollectionRDD"))
    assert rdd_job_suffix(union) == "union_parallel_collection_parallel_collection"
    assert rdd_job_suffix(()) is None


@pytest.mark.parametrize("failed", [False, True])
def test_an_rdd_job_is_a_child_run_of_the_application_with_its_files(failed: bool) -> None:
    session = recorded_session(PLANS / VERSIONS[0])
    start = _text_file_job("file:/out")
    lineage = rdd_job_lineage(start)
    end = RddJobEnd(7, start.time_ms + 50, error="boom" if failed else None)
    events = EventBuilder(LineageConfig(), session, "01930000-0000-7000-8000-000000000000").rdd_job_events(
        start, end, lineage
    )
    documents = [json.loads(Serde.to_json(event)) for event in events]
    for document in documents:
        validate_event(document)
    assert [d["eventType"] for d in documents] == ["START", "FAIL" if failed else "COMPLETE"]
    assert {d["job"]["name"] for d in documents} == {"fixture_recorder.map_partitions_python_map_partitions_hadoop"}
    assert documents[0]["job"]["facets"]["jobType"]["jobType"] == "RDD_JOB"
    assert [(i["namespace"], i["name"]) for i in documents[1]["inputs"]] == [("file", "/in")]
    assert [(o["namespace"], o["name"]) for o in documents[1]["outputs"]] == [("file", "/out")]
    assert documents[1]["run"]["facets"]["parent"]["run"]["runId"] == "01930000-0000-7000-8000-000000000000"
    assert ("errorMessage" in documents[1]["run"]["facets"]) is failed


def test_an_rdd_job_with_one_input_and_one_output_gives_them_its_task_metrics_as_statistics() -> None:
    session = recorded_session(PLANS / VERSIONS[0])
    start = _text_file_job("file:/out")
    end = RddJobEnd(7, start.time_ms + 50)
    lineage = rdd_job_lineage(start)
    add_job_statistics(lineage, JobIo(records_read=4, bytes_read=31, records_written=4, bytes_written=29))
    events = EventBuilder(LineageConfig(), session, "01930000-0000-7000-8000-000000000000").rdd_job_events(
        start, end, lineage
    )
    complete = json.loads(Serde.to_json(events[-1]))
    validate_event(complete)
    read = complete["inputs"][0]["inputFacets"]["inputStatistics"]
    written = complete["outputs"][0]["outputFacets"]["outputStatistics"]
    assert (read["rowCount"], read["size"], written["rowCount"], written["size"]) == (4, 31, 4, 29)
    assert "fileCount" not in read and "fileCount" not in written


def test_task_metrics_are_no_datasets_statistics_when_the_job_read_two_or_nothing() -> None:
    two_inputs = RddJobStart(
        7,
        1_700_000_000_000,
        (
            _rdd(2, "UnionRDD", 0, 1),
            RddRecord(0, "org.apache.spark.rdd.HadoopRDD", "/a", (), ("file:/a",)),
            RddRecord(1, "org.apache.spark.rdd.HadoopRDD", "/b", (), ("file:/b",)),
        ),
        "file:/out",
    )
    lineage = rdd_job_lineage(two_inputs)
    add_job_statistics(lineage, JobIo(4, 31, 4, 29))
    assert [d.input_statistics for d in lineage.inputs] == [None, None]
    assert lineage.outputs[0].statistics == OutputStatistics(rows=4, bytes=29)
    nothing_known = rdd_job_lineage(_text_file_job("file:/out"))
    add_job_statistics(nothing_known, JobIo())
    assert (nothing_known.inputs[0].input_statistics, nothing_known.outputs[0].statistics) == (None, None)


def test_an_rdd_job_whose_rdds_were_gone_is_named_after_its_id() -> None:
    session = recorded_session(PLANS / VERSIONS[0])
    start = RddJobStart(7, 1_700_000_000_000, output_path=None)
    events = EventBuilder(LineageConfig(), session, "01930000-0000-7000-8000-000000000000").rdd_job_events(
        start, RddJobEnd(7, 1_700_000_000_001, error="lost"), rdd_job_lineage(start)
    )
    assert events[0].job.name == "fixture_recorder.7"


def test_the_job_sink_only_queues_and_never_raises() -> None:
    queued: list[PendingJob] = []
    sink = JobSink(queued.append)
    sink.accept("start event", object())
    sink.accept("end event", "end")
    assert [job.is_start for job in queued] == [True, False]
    JobSink(lambda job: 1 / 0).accept("event", "end")  # swallowed: Spark's thread must never see our errors


def test_rdd_events_disabled_is_read_from_confs_and_enable_options() -> None:
    assert resolve({}).rdd_events_disabled is False
    assert resolve({"spark.openlineage.filter.rddEventsDisabled": "true"}).rdd_events_disabled is True
    assert resolve({}, {"filter": {"rddEventsDisabled": True}}).rdd_events_disabled is True
