"""The durable spool and the sender, with a real HTTP backend on loopback and real processes sharing a spool
(no Spark: tests/integration/test_delivery.py runs the same against Spark jobs)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
from openlineage.client.facet_v2 import job_type_job
from openlineage.client.transport.http import HttpConfig, HttpTransport

from spark_lineage.delivery import spool as spool_module
from spark_lineage.delivery.payloads import from_payload, to_payload
from spark_lineage.delivery.sender import Backoff, Sender
from spark_lineage.delivery.spool import LEASE_HOLDERS, SPOOL_FILE, Spool, lease_owner
from spark_lineage.transports import leave_retries_to_the_spool
from spark_lineage.worker import ErrorLog
from tests.support import HeldPort, LineageReceiver, free_port

PRODUCER = "https://github.com/spark-lineage/spark-lineage"


def _event(run: int, state: RunState = RunState.START, job_type: str = "SQL_JOB") -> RunEvent:
    return RunEvent(
        eventType=state,
        eventTime="2026-12-01T10:00:00.000+00:00",
        run=Run(runId=f"0195f5b6-0000-7000-8000-{run:012d}"),
        job=Job(
            namespace="default",
            name=f"job_{run}",
            facets={
                "jobType": job_type_job.JobTypeJobFacet(
                    processingType="BATCH", integration="SPARK", jobType=job_type, producer=PRODUCER
                )
            },
        ),
        producer=PRODUCER,
    )


def _put(spool: Spool, event: RunEvent, destination: str = "http test") -> None:
    payload = to_payload(event)
    spool.put(destination, payload.run_id, payload.job, payload.application, payload.json)


def _http(url: str, timeout: float = 5.0) -> HttpTransport:
    transport = HttpTransport(HttpConfig.from_dict({"url": url, "timeout": timeout}))
    leave_retries_to_the_spool(transport)
    return transport


def test_payloads_round_trip_exactly() -> None:
    event = _event(1, RunState.COMPLETE, "APPLICATION")
    payload = to_payload(event)
    assert (payload.run_id, payload.job, payload.application) == (event.run.runId, "default/job_1", True)
    assert to_payload(from_payload(payload.json)) == payload


def test_lease_gives_oldest_first_and_never_the_same_event_twice(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    for run in range(5):
        _put(spool, _event(run))
    first = spool.lease("http test", "a", 3, 60)
    second = spool.lease("http test", "b", 10, 60)
    assert [e.job for e in first] == ["default/job_0", "default/job_1", "default/job_2"]
    assert [e.job for e in second] == ["default/job_3", "default/job_4"]
    spool.release([first[0].id], "a", attempted=[first[0].id])
    spool.release([second[0].id], "not b")  # not its holder: stays b's
    spool.acknowledge(first[1].id)
    again = spool.lease("http test", "c", 10, 60)
    assert [(e.job, e.attempts) for e in again] == [("default/job_0", 1)]
    assert spool.pending().count == 4


def test_a_run_is_sent_in_order_even_across_senders(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    _put(spool, _event(1, RunState.START))
    _put(spool, _event(1, RunState.COMPLETE))
    first = spool.lease("http test", "a", 1, 60)
    # The run's COMPLETE waits while its START is in someone else's hands.
    assert spool.lease("http test", "b", 10, 60) == []
    spool.acknowledge(first[0].id)
    assert [json.loads(e.payload)["eventType"] for e in spool.lease("http test", "b", 10, 60)] == ["COMPLETE"]


def test_a_holder_renews_its_lease_only_on_what_nobody_took_from_it(tmp_path: Path) -> None:
    """What a sender renews before a send its lease would not outlast: an event whose lease ran out is still its
    holder's until another sender leases it; one that was taken, or forgotten, is not renewed, nor said held."""
    spool = Spool(tmp_path)
    for run in range(4):
        _put(spool, _event(run))
    mine = [e.id for e in spool.lease("http test", "a", 4, -1)]  # a lease that has run out already
    assert [e.id for e in spool.lease("http test", "b", 1, 60)] == mine[:1], "another sender took the first"
    spool.acknowledge(mine[1])
    assert spool.renew(mine, "a", time.time() + 60) == set(mine[2:])
    assert spool.lease("http test", "c", 10, 60) == [], "b's, and a's again"
    assert spool.renew(mine, "b", time.time() + 60) == set(mine[:1])
    assert spool.renew([], "a", time.time() + 60) == set()


