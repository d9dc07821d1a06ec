"""Structured Streaming without a JVM: the sources and sinks of a micro-batch from its captured plan, which
micro-batch actions are reported, and the runs a query's events turn into, from events a fake edge gives."""

from __future__ import annotations

import dataclasses
import json
import threading
from typing import Any

import pytest
from openlineage.client.event_v2 import RunEvent
from openlineage.client.serde import Serde

from spark_lineage import activation, analysis, naming
from spark_lineage import session as session_module
from spark_lineage.config import LineageConfig
from spark_lineage.events import EventBuilder
from spark_lineage.jvm import PendingQuery, PendingStreamEvent, QueryListener, StreamEventKind, StreamStarted
from spark_lineage.jvm.streaming import StreamTerminated
from spark_lineage.lineage import AnalysisContext, DatasetLineage
from spark_lineage.plan import (
    CapturedNode,
    CapturedQuery,
    CatalystNode,
    Opaque,
    QueryJob,
    RddRecord,
    SessionInfo,
    SparkJobDetails,
)
from spark_lineage.process import PROCESS
from spark_lineage.streaming import MicroBatch, StreamTracker
from spark_lineage.worker import ErrorLog
from tests.support import validate_event

SESSION = SessionInfo(app_name="app", app_id="local-1", spark_version="3.5.9", master="local[1]", warehouse=None)
SCHEMA = json.dumps({"type": "struct", "fields": [{"name": "value", "type": "binary", "nullable": True}]})
SERVERS = "b1.example:9092,b2.example:9092"
KAFKA = "kafka://b1.example:9092"


def _node(class_name: str, props: dict[str, Any], *children: CatalystNode, **fields: Any) -> CatalystNode:
    node = CatalystNode(class_name, fields=fields, is_plan=True, children=children)
    node.probed = CapturedNode(class_name, props, tree=node)
    return node


def _kafka_source(offsets: dict[str, dict[str, int]]) -> CatalystNode:
    stream = CapturedNode("org.apache.spark.sql.kafka010.KafkaMicroBatchStream", {"servers": SERVERS})
    return _node(
        "org.apache.spark.sql.execution.datasources.v2.StreamingDataSourceV2ScanRelation",
        {"stream": stream, "endOffset": json.dumps(offsets), "schema": SCHEMA},
    )


KAFKA_TABLE = "org.apache.spark.sql.kafka010.KafkaSourceProvider$KafkaTable"
SINK_SHAPES = ("spark-3.5-4.1", "spark-4.2", "spark-4.3")
"""Where ``WriteToMicroBatchDataSource`` keeps its table: ``table`` beside an optional relation, then
``sinkTable``, then only inside ``relation``, always set."""


def _kafka_sink(child: CatalystNode, shape: str = SINK_SHAPES[0], **options: str) -> CatalystNode:
    fields: dict[str, Any] = {"table": Opaque(KAFKA_TABLE)}
    if shape == "spark-4.2":
        fields = {"sinkTable": Opaque(KAFKA_TABLE)}
    elif shape == "spark-4.3":
        table = CapturedNode(KAFKA_TABLE)
        fields = {
            "relation": _node("org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation", {"table": table})
        }
    return _node(
        "org.apache.spark.sql.execution.streaming.sources.WriteToMicroBatchDataSource",
        {"options": options, "schema": SCHEMA},
        child,
        **fields,
    )


def _file_sink(child: CatalystNode, sink: CapturedNode) -> CatalystNode:
    return _node(
        "org.apache.spark.sql.execution.streaming.sources.WriteToMicroBatchDataSourceV1",
        {"sink": sink},
        child,
    )


def _lineage(tree: CatalystNode) -> tuple[list[tuple[str, str]], list[tuple[str, str]], list[str]]:
    query = CapturedQuery(func_name="micro_batch", start_ms=0, end_ms=0, tree=tree)
    lineage = analysis.analyze(query, AnalysisContext(session=SESSION))

    def names(datasets: Any) -> list[tuple[str, str]]:
        return [(d.identifier.namespace, d.identifier.name) for d in datasets]

    return names(lineage.inputs), names(lineage.outputs), lineage.errors


