"""RUNNING events, ``spark_jobDetails`` and ``inputStatistics``: from plans recorded on real Spark
(tests/fixtures/record_plans.py) and the texts the job listener writes, without a JVM."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from openlineage.client.event_v2 import Job, Run, RunEvent
from openlineage.client.serde import Serde

from spark_lineage._version import __version__
from spark_lineage.analysis import analyze
from spark_lineage.config import LineageConfig
from spark_lineage.events import EventBuilder, job_details_facet, running_moments
from spark_lineage.facets import PRODUCER, SparkJobDetailsRunFacet
from spark_lineage.handlers.relations import HadoopFsRelationHandler
from spark_lineage.jvm.listener import PendingSqlJob, read_micro_batch_jobs, read_sql_job
from spark_lineage.jvm.wire import ITEM_SEP, JobMarker, micro_batch_key
from spark_lineage.lineage import AnalysisContext
from spark_lineage.plan import CapturedNode, QueryJob, RddJobEnd, RddJobStart, SparkJobDetails, SqlJobEnd, SqlJobStart
from spark_lineage.query_jobs import QueryJobLog
from tests.fixtures.recorded import recorded_query, recorded_session
from tests.support import validate_event

PLANS = Path(__file__).parent.parent / "fixtures" / "plans"
VERSIONS = sorted(p.name for p in PLANS.iterdir() if p.is_dir())
APP_RUN = "01930000-0000-7000-8000-000000000000"
UNSET, SEP = "\x1d", "\x1f"


@pytest.fixture(params=VERSIONS)
def version(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _documents(events: list[Any]) -> list[dict[str, Any]]:
    documents = [json.loads(Serde.to_json(event)) for event in events]
    for document in documents:
        validate_event(document)
    return documents


def test_the_listener_texts_read_as_job_starts_and_ends() -> None:
    text = SEP.join(["12", "1700000000123", "nightly load", UNSET, "csv at x.py:3", UNSET, "42"])
    start = read_sql_job(PendingSqlJob(text))
    assert start == SqlJobStart(42, 1_700_000_000_123, SparkJobDetails(12, "nightly load", None, "csv at x.py:3"))
    # The execution was over before the listener thread reached the job: no query to file it under.
    unfiled = SEP.join(["3", "5", UNSET, UNSET, UNSET, UNSET, ""])
    assert read_sql_job(PendingSqlJob(unfiled)).query_id is None  # type: ignore[union-attr]
    # A foreachBatch function's job names its streaming query.
    streamed = read_sql_job(PendingSqlJob(SEP.join(["4", "5", UNSET, UNSET, UNSET, "5f1c-query", "43", "9"])))
    assert streamed == SqlJobStart(43, 5, SparkJobDetails(4, streaming_query="5f1c-query"), execution_id=9)
    succeeded = PendingSqlJob(SEP.join(["12", "1700000000456", "org.apache.spark.scheduler.JobSucceeded$"]))
    assert read_sql_job(succeeded) == SqlJobEnd(12, 1_700_000_000_456, True)
    failed = PendingSqlJob(SEP.join(["12", "1700000000456", "org.apache.spark.scheduler.JobFailed"]))
    assert read_sql_job(failed) == SqlJobEnd(12, 1_700_000_000_456, False)


def test_the_job_log_files_jobs_under_their_query_until_it_is_reported() -> None:
    log = QueryJobLog(kept=2)
    log.record(SqlJobStart(7, 200, SparkJobDetails(2)))
    log.record(SqlJobStart(7, 100, SparkJobDetails(1)))
    log.record(SqlJobStart(None, 100, SparkJobDetails(9)))  # nobody to file it under: dropped
    log.record(SqlJobEnd(1, 150, True))
    log.record(SqlJobEnd(9, 150, True))
    assert log.take(7) == (QueryJob(SparkJobDetails(1), 100, 150, True), QueryJob(SparkJobDetails(2), 200))
    assert log.take(7) == ()  # taken once
    assert log.take(None) == ()
    for query in (1, 2, 3):  # queries never reported: the oldest are forgotten beyond the bound
        log.record(SqlJobStart(query, 1, SparkJobDetails(100 + query)))
    assert log.take(1) == ()
    assert [job.details.job_id for job in log.take(3)] == [103]


def test_a_job_reached_after_its_execution_ended_is_filed_under_the_query_of_its_execution() -> None:
    """A busy driver's listener thread can reach a job's start after the SQL execution ended, when Spark no longer
    holds its query: the job's execution id files it under the query an earlier job of that execution named."""
    log = QueryJobLog()
    log.record(SqlJobStart(7, 100, SparkJobDetails(75), execution_id=40))
    log.record(SqlJobStart(None, 200, SparkJobDetails(77), execution_id=40))
    log.record(SqlJobStart(None, 300, SparkJobDetails(90), execution_id=41))  # no job of 41 reached in time
    log.record(SqlJobEnd(77, 250, True))
    assert log.take(7) == (QueryJob(SparkJobDetails(75), 100), QueryJob(SparkJobDetails(77), 200, 250, True))
    text = SEP.join(["77", "200", UNSET, UNSET, UNSET, UNSET, "", "40"])
    assert read_sql_job(PendingSqlJob(text)) == SqlJobStart(None, 200, SparkJobDetails(77), execution_id=40)


