"""Failure paths: a failing query, a backend that is down or stuck, a plan node the analysis does not know."""

from __future__ import annotations

import logging
import re
import threading
from pathlib import Path
from typing import Any

import pytest

import spark_lineage
from spark_lineage.delivery.spool import Spool
from tests.support import LineageReceiver, app_events, datasets, free_port, only_run, query_events

pytestmark = pytest.mark.spark


def test_failing_query_gets_fail_with_error_message(
    spark: Any, lineage: Any, receiver: LineageReceiver, data_dir: Path
) -> None:
    target = data_dir / "never_written"
    with pytest.raises(Exception, match="boom"):
        spark.range(3).selectExpr("if(id > 1, raise_error('boom'), string(id)) AS x").write.parquet(str(target))
    assert lineage.flush(60)

    start, fail = only_run(receiver.events, "data_never_written")
    assert (start["eventType"], fail["eventType"]) == ("START", "FAIL")
    error = fail["run"]["facets"]["errorMessage"]
    assert "boom" in error["message"]
    assert error["programmingLanguage"] == "JAVA"
    assert "boom" in error["stackTrace"]
    assert datasets(fail, "outputs") == [("file", str(target))]
    assert "outputStatistics" not in fail["outputs"][0].get("outputFacets", {})


@pytest.mark.once
def test_backend_down_never_fails_the_job(
    spark: Any, data_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    spool = tmp_path / "spool"
    handle = spark_lineage.enable(spark, transport={"type": "http", "url": url}, python={"spool": {"dir": str(spool)}})
    with caplog.at_level(logging.WARNING, logger="spark_lineage"):
        for index in range(3):
            spark.range(5).write.parquet(str(data_dir / f"down_{index}"))
        assert not handle.flush(5)  # not delivered, and flush says so
        handle.disable(timeout=5)
    assert [spark.read.parquet(str(data_dir / f"down_{i}")).count() for i in range(3)] == [5, 5, 5]
    delivery_warnings = [
        r for r in caplog.records if re.search(r" lineage events? not delivered to http ", r.getMessage())
    ]
    assert len(delivery_warnings) == 1  # logged once per kind, not once per event
    assert "(connection refused); they wait in the spool at " in delivery_warnings[0].getMessage()
    assert not [r for r in caplog.records if r.exc_info], "tracebacks are for DEBUG only"
    # Everything waits in the spool: the application run's START and COMPLETE, and three query runs of four
    # events each (START, RUNNING as the write's job starts and as it ends, COMPLETE).
    left = Spool(spool).pending()
    assert left.count == 14
    (summary,) = [r.getMessage() for r in caplog.records if " spooled for replay, " in r.getMessage()]
    assert summary.startswith(
        "spark_lineage: 14 lineage events: 0 delivered, 14 spooled for replay, 0 lost; the 14 spooled (jobs "
        "default/lineage_tests, "
    )
    assert summary.endswith(f"deliver them with: spark-lineage replay --spool {spool}")


@pytest.mark.once
def test_stuck_backend_never_holds_up_the_job(spark: Any, data_dir: Path) -> None:
    release = threading.Event()
    receiver = LineageReceiver(before_reply=lambda: release.wait(60))
    try:
        handle = spark_lineage.enable(spark, transport={"type": "http", "url": receiver.url, "timeout": 120})
        for index in range(3):
            spark.range(5).write.parquet(str(data_dir / f"stuck_{index}"))
        # Every write returned while the backend had not answered a single request yet.
        assert receiver.events_answered == 0
        release.set()
        assert handle.flush(60)
        handle.disable(timeout=30)
        assert len(runs := [e for e in query_events(receiver.events) if "stuck_" in e["job"]["name"]]) == 12, runs
        assert [e["eventType"] for e in app_events(receiver.events)] == ["START", "COMPLETE"]
    finally:
        release.set()
        receiver.close()
    assert not receiver.invalid


def test_unknown_plan_node_is_reported_with_an_extraction_error(
    spark: Any, lineage: Any, receiver: LineageReceiver, data_dir: Path
) -> None:
    spark.read.option("header", True).csv(str(data_dir / "people.csv")).createOrReplaceTempView("people")
    try:
        spark.sql("CACHE TABLE people")  # CacheTable: a command no handler knows
        assert lineage.flush(60)
    finally:
        spark.sql("UNCACHE TABLE IF EXISTS people")

    _, complete = only_run(receiver.events, "cache_table")
    assert complete["eventType"] == "COMPLETE"
    # Without a handler, nothing of an unknown node is guessed: no datasets, and the error says why.
    assert datasets(complete, "inputs") == datasets(complete, "outputs") == []
    errors = complete["run"]["facets"]["extractionError"]["errors"]
    assert [e["errorMessage"] for e in errors] == [
        "no handler for plan node org.apache.spark.sql.catalyst.plans.logical.CacheTable: "
        "its inputs and outputs are not reported"
    ]


def test_unsupported_v2_table_is_reported_with_an_extraction_error(
    spark: Any, lineage: Any, receiver: LineageReceiver, data_dir: Path
) -> None:
    spark.read.option("header", True).csv(str(data_dir / "people.csv")).write.format("noop").mode("overwrite").save()
    assert lineage.flush(60)

    _, complete = only_run(receiver.events, "overwrite_by_expression")
    assert datasets(complete, "inputs") == [("file", str(data_dir / "people.csv"))]
    assert datasets(complete, "outputs") == []
    errors = complete["run"]["facets"]["extractionError"]["errors"]
    assert [e["errorMessage"] for e in errors] == [
        "V2 table of class org.apache.spark.sql.execution.datasources.noop.NoopTable$ is not supported "
        "(Iceberg tables are): it is not reported"
    ]


def test_a_query_the_analysis_never_got_to_is_counted_lost_in_the_last_line(
    spark: Any, data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    receiver = LineageReceiver()
    try:
        handle = spark_lineage.enable(spark, transport={"type": "http", "url": receiver.url}, python={"queueSize": 2})
        runtime = handle._runtime
        assert runtime is not None
        release = threading.Event()
        runtime.analysis_worker.submit(lambda: release.wait(60))  # the worker is busy: the queue fills up
        with caplog.at_level(logging.WARNING, logger="spark_lineage"):
            for index in range(3):
                spark.range(5).write.parquet(str(data_dir / f"crowded_{index}"))
            spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(60_000)
            release.set()
            handle.disable(timeout=30)
    finally:
        receiver.close()
    (summary,) = [r.getMessage() for r in caplog.records if " spooled for replay, " in r.getMessage()]
    lost = re.search(r"; (\d+) lost \(jobs \(a query\)\): not analyzed: the spark_lineage-analysis queue was full "
                     r"\(2 items\)$", summary)  # fmt: skip
    assert lost is not None, summary
    reported = {e["job"]["name"] for e in query_events(receiver.events)}
    assert int(lost.group(1)) + len([n for n in reported if "crowded" in n]) == 3, (summary, reported)


def test_queries_the_analysis_is_behind_on_are_reported_without_column_lineage(spark: Any, data_dir: Path) -> None:
    receiver = LineageReceiver()
    try:
        handle = spark_lineage.enable(
            spark,
            transport={"type": "http", "url": receiver.url},
            # A write is one item of the queue (its Spark jobs wait in the JVM for it): 16 writes fill more than half
            # of 24, and the first few are read while more than half of it waits.
            python={"queueSize": 24, "delivery": {"concurrency": 1}},
        )
        runtime = handle._runtime
        assert runtime is not None
        release = threading.Event()
        runtime.analysis_worker.submit(lambda: release.wait(60))  # the worker is busy: work piles up
        people = spark.read.option("header", True).csv(str(data_dir / "people.csv"))
        for index in range(16):
            people.select("id", "name").write.parquet(str(data_dir / f"busy_{index}"))
        spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(60_000)
        worker = runtime.analysis_worker
        assert worker.backlog > worker.capacity // 2, "the writes did not pile up past half the queue"
        release.set()
        assert handle.flush(60)
        handle.disable(timeout=30)
    finally:
        receiver.close()
    completes = {
        e["job"]["name"].rsplit(".", 1)[-1]: e
        for e in query_events(receiver.events)
        if e["eventType"] == "COMPLETE" and "busy_" in e["job"]["name"]
    }
    # Every write is reported, with its output; the first ones the worker got to, while more than half the
    # queue waited, without column lineage, saying why.
    assert sorted(completes) == sorted(f"data_busy_{index}" for index in range(16))
    behind = [name for name, e in completes.items() if "extractionError" in e["run"]["facets"]]
    assert behind and behind == sorted(behind)[: len(behind)] and "data_busy_0" in behind
    for name, event in completes.items():
        (output,) = event["outputs"]
        assert output["name"] == str(data_dir / name.removeprefix("data_"))
        lineage = (output.get("facets") or {}).get("columnLineage")
        if name in behind:
            (error,) = event["run"]["facets"]["extractionError"]["errors"]
            assert error["errorMessage"].startswith("column lineage: not read, the analysis was behind (")
            assert lineage is None
        else:
            assert sorted(lineage["fields"]) == ["id", "name"]