@pytest.mark.parametrize("shape", SINK_SHAPES)
def test_kafka_to_kafka_names_the_topics_of_the_offsets_on_the_first_server(shape: str) -> None:
    """The end offsets name the topics a batch read, whatever subscribed them (a pattern too)."""
    tree = _kafka_sink(
        _kafka_source({"orders": {"0": 4}, "returns": {"0": 1, "1": 2}}),
        shape,
        **{"kafka.bootstrap.servers": SERVERS, "topic": "copy"},
    )
    assert _lineage(tree) == ([(KAFKA, "orders"), (KAFKA, "returns")], [(KAFKA, "copy")], [])


def test_a_kafka_sink_without_a_topic_option_says_so() -> None:
    inputs, outputs, errors = _lineage(
        _kafka_sink(_kafka_source({"a": {"0": 1}}), **{"kafka.bootstrap.servers": SERVERS})
    )
    assert (inputs, outputs) == ([(KAFKA, "a")], [])
    assert errors == ["a Kafka streaming sink without a topic option: its output is not reported"]


def test_a_file_stream_reads_the_directory_it_watches_and_writes_its_sink_directory() -> None:
    relation = CapturedNode("org.apache.spark.sql.execution.datasources.HadoopFsRelation", {"schema": SCHEMA})
    source = _node(
        "org.apache.spark.sql.execution.datasources.LogicalRelation",
        {"relation": relation, "streamDirectory": "file:/data/incoming"},
        isStreaming=True,
    )
    sink = CapturedNode(
        "org.apache.spark.sql.execution.streaming.sinks.FileStreamSink", {"path": "hdfs://nn:8020/warehouse/out"}
    )
    assert _lineage(_file_sink(source, sink)) == (
        [("file", "/data/incoming")],
        [("hdfs://nn:8020", "/warehouse/out")],
        [],
    )


def test_foreach_batch_and_console_sinks_write_no_dataset_and_no_error() -> None:
    foreach = CapturedNode("org.apache.spark.sql.execution.streaming.sources.ForeachBatchSink")
    assert _lineage(_file_sink(_kafka_source({"a": {"0": 1}}), foreach)) == ([(KAFKA, "a")], [], [])
    console = _node(
        "org.apache.spark.sql.execution.streaming.sources.WriteToMicroBatchDataSource",
        {"options": {}},
        _kafka_source({"a": {"0": 1}}),
        table=Opaque("org.apache.spark.sql.execution.streaming.ConsoleTable$"),
    )
    assert _lineage(console) == ([(KAFKA, "a")], [], [])


def test_another_v2_stream_is_not_reported_and_says_so() -> None:
    stream = CapturedNode("org.apache.spark.sql.execution.streaming.sources.RateStreamMicroBatchStream")
    source = _node("org.apache.spark.sql.execution.datasources.v2.StreamingDataSourceV2Relation", {"stream": stream})
    sink = CapturedNode("org.apache.spark.sql.execution.streaming.FileStreamSink", {"path": "file:/out"})
    assert _lineage(_file_sink(source, sink)) == (
        [],
        [("file", "/out")],
        ["a RateStreamMicroBatchStream streaming source: its input is not reported"],
    )