def test_a_micro_batch_s_jobs_are_complete_once_its_end_was_filed_after_them() -> None:
    start = SEP.join(["5", "100", "batch = 0", "run-1", "start at x.py:9", "query-1", micro_batch_key("run-1", 0), "3"])
    end = SEP.join(["5", "150", "org.apache.spark.scheduler.JobSucceeded$"])
    details = SparkJobDetails(5, "batch = 0", "run-1", "start at x.py:9", "query-1")
    assert read_micro_batch_jobs(start + ITEM_SEP) == ((QueryJob(details, 100),), False)
    joined = ITEM_SEP.join([start, end, JobMarker.BATCH_END.value, ""])
    assert read_micro_batch_jobs(joined) == ((QueryJob(details, 100, 150, True),), True)
    assert read_micro_batch_jobs(None) == ((), False)
    assert micro_batch_key("run-1", 12) == "run-1/12"


def test_running_moments_are_each_job_start_and_the_first_job_end() -> None:
    jobs = [
        QueryJob(SparkJobDetails(1), 100, 300, True),
        QueryJob(SparkJobDetails(2), 400, 500, True),
        QueryJob(SparkJobDetails(3), 200, 250, True),
    ]
    moments = running_moments(jobs)
    assert [(m.time_ms, m.details.job_id if m.details else None) for m in moments] == [
        (100, 1),
        (200, 3),
        (250, None),
        (400, 2),
    ]
    # A first job that failed ends the run with FAIL: no RUNNING for its end.
    assert [m.details for m in running_moments([QueryJob(SparkJobDetails(1), 100, 300, False)])] == [SparkJobDetails(1)]


