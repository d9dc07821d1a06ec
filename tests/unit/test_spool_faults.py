"""Faults of the spool's own disk, with real files: bytes written into them, a file cut short, a directory that
cannot hold a spool, and a real full disk (a 1 MiB tmpfs; mounting one needs root, as CI has). The job never
sees them, every event is delivered, spooled or counted as lost, and ``spark-lineage replay --salvage`` delivers
what a damaged file still holds (no Spark: tests/integration/test_spool_faults.py runs Spark jobs through them)."""

from __future__ import annotations

import json
import logging
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import attr
import pytest
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import RunEvent, RunState
from openlineage.client.facet_v2 import job_type_job, sql_job
from openlineage.client.transport.http import HttpConfig, HttpTransport

from spark_lineage.delivery import Delivery, FailoverSpool
from spark_lineage.delivery.payloads import to_payload
from spark_lineage.delivery.spool import SPOOL_FILE, Spool
from spark_lineage.redaction import Redactor
from spark_lineage.transports import leave_retries_to_the_spool
from spark_lineage.worker import ErrorLog
from tests.support import HeldPort, LineageReceiver, minimal_run_event, small_disk, spool_disk

EVENTS = 90
PAGE = 4096


def _padded(run: int, job_type: str = "SQL_JOB", state: RunState = RunState.COMPLETE, size: int = 3000) -> RunEvent:
    """An event of about ``size`` bytes, as a Spark query's are (its job's SQL is the padding)."""
    event = minimal_run_event(run)
    facets = {
        "jobType": job_type_job.JobTypeJobFacet(processingType="BATCH", integration="SPARK", jobType=job_type),
        "sql": sql_job.SQLJobFacet(query="p" * size),
    }
    return attr.evolve(event, job=attr.evolve(event.job, facets=facets), eventType=state)


def _spool_of(directory: Path, count: int = EVENTS) -> Path:
    """A spool holding ``count`` events of about 3 KB, one per page, closed as a process leaves it."""
    spool = Spool(directory)
    for run in range(count):
        payload = to_payload(_padded(run))
        spool.put("http test", payload.run_id, payload.job, False, payload.json)
    spool.remember_destination("http test", json.dumps({"type": "http", "url": "http://127.0.0.1:9"}))
    spool.close()
    return directory / SPOOL_FILE


def _replay(*arguments: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "spark_lineage.cli", "replay", "--timeout", str(timeout), *arguments],
        capture_output=True,
        text=True,
        timeout=timeout + 60,
        check=False,
    )


def _shell_recovers(scratch: Path) -> bool:
    """Whether sqlite's shell here has a ``.recover`` that works (Debian's lacks the page table it reads)."""
    shell = shutil.which("sqlite3")
    if shell is None:
        return False
    _spool_of(scratch / "sound", 1)
    recovered = subprocess.run(
        [shell, str(scratch / "sound" / SPOOL_FILE), ".recover"], capture_output=True, check=False
    )
    return recovered.returncode == 0 and b"sql error" not in recovered.stderr.lower()


def _runs(receiver: LineageReceiver) -> list[int]:
    """The run of each event received, sorted: each event here is a run of its own, and with several requests in
    flight (``python.delivery.concurrency``) different runs arrive in any order. A copy shows twice."""
    return sorted(int(event["run"]["runId"][-12:]) for event in receiver.events)


def _salvaged(aside: Path) -> tuple[LineageReceiver, subprocess.CompletedProcess[str]]:
    """``spark-lineage replay --salvage ASIDE`` to a receiver of its own, which it returns with what it said."""
    receiver = LineageReceiver()
    try:
        result = _replay("--salvage", str(aside), "--conf", f"spark.openlineage.transport.url={receiver.url}")
    finally:
        receiver.close()
    assert result.returncode == 0, result.stdout + result.stderr
    return receiver, result