@pytest.mark.parametrize("with_table", [False, True], ids=["spark-3.5", "spark-4.x"])
def test_an_iceberg_stream_reads_its_table_as_a_batch_read_names_it(with_table: bool) -> None:
    """Spark keeps no catalog or identifier for a stream loaded by name; the stream's table name has both. On 3.5
    the relation holds no table: the catalog's warehouse gives the location."""
    stream = CapturedNode("org.apache.iceberg.spark.source.SparkMicroBatchStream", {"table": "hcat.db.events"})
    props: dict[str, Any] = {"stream": stream}
    if with_table:
        location = "/data/tables/db/events"
        props["table"] = CapturedNode("org.apache.iceberg.spark.source.SparkTable", {"location": location})
    source = _node("org.apache.spark.sql.execution.datasources.v2.StreamingDataSourceV2ScanRelation", props)
    sink = CapturedNode("org.apache.spark.sql.execution.streaming.FileStreamSink", {"path": "file:/out"})
    query = CapturedQuery(func_name="micro_batch", start_ms=0, end_ms=0, tree=_file_sink(source, sink))
    conf = {"spark.sql.catalog.hcat": "org.apache.iceberg.spark.SparkCatalog", "spark.sql.catalog.hcat.type": "hadoop"}
    conf["spark.sql.catalog.hcat.warehouse"] = "file:/data/warehouse"
    session = dataclasses.replace(SESSION, conf=conf)
    lineage = analysis.analyze(query, AnalysisContext(session=session))
    location = "/data/tables/db/events" if with_table else "/data/warehouse/db/events"
    assert [(d.identifier.namespace, d.identifier.name) for d in lineage.inputs] == [("file", location)]
    assert lineage.errors == []


def test_an_rdd_leaf_of_a_foreach_batch_query_reads_the_stream_s_sources() -> None:
    """The batch DataFrame of a foreachBatch function is an RDD of the micro-batch's plan: it reads what the
    stream reads. Elsewhere an RDD leaf reads what its RDDs read, a Delta log never."""
    read = ("file:/data/_delta_log/00000.json", "file:/data/in/part-0.parquet")
    files = RddRecord(1, "org.apache.spark.sql.execution.datasources.FileScanRDD", paths=read, files=frozenset(read))
    leaf = _node("org.apache.spark.sql.execution.LogicalRDD", {"rdd": (files,)})
    query = CapturedQuery(func_name="save", start_ms=0, end_ms=0, tree=leaf)
    assert [d.identifier.name for d in analysis.analyze(query, AnalysisContext(session=SESSION)).inputs] == ["/data/in"]
    topic = DatasetLineage(naming.DatasetIdentifier(KAFKA, "orders"))
    ctx = AnalysisContext(session=SESSION, stream_sources=[topic])
    assert [(d.identifier.namespace, d.identifier.name) for d in analysis.analyze(query, ctx).inputs] == [
        (KAFKA, "orders")
    ]


def test_the_nested_write_of_a_micro_batch_is_not_reported_again() -> None:
    assert not analysis.is_reported("WriteToDataSourceV2", "collect", filter_read_only=True)
    assert analysis.is_reported("WriteToMicroBatchDataSource", "micro_batch", filter_read_only=True)
    assert analysis.is_reported("AppendData", "collect", filter_read_only=True)


def test_a_progress_report_is_a_batch_that_ran_or_a_query_waiting() -> None:
    ran = MicroBatch.from_progress(
        {
            "batchId": 3,
            "timestamp": "2026-01-02T03:04:05.678Z",
            "durationMs": {"addBatch": 40, "triggerExecution": 120},
            "sink": {"numOutputRows": 7},
        }
    )
    assert ran == MicroBatch(3, 1767323045678, 1767323045798, 7, True)
    waiting = MicroBatch.from_progress(
        {"batchId": 3, "timestamp": "2026-01-02T03:04:15.000Z", "durationMs": {"triggerExecution": 2}, "sink": {}}
    )
    assert (waiting.ran, waiting.output_rows) == (False, None)
    # A file sink does not count its rows: Spark reports -1.
    assert MicroBatch.from_progress({"durationMs": {}, "sink": {"numOutputRows": -1}}).output_rows is None