def test_a_query_run_has_a_running_event_per_job_with_its_details(version: str) -> None:
    session = recorded_session(PLANS / version)
    query = recorded_query(PLANS / version, "cl_projection")
    lineage = analyze(query, AnalysisContext(session=session))
    jobs = (
        QueryJob(
            SparkJobDetails(6, "load", "nightly", "parquet at job.py:9"), query.start_ms + 5, query.end_ms - 5, True
        ),
        QueryJob(SparkJobDetails(7), query.end_ms - 4, query.end_ms - 2, True),
    )
    query = replace(query, jobs=jobs, metrics={"numOutputRows": 3, "numOutputBytes": 900, "numFiles": 1})
    documents = _documents(EventBuilder(LineageConfig(), session, APP_RUN).query_events(query, lineage))
    assert [d["eventType"] for d in documents] == ["START", "RUNNING", "RUNNING", "RUNNING", "COMPLETE"]
    assert len({d["run"]["runId"] for d in documents}) == 1
    details = [d["run"]["facets"].get("spark_jobDetails") for d in documents]
    assert details[0] is None and details[2] is None and details[4] is None
    assert {k: v for k, v in details[1].items() if not k.startswith("_")} == {
        "jobId": 6,
        "jobDescription": "load",
        "jobGroup": "nightly",
        "jobCallSite": "parquet at job.py:9",
    }
    assert {k: v for k, v in details[3].items() if not k.startswith("_")} == {"jobId": 7}
    assert details[1]["_schemaURL"] == "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunFacet"
    assert details[1]["_producer"] == f"https://github.com/spark-lineage/spark-lineage/tree/{__version__}"
    # The first job's end is when the outputs' statistics are known; each RUNNING names the run's datasets.
    assert documents[2]["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 3
    assert "outputStatistics" not in (documents[1]["outputs"][0].get("outputFacets") or {})
    assert all(d["inputs"] == documents[0]["inputs"] for d in documents)
    assert [d["eventTime"] for d in documents] == sorted(d["eventTime"] for d in documents)


def test_a_runs_later_events_are_the_events_openlineage_python_would_make_and_check(version: str) -> None:
    """A run's events after its START are made without openlineage-python's checks (``_same_run``): each equals
    the event its constructors make, checks and all, from the same parts, and owns its run, job and lists."""
    session = recorded_session(PLANS / version)
    query = recorded_query(PLANS / version, "cl_projection")
    lineage = analyze(query, AnalysisContext(session=session))
    for error in (None, "boom"):
        jobs = (QueryJob(SparkJobDetails(6, "load"), query.start_ms + 5, query.end_ms - 5, error is None),)
        failed = replace(query, jobs=jobs, error=error, metrics={"numOutputRows": 3, "numFiles": 1})
        events = EventBuilder(LineageConfig(), session, APP_RUN).query_events(failed, lineage)
        assert [e.eventType.value for e in events if e.eventType] == (
            ["START", "RUNNING", "RUNNING", "COMPLETE"] if error is None else ["START", "RUNNING", "FAIL"]
        )
        for event in events:
            checked = RunEvent(
                eventType=event.eventType,
                eventTime=event.eventTime,
                run=Run(runId=event.run.runId, facets=dict(event.run.facets or {})),
                job=Job(namespace=event.job.namespace, name=event.job.name, facets=dict(event.job.facets or {})),
                inputs=list(event.inputs or []),
                outputs=list(event.outputs or []),
                producer=event.producer,
            )
            assert event == checked
            assert Serde.to_json(event) == Serde.to_json(checked)
        for one, other in zip(events, events[1:]):
            assert one.run is not other.run and one.job is not other.job
            assert one.run.facets is not other.run.facets and one.job.facets is not other.job.facets
            assert one.inputs is not other.inputs and one.outputs is not other.outputs
        _documents(events)


def test_a_run_spans_its_jobs_whatever_the_start_it_was_given(version: str) -> None:
    """The query's start is reckoned from its end and duration when the listener ran: a job may seem earlier."""
    session = recorded_session(PLANS / version)
    query = recorded_query(PLANS / version, "cl_projection")
    query = replace(query, jobs=(QueryJob(SparkJobDetails(6), query.start_ms - 50, query.end_ms + 5, True),))
    events = EventBuilder(LineageConfig(), session, APP_RUN).query_events(
        query, analyze(query, AnalysisContext(session=session))
    )
    assert [e.eventTime for e in events] == sorted(e.eventTime for e in events)
    assert events[0].eventTime == events[1].eventTime  # START no later than the job's start


def test_a_failed_query_has_no_running_event_for_its_failed_job(version: str) -> None:
    session = recorded_session(PLANS / version)
    query = recorded_query(PLANS / version, "cl_projection")
    lineage = analyze(query, AnalysisContext(session=session))
    query = replace(
        query, error="boom", jobs=(QueryJob(SparkJobDetails(6), query.start_ms + 1, query.end_ms - 1, False),)
    )
    documents = _documents(EventBuilder(LineageConfig(), session, APP_RUN).query_events(query, lineage))
    assert [d["eventType"] for d in documents] == ["START", "RUNNING", "FAIL"]


def test_spark_job_details_can_be_disabled(version: str) -> None:
    session = recorded_session(PLANS / version)
    query = recorded_query(PLANS / version, "cl_projection")
    query = replace(query, jobs=(QueryJob(SparkJobDetails(6), query.start_ms + 1),))
    config = LineageConfig(disabled_facets=frozenset({"spark_jobDetails"}))
    events = EventBuilder(config, session, APP_RUN).query_events(
        query, analyze(query, AnalysisContext(session=session))
    )
    assert [e.eventType.value for e in events if e.eventType] == ["START", "RUNNING", "COMPLETE"]
    assert all("spark_jobDetails" not in (e.run.facets or {}) for e in events)


def test_an_rdd_job_start_carries_its_job_details(version: str) -> None:
    session = recorded_session(PLANS / version)
    start = RddJobStart(7, 1_700_000_000_000, output_path="/tmp/out", details=SparkJobDetails(7, group="etl"))
    from spark_lineage.handlers.rdd import rdd_job_lineage

    documents = _documents(
        EventBuilder(LineageConfig(), session, APP_RUN).rdd_job_events(
            start, RddJobEnd(7, 1_700_000_000_001), rdd_job_lineage(start)
        )
    )
    assert [d["eventType"] for d in documents] == ["START", "COMPLETE"]
    facet = documents[0]["run"]["facets"]["spark_jobDetails"]
    assert {k: v for k, v in facet.items() if not k.startswith("_")} == {"jobId": 7, "jobGroup": "etl"}
    assert "spark_jobDetails" not in documents[1]["run"]["facets"]


def test_a_file_scan_gets_input_statistics_from_its_relation(version: str) -> None:
    session = recorded_session(PLANS / version)
    relation = CapturedNode(
        "org.apache.spark.sql.execution.datasources.HadoopFsRelation",
        {"rootPaths": ["file:/data/in"], "sizeInBytes": 1234, "fileCount": 2},
    )
    (dataset,) = HadoopFsRelationHandler().inputs(relation, AnalysisContext(session=session))
    stats = _documents([_one_input_event(session, dataset)])[0]["inputs"][0]["inputFacets"]["inputStatistics"]
    assert {k: v for k, v in stats.items() if not k.startswith("_")} == {"size": 1234, "fileCount": 2}
    # Without the size (the probe failed), no facet rather than a partial one.
    relation.props.pop("sizeInBytes")
    (dataset,) = HadoopFsRelationHandler().inputs(relation, AnalysisContext(session=session))
    assert dataset.input_statistics is None


def _one_input_event(session: Any, dataset: Any) -> Any:
    from spark_lineage.lineage import QueryLineage
    from spark_lineage.plan import CapturedQuery

    query = CapturedQuery(func_name="command", start_ms=1, end_ms=2, tree=None)
    return EventBuilder(LineageConfig(), session, APP_RUN).query_events(query, QueryLineage(inputs=[dataset]))[0]


def _event(event_type: str, millis: int, *, details: bool = False, statistics: bool = False) -> dict[str, Any]:
    run_facets: dict[str, Any] = {"spark_jobDetails": {"_producer": "p", "jobId": 1}} if details else {}
    input_facets = {"inputStatistics": {"size": 1}} if statistics else {}
    return {
        "eventType": event_type,
        "eventTime": f"2026-01-01T00:00:00.{millis:03d}Z",
        "run": {"runId": "r", "facets": run_facets},
        "job": {"name": "app.write.out", "facets": {"jobType": {"jobType": "SQL_JOB"}}},
        "inputs": [{"namespace": "file", "name": "/in", "inputFacets": input_facets}],
        "outputs": [],
    }


def test_the_parity_comparison_sees_missing_running_events_job_details_and_input_statistics() -> None:
    from tests.parity.compare import differences

    reference = [
        _event("START", 1, statistics=True),
        _event("RUNNING", 2, details=True, statistics=True),
        _event("RUNNING", 3, statistics=True),
        _event("COMPLETE", 4, statistics=True),
    ]
    assert differences("s", {"events": reference}, {"events": list(reversed(reference))}) == []  # time order
    ours = [_event("START", 1), _event("COMPLETE", 4, statistics=True)]
    found = {
        (d.aspect, d.detail): (d.reference, d.ours) for d in differences("s", {"events": reference}, {"events": ours})
    }
    assert found == {
        ("eventTypes", "sequence"): ("START RUNNING RUNNING COMPLETE", "START COMPLETE"),
        ("runFacets", "spark_jobDetails"): ("RUNNING(jobId)", "none"),
    }
    ours = [_event("START", 1), _event("RUNNING", 2, details=True), _event("RUNNING", 3), _event("COMPLETE", 4)]
    found = {
        (d.aspect, d.detail): (d.reference, d.ours) for d in differences("s", {"events": reference}, {"events": ours})
    }
    assert found == {("inputStatistics", "file /in"): ("present", "absent")}


def test_an_iceberg_scan_gets_input_statistics_from_its_scan_report() -> None:
    from spark_lineage.facets.iceberg import attach_scan_report
    from spark_lineage.handlers.iceberg import scan_statistics
    from spark_lineage.lineage import DatasetLineage, InputStatistics
    from spark_lineage.naming import from_location

    dataset = DatasetLineage(from_location("file:/warehouse/db/t"))
    metrics = {"result-data-files": {"unit": "count", "value": 3}, "total-file-size-in-bytes": {"value": 4096}}
    attach_scan_report(dataset, {"table-name": "ice.db.t", "snapshot-id": 5, "metrics": metrics})
    assert scan_statistics(dataset) == InputStatistics(bytes=4096, files=3)
    assert scan_statistics(DatasetLineage(from_location("file:/warehouse/db/u"))) is None  # no report: no facet


def test_an_iceberg_scan_adds_the_rows_of_the_files_it_plans_to_its_statistics() -> None:
    from spark_lineage.handlers.iceberg import scanned_rows

    scan = "org.apache.iceberg.spark.source.SparkBatchQueryScan"
    assert scanned_rows(CapturedNode(scan, {"rows": "OptionalLong[7]"})) == 7
    assert scanned_rows(CapturedNode(scan, {"rows": "OptionalLong.empty"})) is None
    assert scanned_rows(CapturedNode(scan, errors={"rows": "no such method"})) is None
    assert scanned_rows(CapturedNode("org.apache.spark.sql.kafka010.KafkaBatch")) is None
    assert scanned_rows(None) is None


def test_a_catalog_table_scan_gets_its_size_when_spark_knows_it() -> None:
    from spark_lineage.handlers.relations import table_scan_statistics
    from spark_lineage.lineage import InputStatistics

    relation = CapturedNode("org.apache.spark.sql.execution.datasources.HadoopFsRelation", {"sizeInBytes": 2048})
    assert table_scan_statistics(relation) == InputStatistics(bytes=2048)
    # A table without statistics is estimated at spark.sql.defaultSizeInBytes: no size known.
    relation.props["sizeInBytes"] = 2**63 - 1
    assert table_scan_statistics(relation) is None
    assert table_scan_statistics(None) is None


def test_no_running_events_with_deltas_session_extension() -> None:
    from spark_lineage.analysis import reports_query_jobs

    assert reports_query_jobs({}) is True
    assert reports_query_jobs({"spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension"}) is False


@pytest.mark.parametrize(
    "details",
    [
        SparkJobDetails(7, "write out_3", "nightly", "save at job.py:12"),
        SparkJobDetails(0, None, None, None),
    ],
)
def test_a_job_details_facet_is_the_one_its_checked_constructor_makes(details: SparkJobDetails) -> None:
    """Made as a copy of a facet checked once, with the job's values: equal to the facet made and checked anew,
    and a facet of its own (the facet copied from is never changed)."""
    made = job_details_facet(details)
    checked = SparkJobDetailsRunFacet(
        jobId=details.job_id,
        jobDescription=details.description,
        jobGroup=details.group,
        jobCallSite=details.call_site,
        producer=PRODUCER,
    )
    assert made == checked
    assert Serde.to_json(made) == Serde.to_json(checked)
    assert job_details_facet(SparkJobDetails(1)) == SparkJobDetailsRunFacet(jobId=1, producer=PRODUCER)
    assert made is not job_details_facet(details)