def _damaged(spool_dir: Path, caplog: pytest.LogCaptureFixture) -> Path:
    """Open the spool as the next job does: the damaged file is set aside, said once, and a fresh one starts."""
    with caplog.at_level(logging.WARNING):
        spool = FailoverSpool(spool_dir)
        again = FailoverSpool(spool_dir)  # a second session of the same process: said once, not again
    (aside,) = spool.set_aside
    assert again.set_aside == []
    assert spool.path == spool_dir, "the job goes on with a fresh spool on disk"
    assert spool.pending().count == 0
    spool.close()
    again.close()
    warnings = [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]
    assert warnings == [
        f"spark_lineage: the lineage spool in {spool_dir} was damaged (SpoolDamagedError: database disk image is "
        f"malformed): moved it to {aside} and started a new one; deliver what can still be read from it with: "
        f"spark-lineage replay --salvage {aside}"
    ]
    assert aside.name.startswith(f"{SPOOL_FILE}.damaged-") and aside.is_file()
    return aside


def test_a_malformed_spool_is_set_aside_said_once_and_salvaged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    file = _spool_of(tmp_path / "spool")
    with file.open("r+b") as damaged:  # 100 bytes over the header of a page that holds one event
        damaged.seek(20 * PAGE)
        damaged.write(bytes(range(100)))
    aside = _damaged(tmp_path / "spool", caplog)

    receiver, result = _salvaged(aside)
    target = Path(f"{aside}.salvaged")
    # The one event on the damaged page is lost; which one that is depends on how sqlite laid the rows out.
    (missing,) = set(range(EVENTS)) - set(_runs(receiver))
    assert _runs(receiver) == [run for run in range(EVENTS) if run != missing], "each readable event once"
    readers = "sqlite .recover and row by row" if _shell_recovers(tmp_path) else "row by row"
    assert result.stdout.splitlines() == [
        f"spark-lineage replay: recovered 89 events from {aside} (1 unreadable; read by {readers}) into {target}",
        f"spark-lineage replay: 89 of 89 events delivered from {target}",
    ]
    assert result.stderr == ""
    # Salvaged once: the damaged file is not read again, and nothing is sent twice.
    again = _replay("--salvage", str(aside), "--conf", f"spark.openlineage.transport.url={receiver.url}")
    assert again.stdout.splitlines() == [
        f"spark-lineage replay: {aside} was salvaged before; its events wait in {target}",
        f"spark-lineage replay: 0 of 0 events delivered from {target}",
    ]