class _FakeStreams:
    """The edge's streaming reads, over events that are already plain values."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def started(self, event: Any) -> StreamStarted:
        return StreamStarted("q-1", event, "2026-01-02T03:04:05.000Z")

    def progress_json(self, event: Any) -> str:
        return str(event)

    def terminated(self, event: Any) -> StreamTerminated:
        return StreamTerminated("q-1", event)

    def query(self, query_id: str) -> Any:
        return self.handle

    def last_execution(self, query: Any) -> Any:
        return "incremental execution"

    def batch_jobs(self, run_id: str, batch_id: int, wait_seconds: float) -> tuple[QueryJob, ...]:
        """One Spark job per micro-batch, as Spark describes a micro-batch's jobs."""
        details = SparkJobDetails(10 + batch_id, f"id = q-1\nrunId = {run_id}\nbatch = {batch_id}", run_id)
        return (QueryJob(details, 1767323106010, 1767323106040, True),)


class _FakeBridge:
    def __init__(self, handle: Any = "query handle") -> None:
        self.streams = _FakeStreams(handle)


def _track(
    handle: Any,
    *steps: tuple[StreamEventKind, Any],
    sources_asked: list[Any] | None = None,
    bridge: Any = None,
    errors: ErrorLog | None = None,
) -> list[dict[str, Any]]:
    """The events of ``steps``; ``sources_asked``: where the sources of ``q-1`` are put, asked (as a
    foreachBatch function's query asks them) after each step."""
    delivered: list[RunEvent] = []
    tree = _kafka_sink(_kafka_source({"orders": {"0": 4}}), **{"kafka.bootstrap.servers": SERVERS, "topic": "copy"})
    captured: list[PendingQuery] = []

    def capture(pending: PendingQuery) -> CapturedQuery:
        captured.append(pending)
        return CapturedQuery("micro_batch", 0, 0, tree=tree, executed_node="WriteToDataSourceV2")

    tracker = StreamTracker(
        bridge or _FakeBridge(handle),
        EventBuilder(LineageConfig(), SESSION, "01930000-0000-7000-8000-000000000000"),
        capture,
        lambda query: analysis.analyze(query, AnalysisContext(session=SESSION)),
        delivered.extend,
        errors or ErrorLog(),
    )
    for kind, event in steps:
        tracker.handle(PendingStreamEvent(kind, event, 1767323100000))
        if sources_asked is not None:
            sources_asked.append(tracker.sources("q-1"))
    assert all(p.plans == ("analyzed",) for p in captured)
    assert len(captured) <= 1, "a query's plan is read once"
    events = [json.loads(Serde.to_json(event)) for event in delivered]
    for event in events:
        validate_event(event)
    return events


def _progress(batch_id: int, rows: int) -> str:
    return json.dumps(
        {
            "id": "q-1",
            "runId": "r-1",
            "batchId": batch_id,
            "timestamp": "2026-01-02T03:04:06.000Z",
            "durationMs": {"addBatch": 30, "triggerExecution": 50},
            "sink": {"numOutputRows": rows},
        }
    )


