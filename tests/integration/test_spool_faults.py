"""Faults of the spool's disk under real Spark jobs: a ``spark-submit`` turned on by confs alone finds a damaged
spool, or a full disk (a 1 MiB tmpfs of its own; mounting one needs root, as CI has), with its backend healthy or
dead. The job exits 0 every time, and its last line says what became of each event; a spool directory that
cannot be made costs the session nothing either (tests/unit/test_spool_faults.py holds the spool itself to the
same faults, without Spark)."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import spark_lineage
from spark_lineage.delivery.payloads import to_payload
from spark_lineage.delivery.spool import SPOOL_FILE, Spool
from tests.integration.test_spark_submit import messages, spark_submit
from tests.support import (
    HeldPort,
    LineageReceiver,
    app_events,
    minimal_run_event,
    replay,
    small_disk,
    spool_disk,
)

pytestmark = [pytest.mark.spark, pytest.mark.once]

WRITES = 20
JOB = f"""
import sys
from pyspark.sql import SparkSession

spark = SparkSession.builder.appName("Faulty Disk").getOrCreate()
for index in range({WRITES}):
    spark.range(3).write.parquet(f"{{sys.argv[2]}}/part_{{index}}")
"""
EVENTS = 2 + 4 * WRITES
"""The application's START and COMPLETE, and each write's START, two RUNNING and COMPLETE."""


def _confs(url: str, spool: Path) -> dict[str, str]:
    return {
        "spark.openlineage.transport.type": "http",
        "spark.openlineage.transport.url": url,
        "spark.openlineage.transport.timeoutInMillis": "2000",
        "spark.openlineage.python.spool.dir": str(spool),
        "spark.openlineage.python.shutdownTimeoutSeconds": "5",
    }


def _last_line(result: Any) -> str:
    return messages(result)[-1]


def test_a_job_finding_its_spool_damaged_runs_delivers_and_leaves_it_to_salvage(
    tmp_path: Path, receiver: LineageReceiver
) -> None:
    spool = tmp_path / "spool"
    planted = Spool(spool)
    for run in range(10):
        payload = to_payload(minimal_run_event(run))
        planted.put(f"http {receiver.url}/api/v1/lineage", payload.run_id, payload.job, False, payload.json)
    planted.close()
    with (spool / SPOOL_FILE).open("r+b") as damaged:
        damaged.write(b"no longer a sqlite header")

    result, _, _ = spark_submit(tmp_path, JOB, _confs(receiver.url, spool))

    (aside,) = spool.glob(f"{SPOOL_FILE}.damaged-*[0-9Z]")
    said = [line for line in messages(result) if "damaged" in line]
    assert said == [
        f"spark_lineage: the lineage spool in {spool} was damaged (SpoolDamagedError: file is not a database): "
        f"moved it to {aside} and started a new one; deliver what can still be read from it with: "
        f"spark-lineage replay --salvage {aside}"
    ]
    assert (
        _last_line(result)
        == f"spark_lineage: {EVENTS} lineage events: {EVENTS} delivered, 0 spooled for replay, 0 lost"
    )
    assert len(receiver.events) == EVENTS
    assert [e["eventType"] for e in app_events(receiver.events)] == ["START", "COMPLETE"]
    assert set(receiver.copies().values()) == {1}


def test_a_job_on_a_full_disk_with_a_healthy_backend_delivers_every_event(tmp_path: Path) -> None:
    """A backend that answers, in 0.2 s a request: the job's events pile up in the spool until its disk is full,
    and every one is delivered all the same, none left spooled."""
    receiver = LineageReceiver(delay_seconds=0.2)
    try:
        with small_disk(tmp_path / "disk", spool_disk(768)) as disk:
            (disk / "filler").write_bytes(bytes(704 * 1024))  # what else lives on that disk
            confs = {**_confs(receiver.url, disk / "spool"), "spark.openlineage.python.shutdownTimeoutSeconds": "60"}
            result, _, _ = spark_submit(tmp_path, JOB, confs)
            with sqlite3.connect(disk / "spool" / SPOOL_FILE) as spool:
                left = spool.execute("SELECT job, application FROM events").fetchall()
            assert left == [], "\n".join(messages(result))
    finally:
        receiver.close()
    said = "\n".join(messages(result))
    twice = {key: count for key, count in receiver.copies().items() if count > 1}
    assert (len(receiver.events), twice) == (EVENTS, {}), said
    assert [e["eventType"] for e in app_events(receiver.events)] == ["START", "COMPLETE"]
    assert (
        _last_line(result)
        == f"spark_lineage: {EVENTS} lineage events: {EVENTS} delivered, 0 spooled for replay, 0 lost"
    )
    full = (
        f"spark_lineage: the spool in {disk / 'spool'} cannot be written (OperationalError: database or disk is full)"
    )
    assert any(line.startswith(full) for line in messages(result)), said
    assert not receiver.invalid


def test_a_job_on_a_full_disk_with_a_dead_backend_counts_every_event_and_keeps_its_ending(tmp_path: Path) -> None:
    down = HeldPort()  # refuses until the receiver below starts on it
    port = down.port
    with small_disk(tmp_path / "disk", spool_disk(768)) as disk:
        (disk / "filler").write_bytes(bytes(384 * 1024))
        spool = disk / "spool"
        result, _, _ = spark_submit(tmp_path, JOB, _confs(f"http://127.0.0.1:{port}", spool))
        with sqlite3.connect(spool / SPOOL_FILE) as left:
            spooled, applications = left.execute("SELECT COUNT(*), SUM(application) FROM events").fetchone()
        assert applications == 2, "the application's START, and its COMPLETE in the room held back for it"
        line = _last_line(result)
        counts = re.match(
            r"spark_lineage: (\d+) lineage events: 0 delivered, (\d+) spooled for replay, (\d+) lost; ", line
        )
        assert counts is not None, line
        assert (int(counts[1]), int(counts[2]), int(counts[3])) == (EVENTS, spooled, EVENTS - spooled)
        assert 2 < spooled < EVENTS
        assert line.endswith(
            f"neither spooled (the spool in {spool} cannot be written (OperationalError: database or disk is full)) "
            f"nor delivered to http http://127.0.0.1:{port}/api/v1/lineage (connection refused) before the process "
            "ended"
        ), line
        (disk / "filler").unlink()  # the user makes room, then replays
        receiver = LineageReceiver(port=down.release())
        try:
            replayed = replay(spool)
        finally:
            receiver.close()
    assert replayed.stdout == f"spark-lineage replay: {spooled} of {spooled} events delivered from {spool}\n"
    start, end = app_events(receiver.events)
    assert (start["eventType"], end["eventType"]) == ("START", "COMPLETE")
    assert receiver.events[0] is start and receiver.events[-1] is end
    assert not receiver.invalid


def test_a_spool_directory_that_cannot_be_made_costs_the_session_nothing(
    spark: Any, tmp_path: Path, receiver: LineageReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    handle = spark_lineage.enable(
        spark,
        appName="no spool",
        transport={"type": "http", "url": receiver.url},
        python={"spool": {"dir": str(blocker / "spool")}},
    )
    spark.range(3).write.parquet(str(tmp_path / "out"))
    handle.disable(timeout=30)
    assert [e["eventType"] for e in app_events(receiver.events)] == ["START", "COMPLETE"]
    assert len(receiver.events) == 6
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and r.name == "spark_lineage"]
    assert warnings == [
        f"spark_lineage: the spool cannot be opened in {blocker / 'spool'} (NotADirectoryError: [Errno 20] Not a "
        f"directory: '{blocker / 'spool'}'): events go straight to the backend from memory instead (at most "
        "python.spool.maxBytes=268435456 bytes), and those it has not taken when the process ends are lost. Name a "
        "writable directory with spark.openlineage.python.spool.dir"
    ]
