"""A sick backend costs the job nothing and loses nothing: Spark jobs against a real HTTP backend on loopback
that is down, refuses requests, or answers slowly, then ``spark-lineage replay``."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import spark_lineage
from tests.support import EventKey, LineageReceiver, app_events, event_key, query_events, replay, run_ends

pytestmark = pytest.mark.spark


def _enable(spark: Any, receiver: LineageReceiver, spool: Path, **transport: Any) -> Any:
    return spark_lineage.enable(
        spark,
        appName="delivery job",
        transport={"type": "http", "url": receiver.url, **transport},
        python={"spool": {"dir": str(spool)}, "shutdownTimeoutSeconds": 5},
    )


def _runs(events: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Each run's event types, in arrival order."""
    runs: dict[str, list[str]] = defaultdict(list)
    for event in events:
        runs[event["run"]["runId"]].append(event["eventType"])
    return dict(runs)


def _assert_every_run_whole_and_once(receiver: LineageReceiver, outputs: list[str]) -> None:
    assert not receiver.invalid
    assert set(receiver.copies().values()) == {1}, "an acknowledged event was sent twice"
    assert [e["eventType"] for e in app_events(receiver.events)] == ["START", "COMPLETE"]
    queries = query_events(receiver.events)
    assert sorted(e["outputs"][0]["name"] for e in queries if e["eventType"] == "COMPLETE") == sorted(outputs)
    assert {run_ends(types) for types in _runs(queries).values()} == {("START", "COMPLETE")}
    assert len(_runs(queries)) == len(outputs)


@pytest.mark.once
def test_backend_down_for_the_whole_job_then_replay_delivers_everything(
    spark: Any, data_dir: Path, tmp_path: Path
) -> None:
    receiver = LineageReceiver()
    receiver.stop()
    spool = tmp_path / "spool"
    handle = _enable(spark, receiver, spool)
    outputs = [str(data_dir / f"write_{index:02d}") for index in range(30)]
    for output in outputs:
        spark.range(3).write.parquet(output)
    assert handle.disable() is False  # nothing was delivered: all of it waits in the spool
    assert receiver.events == []

    receiver.start()
    try:
        result = replay(spool)
        assert result.returncode == 0, result.stdout + result.stderr
        # Each write is a run of four events: START, RUNNING as its job starts and as it ends, COMPLETE.
        assert result.stdout == f"spark-lineage replay: 122 of 122 events delivered from {spool}\n"
        _assert_every_run_whole_and_once(receiver, outputs)
        # Replayed events keep their original times: each run's START is not later than its COMPLETE, and the
        # application run started before the first write.
        app_start, _ = app_events(receiver.events)
        assert all(app_start["eventTime"] <= e["eventTime"] for e in query_events(receiver.events))
        # Nothing is sent twice after an acknowledgement: a second replay has nothing left.
        again = replay(spool)
        assert (again.returncode, again.stdout) == (0, f"spark-lineage replay: 0 of 0 events delivered from {spool}\n")
    finally:
        receiver.close()


@pytest.mark.once
def test_the_next_enable_delivers_what_an_earlier_session_left(spark: Any, data_dir: Path, tmp_path: Path) -> None:
    receiver = LineageReceiver()
    receiver.stop()
    spool = tmp_path / "spool"
    handle = _enable(spark, receiver, spool)
    spark.range(3).write.parquet(str(data_dir / "left_behind"))
    handle.disable()
    receiver.start()
    try:
        handle = _enable(spark, receiver, spool)
        assert handle.flush(60)
        assert handle.disable() is True
        assert [e["eventType"] for e in app_events(receiver.events)] == ["START", "COMPLETE", "START", "COMPLETE"]
        (output,) = {e["outputs"][0]["name"] for e in query_events(receiver.events)}
        assert output == str(data_dir / "left_behind")
        assert set(receiver.copies().values()) == {1}
        assert not receiver.invalid
    finally:
        receiver.close()


@pytest.mark.once
def test_a_backend_refusing_its_first_25_requests_loses_nothing(spark: Any, data_dir: Path, tmp_path: Path) -> None:
    receiver = LineageReceiver(refuse_first=25)
    spool = tmp_path / "spool"
    try:
        handle = _enable(spark, receiver, spool)
        outputs = [str(data_dir / f"refused_{index}") for index in range(10)]
        for output in outputs:
            spark.range(3).write.parquet(output)
        handle.disable()
        result = replay(spool)
        assert result.returncode == 0, result.stdout + result.stderr
        assert receiver.requests == 25 + 2 + 4 * len(outputs)
        _assert_every_run_whole_and_once(receiver, outputs)
    finally:
        receiver.close()


@pytest.mark.once
def test_a_backend_slower_than_the_timeout_stores_each_event_at_most_twice(
    spark: Any, data_dir: Path, tmp_path: Path
) -> None:
    """4 s per request with a 3 s timeout: the first request times out (the backend keeps it all the same) and
    goes again from the spool waiting twice as long; no second layer of retries floods the backend."""
    receiver = LineageReceiver(delay_seconds=4)
    spool = tmp_path / "spool"
    try:
        handle = _enable(spark, receiver, spool, timeout=3)
        output = str(data_dir / "slowly")
        spark.range(3).write.parquet(output)
        handle.disable()  # gives up after the shutdown timeout: the rest stays spooled
        result = replay(spool)
        assert result.returncode == 0, result.stdout + result.stderr
        copies = receiver.copies()
        # The application's START and COMPLETE, the write's START, two RUNNING and COMPLETE.
        assert len(copies) == 6 and max(copies.values()) <= 2, copies
        assert sum(copies.values()) < 12
        _assert_every_run_whole_once_stored_at_most_twice(receiver, [output])
    finally:
        receiver.close()


def _assert_every_run_whole_once_stored_at_most_twice(receiver: LineageReceiver, outputs: list[str]) -> None:
    assert not receiver.invalid
    first_copies: list[dict[str, Any]] = []
    seen: set[EventKey] = set()
    for event in receiver.events:
        key = event_key(event)
        if key not in seen:
            seen.add(key)
            first_copies.append(event)
    assert [e["eventType"] for e in app_events(first_copies)] == ["START", "COMPLETE"]
    queries = [e for e in query_events(first_copies) if e["eventType"] != "RUNNING"]
    assert [e["eventType"] for e in queries] == ["START", "COMPLETE"]
    assert [e["outputs"][0]["name"] for e in queries] == outputs * 2