def test_a_query_is_a_run_and_each_micro_batch_a_run_under_it() -> None:
    events = _track(
        "query handle",
        (StreamEventKind.STARTED, "copy orders"),
        (StreamEventKind.PROGRESS, _progress(0, 4)),
        (StreamEventKind.PROGRESS, _progress(1, 2)),
        (StreamEventKind.TERMINATED, None),
    )
    query = [e for e in events if e["job"]["name"] == "app.copy_orders"]
    assert [e["eventType"] for e in query] == ["START", "RUNNING", "COMPLETE"]
    assert query[0]["inputs"] == query[0]["outputs"] == []
    assert {e["job"]["facets"]["jobType"]["jobType"] for e in query} == {"STREAMING_QUERY"}
    batches = [e for e in events if e["job"]["name"] == "app.write_to_data_source_v2"]
    # Each micro-batch as openlineage-spark reports it: RUNNING as its Spark job starts and as the job ends.
    assert [e["eventType"] for e in batches] == ["START", "RUNNING", "RUNNING", "COMPLETE"] * 2
    assert [e["run"]["facets"]["spark_jobDetails"]["jobDescription"] for e in batches[1::4]] == [
        "id = q-1\nrunId = r-1\nbatch = 0",
        "id = q-1\nrunId = r-1\nbatch = 1",
    ]
    assert [e["run"]["facets"]["spark_jobDetails"]["jobId"] for e in batches[1::4]] == [10, 11]
    assert {e["run"]["facets"]["parent"]["run"]["runId"] for e in batches} == {query[0]["run"]["runId"]}
    assert {e["run"]["facets"]["parent"]["root"]["run"]["runId"] for e in batches} == {
        "01930000-0000-7000-8000-000000000000"
    }
    assert [e["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] for e in batches[3::4]] == [4, 2]
    for event in [*query[1:], *batches]:
        assert [(d["namespace"], d["name"]) for d in event["inputs"]] == [(KAFKA, "orders")]
        assert [(d["namespace"], d["name"]) for d in event["outputs"]] == [(KAFKA, "copy")]


def test_a_foreach_batch_query_s_sources_need_not_wait_for_a_micro_batch_s_jobs() -> None:
    """The streams worker waits (up to BATCH_JOBS_WAIT_SECONDS) for a micro-batch's jobs; meanwhile the
    analysis worker, asking what a foreachBatch query's stream reads, is answered at once: the wait holds
    no lock."""
    answered: list[Any] = []

    class _WaitingStreams(_FakeStreams):
        def batch_jobs(self, run_id: str, batch_id: int, wait_seconds: float) -> tuple[QueryJob, ...]:
            asking = threading.Thread(target=lambda: answered.append(tracker.sources("q-1")))
            asking.start()
            asking.join(30)  # a bound for a deadlock only: the answer comes at once
            return super().batch_jobs(run_id, batch_id, wait_seconds)

    bridge = _FakeBridge()
    bridge.streams = _WaitingStreams("query handle")
    tree = _kafka_sink(_kafka_source({"orders": {"0": 4}}), **{"kafka.bootstrap.servers": SERVERS, "topic": "copy"})
    delivered: list[RunEvent] = []
    tracker = StreamTracker(
        bridge,
        EventBuilder(LineageConfig(), SESSION, "01930000-0000-7000-8000-000000000000"),
        lambda pending: CapturedQuery("micro_batch", 0, 0, tree=tree, executed_node="WriteToDataSourceV2"),
        lambda query: analysis.analyze(query, AnalysisContext(session=SESSION)),
        delivered.extend,
        ErrorLog(),
    )
    for kind, event in ((StreamEventKind.STARTED, "copy orders"), (StreamEventKind.PROGRESS, _progress(0, 4))):
        tracker.handle(PendingStreamEvent(kind, event, 1767323100000))
    ((source,),) = answered
    assert (source.identifier.namespace, source.identifier.name) == (KAFKA, "orders")
    batch = [json.loads(Serde.to_json(e)) for e in delivered if e.job.name == "app.write_to_data_source_v2"]
    assert [e["eventType"] for e in batch] == ["START", "RUNNING", "RUNNING", "COMPLETE"]


def test_a_foreach_batch_query_asks_the_sources_before_the_first_progress_and_the_run_still_names_them() -> None:
    asked: list[Any] = []
    events = _track(
        "query handle",
        (StreamEventKind.STARTED, None),
        (StreamEventKind.PROGRESS, _progress(0, 4)),
        (StreamEventKind.TERMINATED, None),
        sources_asked=asked,
    )
    # Asked after the start (the plan is read then, once), after the batch, and after the end (remembered).
    assert [[source.identifier.name for source in sources] for sources in asked] == [["orders"]] * 3
    query = [e for e in events if e["job"]["name"] == "app.streaming_query"]
    assert [e["eventType"] for e in query] == ["START", "RUNNING", "COMPLETE"]
    assert [d["name"] for d in query[1]["inputs"]] == ["orders"]


def test_the_sources_of_a_query_started_before_lineage_was_on_are_unknown() -> None:
    asked: list[Any] = []
    _track("query handle", (StreamEventKind.PROGRESS, _progress(0, 1)), sources_asked=asked)
    assert asked == [None]


class _JobsUnreadable(_FakeStreams):
    def batch_jobs(self, run_id: str, batch_id: int, wait_seconds: float) -> tuple[QueryJob, ...]:
        raise RuntimeError("the JVM is gone")


def test_a_micro_batch_whose_jobs_cannot_be_read_is_still_a_run_and_the_failure_is_said() -> None:
    bridge = _FakeBridge()
    bridge.streams = _JobsUnreadable("query handle")
    errors = ErrorLog()
    events = _track(
        "query handle",
        (StreamEventKind.STARTED, "copy orders"),
        (StreamEventKind.PROGRESS, _progress(0, 4)),
        bridge=bridge,
        errors=errors,
    )
    batches = [e for e in events if e["job"]["name"] == "app.write_to_data_source_v2"]
    assert [e["eventType"] for e in batches] == ["START", "COMPLETE"]
    assert batches[-1]["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 4
    assert errors.counts == {"reading a micro-batch's Spark jobs": 1}


def test_a_failed_query_ends_its_run_as_failed_with_the_error() -> None:
    events = _track(
        "query handle",
        (StreamEventKind.STARTED, None),
        (StreamEventKind.TERMINATED, "org.apache.spark.SparkException: boom"),
    )
    assert [(e["job"]["name"], e["eventType"]) for e in events] == [
        ("app.streaming_query", "START"),
        ("app.streaming_query", "FAIL"),
    ]
    # The plan of the batch that was running is read at the end: the run still names its datasets.
    assert [(d["namespace"], d["name"]) for d in events[-1]["inputs"]] == [(KAFKA, "orders")]
    assert events[-1]["run"]["facets"]["errorMessage"]["message"] == "org.apache.spark.SparkException: boom"


def test_a_query_already_gone_is_still_a_run_without_datasets() -> None:
    events = _track(None, (StreamEventKind.STARTED, None), (StreamEventKind.TERMINATED, None))
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
    assert events[-1]["inputs"] == events[-1]["outputs"] == []


def test_progress_of_a_query_started_before_lineage_was_on_is_ignored() -> None:
    assert _track("query handle", (StreamEventKind.PROGRESS, _progress(0, 1))) == []


class _Runtime:
    active = True

    def __init__(self, name: str) -> None:
        self.listener = QueryListener(lambda pending: None, name)

    def owns_listener(self, name: str) -> bool:  # as LineageRuntime's
        return bool(self.listener.toString() == name)


class _CloneBridge:
    session_key = "clone-session"

    def __init__(self, *listener_names: str) -> None:
        self._names = list(listener_names)

    def listener_names(self) -> list[str]:
        return self._names


def test_a_session_that_inherits_our_listener_shares_its_handle(monkeypatch: pytest.MonkeyPatch) -> None:
    """foreachBatch wraps the stream's clone of the session in a new Python session: it must not get a
    listener (and an application run) of its own, since the one it inherits already reports its queries."""
    monkeypatch.setattr(PROCESS, "_handles", {})
    parent = session_module.SparkLineageHandle(_Runtime("spark_lineage:parent-session"))  # type: ignore[arg-type]
    PROCESS.share_handle("parent-session", parent)
    bridge: Any = _CloneBridge("com.acme.Audit", "spark_lineage:parent-session")
    assert activation._inherited_handle(bridge) is parent
    assert PROCESS.handle_for("clone-session") is parent
    assert activation._inherited_handle(_CloneBridge("com.acme.Audit")) is None  # type: ignore[arg-type]