LEASE_HOLDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from spark_lineage.delivery.spool import Spool, lease_owner

    spool = Spool(Path(sys.argv[1]))
    print(len(spool.lease("http test", lease_owner("holder"), 10, 600)), flush=True)
    sys.stdin.readline()
    """
)


def test_a_spool_from_before_the_leases_table_gets_it_and_leasing_reads_only_the_leases(tmp_path: Path) -> None:
    """A spool file written when leases were columns of the events opens, gains the leases table, and its events
    are leased and forgotten. Each lease first looks for holders whose process has ended: that reads the leases
    index only, however many events wait (``benchmarks/spool.py`` measures it)."""
    spool = Spool(tmp_path)
    _put(spool, _event(1))
    spool.close()
    with sqlite3.connect(tmp_path / SPOOL_FILE) as db:  # the layout before: no leases table, stale lease columns
        db.execute("DROP TABLE leases")
        db.execute("UPDATE events SET leased_by = 'gone:1:0', leased_until = 1.0")

    spool = Spool(tmp_path)
    leased = spool.lease("http test", lease_owner("a"), 10, 60)
    assert [e.job for e in leased] == ["default/job_1"]
    assert spool.held_by(lease_owner("a")) == [leased[0].id]
    spool.acknowledge_all([leased[0].id])
    assert (spool.pending().count, spool.held_by(lease_owner("a"))) == (0, [])
    with sqlite3.connect(tmp_path / SPOOL_FILE) as db:
        plan = db.execute(f"EXPLAIN QUERY PLAN {LEASE_HOLDERS}", (0,)).fetchall()
        assert db.execute("SELECT COUNT(*) FROM leases").fetchone() == (0,)
    assert any("USING COVERING INDEX leases_by_holder" in row[-1] for row in plan), plan


def test_a_lease_lasts_as_long_as_the_process_holding_it(tmp_path: Path) -> None:
    """Leased for ten minutes by another process: nobody else sends the event while that process lives, and a
    replay takes it at once after that process has ended, without waiting for the lease to run out."""
    spool = Spool(tmp_path)
    _put(spool, _event(1))
    root = Path(__file__).resolve().parents[2]
    holder = subprocess.Popen(
        [sys.executable, "-c", LEASE_HOLDER, str(tmp_path)], cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert holder.stdout is not None and holder.stdin is not None
    assert holder.stdout.readline() == b"1\n"
    assert spool.lease("http test", lease_owner("replay"), 10, 60) == []
    holder.communicate(b"\n", timeout=60)
    assert [e.job for e in spool.lease("http test", lease_owner("replay"), 10, 60)] == ["default/job_1"]


def test_an_event_in_the_middle_of_its_send_is_not_sent_again_by_the_next_sender(tmp_path: Path) -> None:
    """The sender closes (disable()) while the backend is still taking an event: the next sender (a replay, the
    next enable()) waits for that request instead of sending a second copy."""
    spool = Spool(tmp_path)
    receiver = LineageReceiver(delay_seconds=2)
    try:
        _put(spool, _event(1))
        _put(spool, _event(2))
        first = Sender(spool, "http test", _http(receiver.url, timeout=5), ErrorLog())
        assert not first.close(0.5)
        assert receiver.requests == 1
        assert Sender(spool, "http test", _http(receiver.url, timeout=5), ErrorLog()).close(30)
        assert {key[:2]: count for key, count in receiver.copies().items()} == {
            ("0195f5b6-0000-7000-8000-000000000001", "START"): 1,
            ("0195f5b6-0000-7000-8000-000000000002", "START"): 1,
        }
    finally:
        receiver.close()


@pytest.mark.parametrize("returning", [True, False], ids=["sqlite-with-returning", "sqlite-before-3.35"])
def test_a_batch_gets_its_rows_ids_and_the_byte_total_follows_puts_and_acknowledgements(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, returning: bool
) -> None:
    monkeypatch.setattr(spool_module, "_RETURNING", returning)
    spool = Spool(tmp_path)
    _put(spool, _event(0))
    payloads = [to_payload(_event(run)) for run in (1, 2, 3)]
    stored = spool.put_all("http test", payloads)
    spool.acknowledge_all([stored.ids[0]])
    with sqlite3.connect(tmp_path / SPOOL_FILE) as db:
        rows = db.execute("SELECT id, job, size FROM events ORDER BY id").fetchall()
        (total,) = db.execute("SELECT value FROM totals WHERE name = 'bytes'").fetchone()
    assert [(event_id, job) for event_id, job, _ in rows[1:]] == list(
        zip(stored.ids[1:], ["default/job_2", "default/job_3"])
    )
    assert stored.ids == [stored.ids[0], stored.ids[0] + 1, stored.ids[0] + 2] and stored.ids[0] > rows[0][0]
    assert (
        total
        == sum(size for _, _, size in rows)
        == sum(len(p.json.encode()) for p in [to_payload(_event(0)), *payloads[1:]])
    )


def test_a_full_spool_drops_the_oldest_query_events_and_keeps_application_events(tmp_path: Path) -> None:
    size = len(to_payload(_event(0)).json.encode())
    spool = Spool(tmp_path, max_bytes=size * 4 + size // 2)
    dropped_jobs: list[str] = []
    for event in [_event(100, RunState.START, "APPLICATION"), *map(_event, range(5))]:
        payload = to_payload(event)
        stored = spool.put("http test", payload.run_id, payload.job, payload.application, payload.json)
        dropped_jobs += sorted(stored.dropped.jobs)
    assert dropped_jobs == ["default/job_0", "default/job_1"]
    payload = to_payload(_event(100, RunState.COMPLETE, "APPLICATION"))
    dropped = spool.put("http test", payload.run_id, payload.job, payload.application, payload.json).dropped
    assert (dropped.count, dropped.jobs) == (1, {"default/job_2"})
    left = spool.pending()
    assert left.jobs == ("default/job_100", "default/job_3", "default/job_4")
    assert left.bytes <= spool.max_bytes


def test_backoff_is_per_backend_and_grows_to_its_limit() -> None:
    now = [0.0]
    backoff = Backoff(first=0.5, most=4.0, clock=lambda: now[0])
    waits = []
    for _ in range(6):
        backoff.failed()
        waits.append(backoff.wait_seconds())
    assert waits == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    backoff.succeeded()
    assert backoff.wait_seconds() == 0.0


def test_a_dead_backend_costs_one_failure_and_loses_nothing(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    down = HeldPort()
    port = down.port
    for run in range(20):
        _put(spool, _event(run))
    errors = ErrorLog()
    sender = Sender(spool, "http test", _http(f"http://127.0.0.1:{port}"), errors)
    assert not sender.close(1.5)
    assert spool.pending().count == 20
    # Found dead once: a few attempts in total, not one per event, and none of them lost an event.
    attempts = sum(e.attempts for e in spool.lease("http test", "x", 100, 0.01))
    assert 1 <= attempts <= 3
    receiver = LineageReceiver(port=down.release())
    try:
        assert Sender(spool, "http test", _http(receiver.url), errors).close(30)
        assert [e["job"]["name"] for e in receiver.events] == [f"job_{run}" for run in range(20)]
        assert set(receiver.copies().values()) == {1}
        assert not receiver.invalid
    finally:
        receiver.close()
    assert spool.pending().count == 0


def test_a_refusing_backend_gets_everything_once_it_accepts(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    receiver = LineageReceiver(refuse_first=4)
    try:
        for run in range(10):
            _put(spool, _event(run))
        sender = Sender(spool, "http test", _http(receiver.url), ErrorLog(), backoff=Backoff(first=0.1, most=0.5))
        assert sender.close(30)
        assert receiver.requests == 14
        assert [e["job"]["name"] for e in receiver.events] == [f"job_{run}" for run in range(10)]
    finally:
        receiver.close()


def test_a_backend_slower_than_the_timeout_gets_at_most_two_copies(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    receiver = LineageReceiver(delay_seconds=1.4)
    try:
        for run in range(3):
            _put(spool, _event(run))
        sender = Sender(spool, "http test", _http(receiver.url, timeout=1.0), ErrorLog(), backoff=Backoff(0.1, 0.2))
        assert sender.close(60)
        # The first send timed out (the backend kept it all the same) and went again waiting twice as long;
        # the sender waits that long for the events after it: one copy each.
        assert {key[:2]: count for key, count in receiver.copies().items()} == {
            ("0195f5b6-0000-7000-8000-000000000000", "START"): 2,
            ("0195f5b6-0000-7000-8000-000000000001", "START"): 1,
            ("0195f5b6-0000-7000-8000-000000000002", "START"): 1,
        }
    finally:
        receiver.close()


WRITER = textwrap.dedent(
    """
    import sys
    from tests.unit.test_spool import _event, _put
    from spark_lineage.delivery.spool import Spool
    from pathlib import Path

    spool = Spool(Path(sys.argv[1]))
    offset = int(sys.argv[2])
    for run in range(offset, offset + 300):
        _put(spool, _event(run))
    """
)

SENDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from tests.unit.test_spool import _http
    from spark_lineage.delivery.sender import Sender
    from spark_lineage.delivery.spool import Spool
    from spark_lineage.worker import ErrorLog

    spool = Spool(Path(sys.argv[1]))
    sender = Sender(spool, "http test", _http(sys.argv[2]), ErrorLog())
    sys.exit(0 if sender.close(120) else 1)
    """
)