def test_a_truncated_spool_gives_back_the_events_before_the_cut(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    file = _spool_of(tmp_path / "spool")
    data = file.read_bytes()
    file.write_bytes(data[: len(data) // 2])
    aside = _damaged(tmp_path / "spool", caplog)
    receiver, result = _salvaged(aside)
    first = result.stdout.splitlines()[0]
    recovered = len(receiver.events)
    assert 0 < recovered < EVENTS
    assert first.startswith(
        f"spark-lineage replay: recovered {recovered} events from {aside} ({EVENTS - recovered} unreadable; read by "
    ), first
    assert _runs(receiver) == list(range(recovered)), "the events before the cut, each once"


def test_replay_of_a_damaged_spool_sets_it_aside_and_salvages_it_without_a_traceback(tmp_path: Path) -> None:
    spool_dir = tmp_path / "spool"
    file = _spool_of(spool_dir, 10)
    with file.open("r+b") as damaged:
        damaged.seek(0)
        damaged.write(b"this is no longer a database header")
    receiver = LineageReceiver()
    try:
        result = _replay("--spool", str(spool_dir), "--conf", f"spark.openlineage.transport.url={receiver.url}")
    finally:
        receiver.close()
    (aside,) = spool_dir.glob(f"{SPOOL_FILE}.damaged-*[0-9Z]")
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith(f"spark-lineage replay: the spool at {spool_dir} is damaged ("), result.stderr
    assert result.stderr.endswith(f"): moved it to {aside}\n")
    # The header is gone, so nothing can be read; said, and no event made up.
    assert result.stdout.splitlines()[0].startswith(f"spark-lineage replay: recovered 0 events from {aside} (")
    assert receiver.events == []


def test_after_a_clean_close_the_main_file_holds_everything_and_a_garbled_log_costs_nothing(tmp_path: Path) -> None:
    spool_dir = tmp_path / "spool"
    down = HeldPort()
    url = f"http://127.0.0.1:{down.port}"
    transport = HttpTransport(HttpConfig.from_dict({"url": url, "timeout": 1}))
    leave_retries_to_the_spool(transport)
    delivery = Delivery(OpenLineageClient(transport=transport), FailoverSpool(spool_dir), ErrorLog(), Redactor())
    for run in range(EVENTS):
        delivery.submit(_padded(run))
    assert not delivery.close(0.5)
    wal = spool_dir / f"{SPOOL_FILE}-wal"
    assert not wal.exists() or wal.stat().st_size == 0, "checkpointed into the main file at close"
    with sqlite3.connect(f"file:{spool_dir / SPOOL_FILE}?immutable=1", uri=True) as main_file_only:
        assert main_file_only.execute("SELECT COUNT(*) FROM events").fetchone() == (EVENTS,)
    wal.write_bytes(bytes(range(100)))  # a log garbled after the process left

    receiver = LineageReceiver(port=down.release())
    try:
        result = _replay("--spool", str(spool_dir))
    finally:
        receiver.close()
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == f"spark-lineage replay: {EVENTS} of {EVENTS} events delivered from {spool_dir}\n"
    assert _runs(receiver) == list(range(EVENTS))


def test_a_spool_directory_that_cannot_be_made_keeps_events_in_memory_and_delivers_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    receiver = LineageReceiver()
    try:
        spool = FailoverSpool(blocker / "spool")
        delivery = Delivery(OpenLineageClient(transport=_http(receiver.url)), spool, ErrorLog(), Redactor())
        for run in range(5):
            delivery.submit(minimal_run_event(run))
        with caplog.at_level(logging.INFO):
            assert delivery.close(30)
    finally:
        receiver.close()
    assert _runs(receiver) == list(range(5))
    lines = [record.getMessage() for record in caplog.records if record.name == "spark_lineage"]
    assert lines[-1] == "spark_lineage: 5 lineage events: 5 delivered, 0 spooled for replay, 0 lost"
    assert not blocker.is_dir()


def _http(url: str) -> HttpTransport:
    transport = HttpTransport(HttpConfig.from_dict({"url": url, "timeout": 2}))
    leave_retries_to_the_spool(transport)
    return transport


def _busy_job(delivery: Delivery, queries: int = 52) -> int:
    """What a job of ``queries`` writes spools: its application's START, four events per query of about 4 KB,
    its application's COMPLETE. Returns how many events that is."""
    delivery.submit(_padded(999, "APPLICATION", RunState.START, size=100))
    for run in range(queries):
        for second, state in enumerate((RunState.START, RunState.RUNNING, RunState.RUNNING, RunState.COMPLETE)):
            event = _padded(run, state=state, size=4000)
            delivery.submit(attr.evolve(event, eventTime=f"2026-12-01T10:00:0{second}.000+00:00"))
    delivery.submit(_padded(999, "APPLICATION", RunState.COMPLETE, size=100))
    return 2 + 4 * queries


def test_a_full_disk_with_a_healthy_backend_delivers_every_event_and_leaves_nothing_spooled(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    receiver = LineageReceiver()
    try:
        with small_disk(tmp_path / "disk", spool_disk(768)) as disk:
            delivery = Delivery(
                OpenLineageClient(transport=_http(receiver.url)), FailoverSpool(disk / "spool"), ErrorLog(), Redactor()
            )
            with caplog.at_level(logging.INFO):
                total = _busy_job(delivery)
                assert delivery.close(60)
            with sqlite3.connect(disk / "spool" / SPOOL_FILE) as left:
                assert left.execute("SELECT COUNT(*) FROM events").fetchone() == (0,)
    finally:
        receiver.close()
    assert len(receiver.events) == total
    assert set(receiver.copies().values()) == {1}
    lines = [record.getMessage() for record in caplog.records if record.levelno >= logging.INFO]
    assert lines[-1] == f"spark_lineage: {total} lineage events: {total} delivered, 0 spooled for replay, 0 lost"
    assert lines[0].startswith(f"spark_lineage: the spool in {disk / 'spool'} cannot be written (OperationalError: ")


def test_a_full_disk_with_a_dead_backend_counts_every_event_and_keeps_the_application_ending(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    down = HeldPort()
    port = down.port
    with small_disk(tmp_path / "disk", spool_disk(768)) as disk:
        spool_dir = disk / "spool"
        transport = _http(f"http://127.0.0.1:{port}")
        delivery = Delivery(OpenLineageClient(transport=transport), FailoverSpool(spool_dir), ErrorLog(), Redactor())
        with caplog.at_level(logging.INFO):
            total = _busy_job(delivery)
            assert not delivery.close(1)
        with sqlite3.connect(spool_dir / SPOOL_FILE) as left:
            spooled, applications = left.execute("SELECT COUNT(*), SUM(application) FROM events").fetchone()
            jobs = {job for (job,) in left.execute("SELECT DISTINCT job FROM events")}
        assert applications == 2, "the application's START and, in the room held back, its COMPLETE"
        assert 2 < spooled < total
        line = [record.getMessage() for record in caplog.records][-1]
        lost = total - spooled
        assert line.startswith(
            f"spark_lineage: {total} lineage events: 0 delivered, {spooled} spooled for replay, {lost} lost; the "
            f"{spooled} spooled (jobs default/job_0"
        ), line
        replay_hint = f"wait in {spool_dir}: deliver them with: spark-lineage replay --spool {spool_dir}"
        assert f"{replay_hint}; {lost} lost (jobs" in line
        assert line.endswith(
            f"neither spooled (the spool in {spool_dir} cannot be written (OperationalError: database or disk is "
            f"full)) nor delivered to http http://127.0.0.1:{port}/api/v1/lineage (connection refused) before the "
            "process ended"
        ), line
        receiver = LineageReceiver(port=down.release())
        try:
            result = _replay("--spool", str(spool_dir))
        finally:
            receiver.close()
    assert result.stdout == f"spark-lineage replay: {spooled} of {spooled} events delivered from {spool_dir}\n", (
        result.stderr
    )
    delivered = [(e["job"]["name"], e["eventType"]) for e in receiver.events]
    assert delivered[0] == ("job_999", "START")
    assert delivered[-1] == ("job_999", "COMPLETE"), "the application's ending was kept"
    assert {name for name, _ in delivered} == {job.split("/")[1] for job in jobs}
    assert not receiver.invalid


class _BrokenRedactor(Redactor):
    """Redaction that fails: an event that cannot be made safe is never spooled, and must still be counted."""

    def needs_redaction(self, text: str) -> bool:
        raise RuntimeError("redaction broke")


def test_a_lease_is_renewed_where_it_is_kept_on_disk_or_in_memory_for_a_disk_too_full_for_leases(
    tmp_path: Path,
) -> None:
    """A sender renews what it holds through the process's spool, with the ids it was given: on the disk while the
    disk takes writes, in memory once it is too full to write leases on; what another holder has is not renewed."""
    spool = FailoverSpool(tmp_path)
    spool.put_all("http test", [to_payload(_padded(run)) for run in range(4)])
    on_disk = [event.id for event in spool.lease("http test", "a", 2, 60)]
    assert spool.renew(on_disk, "a", time.time() + 60) == set(on_disk)
    assert spool.renew(on_disk, "b", time.time() + 60) == set()
    (disk,) = spool._stores
    spool._failed(disk, sqlite3.OperationalError("database or disk is full"), "written")  # as a write says it
    in_memory = [event.id for event in spool.lease("http test", "a", 4, 60)]
    assert len(in_memory) == 2 and not set(in_memory) & set(on_disk)
    assert spool.renew([*on_disk, *in_memory], "b", time.time() + 60) == set()
    assert spool.renew([*on_disk, *in_memory], "a", time.time() + 60) == set(in_memory), (
        "the disk's own leases can no longer be written"
    )
    spool.close()


def test_an_event_that_cannot_be_spooled_is_counted_lost_by_its_job(caplog: pytest.LogCaptureFixture) -> None:
    client = OpenLineageClient(transport=_http("http://127.0.0.1:9"))
    delivery = Delivery(client, FailoverSpool(None), ErrorLog(), _BrokenRedactor())
    delivery.submit(minimal_run_event(7))
    with caplog.at_level(logging.INFO):
        assert not delivery.close(0)
    assert [record.getMessage() for record in caplog.records][-1] == (
        "spark_lineage: 1 lineage event: 0 delivered, 0 spooled for replay, 1 lost; 1 lost (jobs default/job_7): it "
        "could not be built or spooled (RuntimeError: redaction broke)"
    )