@pytest.mark.once
def test_processes_share_one_spool_without_corruption_or_loss(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), str(offset)], cwd=root) for offset in (0, 1000)
    ]
    assert [writer.wait(120) for writer in writers] == [0, 0]
    receiver = LineageReceiver()
    try:
        senders = [
            subprocess.Popen([sys.executable, "-c", SENDER, str(tmp_path), receiver.url], cwd=root) for _ in range(2)
        ]
        assert [sender.wait(180) for sender in senders] == [0, 0]
        copies = receiver.copies()
        assert len(copies) == 600 and set(copies.values()) == {1}
        expected = {f"0195f5b6-0000-7000-8000-{run:012d}" for run in [*range(300), *range(1000, 1300)]}
        assert {key[0] for key in copies} == expected
    finally:
        receiver.close()
    with sqlite3.connect(tmp_path / SPOOL_FILE) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert db.execute("SELECT COUNT(*) FROM events").fetchone() == (0,)


def test_an_in_memory_spool_works_the_same() -> None:
    spool = Spool(None)
    _put(spool, _event(1))
    assert spool.location == "memory" and spool.pending().count == 1


@pytest.mark.parametrize("seconds", [0.0])
def test_flush_with_no_time_left_says_what_is_true(tmp_path: Path, seconds: float) -> None:
    spool = Spool(tmp_path)
    _put(spool, _event(1))
    sender = Sender(spool, "http test", _http(f"http://127.0.0.1:{free_port()}"), ErrorLog())
    started = time.monotonic()
    assert sender.flush(seconds) is False
    assert time.monotonic() - started < 5
    sender.close(0)


def test_replay_puts_back_an_api_key_the_spool_never_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from spark_lineage.delivery.replay import replay

    receiver = LineageReceiver()
    try:
        spool = Spool(tmp_path)
        destination = f"http {receiver.url}/api/v1/lineage"
        spool.remember_destination(
            destination, json.dumps({"type": "http", "url": receiver.url, "auth": {"type": "api_key"}})
        )
        _put(spool, _event(1), destination)
        monkeypatch.delenv("OPENLINEAGE_API_KEY", raising=False)
        result = replay(spool, None, 10)
        assert (result.sent, result.left) == (0, 1)
        assert result.problems == (
            f"{destination} takes an api key, which the spool does not keep: set OPENLINEAGE_API_KEY, or pass "
            "--conf spark.openlineage.transport.* settings",
        )
        monkeypatch.setenv("OPENLINEAGE_API_KEY", "replayer-key")
        result = replay(spool, None, 10)
        assert (result.sent, result.left, result.problems) == (1, 0, ())
        assert receiver.authorizations == ["Bearer replayer-key"]
    finally:
        receiver.close()
