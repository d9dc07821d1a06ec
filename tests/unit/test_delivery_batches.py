"""Events spooled and acknowledged in batches: a query's events go into the spool in one transaction, and what a
sender delivered is forgotten in one, with every guarantee of one event at a time kept (no Spark: the
integration tests run Spark jobs through the same paths)."""

from __future__ import annotations

import copy
import functools
import json
import logging
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attr
import pytest
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import RunEvent, RunState
from openlineage.client.facet_v2 import job_type_job, sql_job
from openlineage.client.transport.http import HttpConfig, HttpTransport
from openlineage.client.transport.transport import Transport

from spark_lineage.delivery import Delivery, FailoverSpool, prepare
from spark_lineage.delivery import sender as sender_module
from spark_lineage.delivery import spool as spool_module
from spark_lineage.delivery.failover import StoreKind
from spark_lineage.delivery.payloads import Payload, to_payload
from spark_lineage.delivery.sender import Backoff, Sender
from spark_lineage.delivery.spool import Handoff, Pending, Spool, SpooledEvent, StoredAll
from spark_lineage.redaction import Redactor
from spark_lineage.transports import leave_retries_to_the_spool
from spark_lineage.worker import ErrorLog
from tests.support import LineageReceiver, free_port, minimal_run_event, validate_event

DESTINATION = "http test"


def _event(run: int, state: RunState = RunState.COMPLETE, job_type: str = "SQL_JOB", size: int = 3000) -> RunEvent:
    """An event of about ``size`` bytes of job ``job_<run>``, as a Spark query's are (its SQL is the padding)."""
    event = minimal_run_event(run)
    facets = {
        "jobType": job_type_job.JobTypeJobFacet(processingType="BATCH", integration="SPARK", jobType=job_type),
        "sql": sql_job.SQLJobFacet(query="p" * size),
    }
    return attr.evolve(event, job=attr.evolve(event.job, facets=facets), eventType=state)


def _query(run: int, size: int = 3000) -> list[RunEvent]:
    """A query's events as the analysis thread hands them over: START, four RUNNING, COMPLETE."""
    states = [RunState.START, *[RunState.RUNNING] * 4, RunState.COMPLETE]
    return [
        attr.evolve(_event(run, state, size=size), eventTime=f"2026-12-01T10:00:0{second}.000+00:00")
        for second, state in enumerate(states)
    ]


def _payloads(events: list[RunEvent]) -> list[Payload]:
    return [to_payload(event) for event in events]


def _http(url: str, timeout: float = 2) -> HttpTransport:
    transport = HttpTransport(HttpConfig.from_dict({"url": url, "timeout": timeout}))
    leave_retries_to_the_spool(transport)
    return transport


@contextmanager
def _transactions(spool: Spool) -> Iterator[list[str]]:
    """The transactions the calling thread begins on ``spool`` within the block (a sender's thread may use the
    same connection meanwhile: its statements are not counted)."""
    mine = threading.get_ident()
    begun: list[str] = []

    def trace(statement: str) -> None:
        if statement.startswith("BEGIN") and threading.get_ident() == mine:
            begun.append(statement)

    spool._db.set_trace_callback(trace)
    try:
        yield begun
    finally:
        spool._db.set_trace_callback(None)


def _disk(spool: FailoverSpool) -> Spool:
    (disk,) = [store.spool for store in spool._stores if store.kind is StoreKind.DISK]
    return disk


def _stored(spool: Spool) -> list[tuple[str, str]]:
    """The jobs and event types the spool holds, oldest first, whoever holds them."""
    with spool._lock:
        rows = spool._db.execute("SELECT job, payload FROM events ORDER BY id").fetchall()
    return [(job, payload.split('"eventType": "')[1][:3]) for job, payload in rows]


# --- spooling a batch ---------------------------------------------------------------------------------------


def test_a_querys_events_go_into_the_spool_in_one_transaction_and_wake_the_sender_once(tmp_path: Path) -> None:
    spool = FailoverSpool(tmp_path / "spool")
    delivery = Delivery(
        OpenLineageClient(transport=_http(f"http://127.0.0.1:{free_port()}")), spool, ErrorLog(), Redactor()
    )
    told = []
    sender = delivery.sender
    wake, hand = sender.wake, sender.hand
    sender.wake = lambda: (told.append("wake"), wake())[1]  # type: ignore[method-assign]
    sender.hand = lambda *args: (told.append("hand"), hand(*args))[1]  # type: ignore[method-assign]
    try:
        with _transactions(_disk(spool)) as begun:
            delivery.submit_all(_query(1))
        assert begun == ["BEGIN IMMEDIATE"]
        assert len(told) == 1, told  # woken, or handed what the spool leased to a lane waiting for work
        assert spool.pending(delivery.destination).count == 6
    finally:
        delivery.close(0)


def test_a_runs_events_handed_over_in_batches_are_enriched_once_and_spooled_as_one_batch_would_be(
    tmp_path: Path,
) -> None:
    """A Spark Connect client's action hands over its START when it is sent and its end when it ends: through the
    run's :class:`RunBatches`, the client's enrichment (its tags) is asked of openlineage-python once, and the
    events spooled are those the two would be as one batch. Without them too: the delivery gives the later batch
    what the client added to the first (the events hold no tags of their own)."""

    def spooled(name: str, batches: list[list[RunEvent]], shared: bool) -> tuple[list[str], int]:
        client = OpenLineageClient(transport=_http(f"http://127.0.0.1:{free_port()}"))
        client.config.tags.run = {"shift": "night"}
        asked = []
        tag = client.update_event_tags_facets
        client.update_event_tags_facets = lambda event: (asked.append(event), tag(event))[1]  # type: ignore[method-assign]
        spool = FailoverSpool(tmp_path / name)
        delivery = Delivery(client, spool, ErrorLog(), Redactor())
        delivery.sender.close(0)  # nothing is sent: what is spooled stays to be read
        run = delivery.run_batches() if shared else None
        try:
            for batch in batches:
                delivery.submit_all(copy.deepcopy(batch), run)  # enrichment changes events in place
            with _disk(spool)._lock:
                rows = _disk(spool)._db.execute("SELECT payload FROM events ORDER BY id").fetchall()
            return [payload for (payload,) in rows], len(asked)
        finally:
            delivery.close(0)

    start, *_, end = _query(1)
    together, asked_together = spooled("together", [[start, end]], shared=False)
    in_batches, asked_in_batches = spooled("batches", [[start], [end]], shared=True)
    alone, asked_alone = spooled("alone", [[start], [end]], shared=False)
    assert asked_together == asked_in_batches == asked_alone == 1
    assert in_batches == together == alone
    assert [json.loads(text)["run"]["facets"]["tags"]["tags"][0]["key"] for text in in_batches] == ["shift", "shift"]


def test_a_batch_is_stored_as_one_event_at_a_time_would_be(tmp_path: Path) -> None:
    """The same ids in order, the same oldest query events dropped by a full spool (some of the batch's own
    among them), application events kept."""
    events = [_event(100, RunState.START, "APPLICATION", size=100), *_query(1), *_query(2)]
    size = len(to_payload(events[1]).json.encode())
    one_by_one = Spool(tmp_path / "one", max_bytes=size * 7)
    together = Spool(tmp_path / "all", max_bytes=size * 7)
    dropped_one = []
    for payload in _payloads(events):
        dropped_one += one_by_one.put(
            DESTINATION, payload.run_id, payload.job, payload.application, payload.json
        ).dropped.ids
    stored = together.put_all(DESTINATION, _payloads(events))
    assert stored.ids == list(range(1, len(events) + 1))
    assert stored.dropped.ids == dropped_one == [2, 3, 4, 5, 6, 7]
    assert stored.dropped.jobs == {"default/job_1"}
    assert _stored(together) == _stored(one_by_one)
    assert _stored(together)[0] == ("default/job_100", "STA")


def test_a_full_spool_counts_what_a_batch_pushed_out_lost_by_its_job(tmp_path: Path) -> None:
    size = len(to_payload(_query(1)[0]).json.encode())
    spool = FailoverSpool(tmp_path / "spool", max_bytes=size * 8)
    spool.put_all(DESTINATION, _payloads([_event(100, RunState.START, "APPLICATION", size=100), *_query(1)]))
    stored = spool.put_all(DESTINATION, _payloads(_query(2)))
    assert stored.dropped.count == 5 and stored.dropped.jobs == {"default/job_1"}
    fates = spool.fates()
    assert [(lost.job, lost.reason) for lost in fates.lost] == [
        ("default/job_1", f"the spool was full (python.spool.maxBytes={size * 8})")
    ] * 5
    assert fates.total == 13
    spool.close()


def test_a_disk_failing_in_the_middle_of_a_batch_keeps_none_of_it_and_memory_takes_it_in_order(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The disk fills up at the batch's second event (sqlite's page limit: the insert that needs a new page
    fails): the transaction keeps none of the batch, and the whole batch goes on in memory, in order, after what
    the disk holds; the application run's event is kept on the disk too (the room the rolled back transaction
    left is enough for that small one). At the end, the events that waited in memory are counted lost by their
    jobs, and the application's are spooled for a replay."""
    spool_dir = tmp_path / "spool"
    spool = FailoverSpool(spool_dir)
    port = free_port()
    delivery = Delivery(OpenLineageClient(transport=_http(f"http://127.0.0.1:{port}")), spool, ErrorLog(), Redactor())
    delivery.submit_all([_event(100, RunState.START, "APPLICATION", size=100)])
    disk = _disk(spool)
    (pages,) = disk._db.execute("PRAGMA page_count").fetchone()
    disk._db.execute(f"PRAGMA max_page_count = {pages + 2}")
    delivery.submit_all([*_query(1), _event(100, RunState.COMPLETE, "APPLICATION", size=100)])
    assert spool.path is None, "the disk is no longer written"
    assert _stored(disk) == [("default/job_100", "STA"), ("default/job_100", "COM")]
    (memory,) = [store.spool for store in spool._stores if store.kind is StoreKind.MEMORY]
    assert _stored(memory) == [("default/job_1", kind) for kind in ("STA", "RUN", "RUN", "RUN", "RUN", "COM")] + [
        ("default/job_100", "COM")
    ]
    with caplog.at_level(logging.INFO):
        assert not delivery.close(0.5)
    line = caplog.records[-1].getMessage()
    assert line.startswith(
        "spark_lineage: 8 lineage events: 0 delivered, 2 spooled for replay, 6 lost; the 2 spooled (jobs "
        "default/job_100)"
    ), line
    assert line.endswith(
        f"6 lost (jobs default/job_1): neither spooled (the spool in {spool_dir} cannot be written "
        "(OperationalError: database or disk is full)) nor delivered to http "
        f"http://127.0.0.1:{port}/api/v1/lineage (connection refused) before the process ended"
    ), line


class _Unbuildable:
    """Not an event: openlineage-python's client cannot enrich it, so it is never spooled."""

    job = minimal_run_event(5).job


def test_an_event_of_a_batch_that_cannot_be_built_is_counted_lost_and_the_others_are_spooled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    delivery = Delivery(
        OpenLineageClient(transport=_http("http://127.0.0.1:9")), FailoverSpool(None), ErrorLog(), Redactor()
    )
    events: list[Any] = [minimal_run_event(4), _Unbuildable(), minimal_run_event(6)]
    delivery.submit_all(events)
    assert delivery.spool.pending().jobs == ("default/job_4", "default/job_6")
    with caplog.at_level(logging.INFO):
        assert not delivery.close(0)
    line = caplog.records[-1].getMessage()
    assert line.startswith("spark_lineage: 3 lineage events: 0 delivered, 0 spooled for replay, 3 lost;"), line
    assert "; 1 lost (jobs default/job_5): it could not be built or spooled (" in line, line


# --- forgetting what a batch delivered ----------------------------------------------------------------------


class _FailingOnce(Transport):
    """A user's own transport that fails its ``fail_at``-th send (counting from 1) once, and keeps the others'
    events."""

    kind = "failing-once"

    def __init__(self, fail_at: int) -> None:
        self.fail_at = fail_at
        self.calls = 0
        self.events: list[tuple[str, str]] = []

    def emit(self, event: Any) -> None:
        self.calls += 1
        if self.calls == self.fail_at:
            raise ConnectionError("connection reset")
        self.events.append((f"{event.job.namespace}/{event.job.name}", event.eventType.value))


def test_a_failure_midway_forgets_what_the_batch_delivered_before_it_in_one_transaction(tmp_path: Path) -> None:
    """The batch's fourth send fails: the three before it are forgotten together, the failed one and those after
    it stay spooled and go, in order, after the pause; each event reaches the backend once."""
    spool = Spool(tmp_path)
    spool.put_all(DESTINATION, _payloads(_query(1)))
    forgotten: list[str] = []
    spool._db.set_trace_callback(
        lambda statement: forgotten.append(statement) if "DELETE FROM events" in statement else None
    )
    transport = _FailingOnce(fail_at=4)
    sender = Sender(spool, DESTINATION, transport, ErrorLog(), backoff=Backoff(first=0.1, most=0.1))
    assert sender.close(30)
    assert transport.events == [("default/job_1", kind) for kind in ("START", *["RUNNING"] * 4, "COMPLETE")]
    assert len(forgotten) == 2, forgotten
    assert ["[1, 2, 3]" in forgotten[0], "[4, 5, 6]" in forgotten[1]] == [True, True], forgotten
    assert spool.pending().count == 0


def _pausing_at_the_fourth(pause: Callable[[], object], paused: threading.Event) -> LineageReceiver:
    """A receiver that keeps the fourth event it gets, sets ``paused``, and answers once ``pause`` returned."""
    answered = []

    def before_reply() -> None:
        answered.append(1)
        if len(answered) == 4:
            paused.set()
            pause()

    return LineageReceiver(before_reply=before_reply)


def test_closing_forgets_what_the_lane_delivered_and_keeps_its_send_under_way_leased(tmp_path: Path) -> None:
    """The sender closes while the backend takes the batch's fourth event (2 s): the three it took are forgotten
    then, not left for another sender to send again; the fourth stays leased until its request is over; the
    next sender (a replay, the next enable()) sends the last two, and each event arrives once. The request's
    timeout (10 s) is far longer than the backend's pause: one that ran out first would leave the fourth
    undelivered, for the next sender to send again, as it must (at least once), and as this test must not."""
    fourth = threading.Event()
    receiver = _pausing_at_the_fourth(lambda: time.sleep(2), fourth)
    spool = Spool(tmp_path)
    try:
        spool.put_all(DESTINATION, _payloads(_query(1)))
        first = Sender(spool, DESTINATION, _http(receiver.url, timeout=10), ErrorLog())
        assert fourth.wait(30)
        assert not first.close(0)
        assert spool.pending().count == 3, "the first three were forgotten at close"
        assert Sender(spool, DESTINATION, _http(receiver.url), ErrorLog()).close(30)
        copies = receiver.copies()
    finally:
        receiver.close()
    assert len(receiver.events) == 6 and set(copies.values()) == {1}
    assert spool.pending().count == 0


class _Watched(Spool):
    """A spool that says when a lease was first asked of it (whatever it gave)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.asked = threading.Event()

    def lease(self, *args: Any, **kwargs: Any) -> list[SpooledEvent]:
        try:
            return super().lease(*args, **kwargs)
        finally:
            self.asked.set()


SHORT_LEASE_SECONDS = 0.5
"""Shorter than a delivered event may wait to be forgotten (sender.ACKNOWLEDGE_SECONDS), and than a send."""


def test_a_batch_that_outlasts_its_lease_is_not_sent_again_by_another_sender(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lane's batch takes longer than its lease (here a lease of half a second; a slow backend or a loaded
    machine does the same to a batch of 50 and a lease of 50 s): the backend holds the batch's fourth event
    until the lease has surely run out, while the first three wait, delivered, to be forgotten. Another sender
    on the same spool file (another process's, as a replay's) looks for work then, and finds none of it: the lane
    renewed its lease before it began sending, so each event arrives once."""
    monkeypatch.setattr(Sender, "lease_seconds", property(lambda self: SHORT_LEASE_SECONDS))
    others: list[Sender] = []

    def another_sender_looks_once_the_lease_ran_out() -> None:
        ran_out = time.time() + SHORT_LEASE_SECONDS  # the batch was leased before this request came
        while time.time() <= ran_out:
            time.sleep(SHORT_LEASE_SECONDS / 4)
        other_spool = _Watched(tmp_path)
        others.append(Sender(other_spool, DESTINATION, _http(receiver.url), ErrorLog()))
        other_spool.asked.wait(30)

    fourth = threading.Event()
    receiver = _pausing_at_the_fourth(another_sender_looks_once_the_lease_ran_out, fourth)
    spool = Spool(tmp_path)
    try:
        spool.put_all(DESTINATION, _payloads(_query(1)))
        sender = Sender(spool, DESTINATION, _http(receiver.url), ErrorLog())
        assert fourth.wait(30)
        assert sender.close(30)
        assert [other.close(30) for other in others] == [True]
        copies = receiver.copies()
    finally:
        receiver.close()
    assert len(copies) == 6 and set(copies.values()) == {1}
    assert [event["eventType"] for event in receiver.events] == ["START", *["RUNNING"] * 4, "COMPLETE"]
    assert spool.pending().count == 0


SENDING = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from tests.unit.test_delivery_batches import DESTINATION, _http
    from spark_lineage.delivery.sender import Sender
    from spark_lineage.delivery.spool import Spool
    from spark_lineage.worker import ErrorLog

    Sender(Spool(Path(sys.argv[1])), DESTINATION, _http(sys.argv[2]), ErrorLog()).close(120)
    """
)


def test_a_process_killed_in_the_middle_of_a_batch_loses_nothing(tmp_path: Path) -> None:
    """SIGKILL while the backend takes the batch's fourth event: the three it took were not forgotten yet, so
    the next sender sends them again (at least once: a copy, never a loss), with the rest, in order."""
    release, fourth = threading.Event(), threading.Event()
    receiver = _pausing_at_the_fourth(lambda: release.wait(30), fourth)
    spool = Spool(tmp_path)
    spool.put_all(DESTINATION, _payloads(_query(1)))
    root = Path(__file__).resolve().parents[2]
    child = subprocess.Popen([sys.executable, "-c", SENDING, str(tmp_path), receiver.url], cwd=root)
    try:
        assert fourth.wait(60)
        child.kill()
        child.wait(30)
        release.set()
        assert Sender(spool, DESTINATION, _http(receiver.url), ErrorLog()).close(30)
        kinds = [event["eventType"] for event in receiver.events]
    finally:
        release.set()
        receiver.close()
    assert kinds[:4] == ["START", "RUNNING", "RUNNING", "RUNNING"], "what the killed process sent"
    assert kinds[4:] == ["START", *["RUNNING"] * 4, "COMPLETE"], "all of it, again, in order"
    assert spool.pending().count == 0


# --- looking for work -----------------------------------------------------------------------------------------


def test_waiting_says_whether_an_event_nobody_holds_is_left(tmp_path: Path) -> None:
    """What a lane asks after taking a run, to know whether to wake another lane and to look again itself."""
    spool = Spool(tmp_path)
    assert not spool.waiting(DESTINATION)
    spool.put_all(DESTINATION, _payloads([*_query(1), *_query(2)]))
    assert spool.waiting(DESTINATION)
    first = spool.lease(DESTINATION, "lane-0", 50, 60, one_run=True)
    assert {event.job for event in first} == {"default/job_1"}
    assert spool.waiting(DESTINATION), "the second query's run"
    second = spool.lease(DESTINATION, "lane-1", 50, 60, one_run=True)
    assert not spool.waiting(DESTINATION)
    spool.release([second[-1].id], "lane-1")
    assert spool.waiting(DESTINATION)
    assert not spool.waiting(DESTINATION, exclude=[second[-1].id])
    assert not spool.waiting("another destination")


@pytest.mark.parametrize("variables", [[], ["SPARK_LINEAGE_TEST_CLUSTER"]])
def test_openlineage_pythons_environment_facet_is_looked_for_only_when_configured(
    variables: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_LINEAGE_TEST_CLUSTER", "c1")
    client = OpenLineageClient(
        transport=_http("http://127.0.0.1:9"), config={"facets": {"environment_variables": variables}}
    )
    looked = []
    original = client.add_environment_facets
    client.add_environment_facets = lambda event: (looked.append(1), original(event))[1]  # type: ignore[method-assign]
    event = prepare(client, minimal_run_event(1))
    assert event is not None
    facet = (event.run.facets or {}).get("environmentVariables")
    if variables:
        assert looked == [1]
        assert [(v.name, v.value) for v in facet.environmentVariables] == [("SPARK_LINEAGE_TEST_CLUSTER", "c1")]
    else:
        assert looked == [] and facet is None
    assert "tags" in (event.run.facets or {}), "the other steps still run"


# --- handing a query's events to a lane as they are spooled ----------------------------------------------------


def _idle(sender: Sender) -> None:
    """Wait until every lane of ``sender`` waits for work."""
    deadline = time.monotonic() + 30
    while len(sender._idle) < sender.concurrency:
        assert time.monotonic() < deadline, "the lanes never went idle"
        time.sleep(0.01)


def _sent(spool: FailoverSpool, receiver: LineageReceiver, count: int) -> None:
    """Wait until nothing waits in ``spool`` and ``receiver`` has ``count`` events (not flush(), which wakes a
    lane to look for more)."""
    deadline = time.monotonic() + 30
    while spool.pending().count or len(receiver.events) < count:
        assert time.monotonic() < deadline, "the handed batch was not sent"
        time.sleep(0.01)


def _each_once_in_order(receiver: LineageReceiver, runs: int) -> None:
    """``receiver`` got the events of :func:`_query` ``1`` to ``runs``, in order, each once, each valid."""
    for event in receiver.events:
        validate_event(event)
    assert [(event["job"]["name"], event["eventType"]) for event in receiver.events] == [
        (f"job_{run}", state) for run in range(1, runs + 1) for state in ("START", *["RUNNING"] * 4, "COMPLETE")
    ]
    assert set(receiver.copies().values()) == {1}


def _leases(monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """The ids each lease that took events takes from now on (a lane's idle poll may lease, and find nothing)."""
    leased: list[list[int]] = []
    lease = Spool.lease

    def leasing(self: Spool, *args: Any, **kwargs: Any) -> list[SpooledEvent]:
        events = lease(self, *args, **kwargs)
        if events:
            leased.append([event.id for event in events])
        return events

    monkeypatch.setattr(Spool, "lease", leasing)
    return leased


def _handed_over(spool: FailoverSpool, delivery: Delivery, run: int) -> bool:
    """Submit :func:`_query` ``run``; whether its put leased it to a lane in the same transaction."""
    statements: list[str] = []
    _disk(spool)._db.set_trace_callback(statements.append)
    delivery.submit_all(_query(run))
    _disk(spool)._db.set_trace_callback(None)
    return any(statement.startswith("INSERT OR REPLACE INTO leases") for statement in statements)


def test_a_query_spooled_while_its_lane_waits_is_leased_in_the_same_transaction_and_sent_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each query's events go to the idle lane as they are spooled, leased in the put's own transaction: the lane
    sends them without a lease of its own (nor reading them back), in order, and each arrives once."""
    receiver = LineageReceiver()
    spool = FailoverSpool(tmp_path / "spool")
    leased = _leases(monkeypatch)
    delivery = Delivery(OpenLineageClient(transport=_http(receiver.url)), spool, ErrorLog(), Redactor())
    try:
        _idle(delivery.sender)
        for run in (1, 2, 3):
            assert _handed_over(spool, delivery, run)
            _sent(spool, receiver, 6 * run)
            _idle(delivery.sender)
        assert leased == []
        assert delivery.close(30)
    finally:
        receiver.close()
    _each_once_in_order(receiver, runs=3)


def test_a_lingering_sender_sends_what_came_while_it_waited_in_one_lease_and_a_flush_or_close_ends_the_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``linger`` (a Spark Connect client's ``python.connect.sendDelayMillis``) nothing is handed to a lane as
    it is spooled: the lane woken for the first query waits, and the queries spooled meanwhile go with it, read
    back in one lease. The wait here is an hour: only the flush can end it, and then the close."""
    receiver = LineageReceiver()
    spool = FailoverSpool(tmp_path / "spool")
    leased = _leases(monkeypatch)
    delivery = Delivery(OpenLineageClient(transport=_http(receiver.url)), spool, ErrorLog(), Redactor(), linger=3600.0)
    try:
        _idle(delivery.sender)
        for run in (1, 2, 3):
            assert not _handed_over(spool, delivery, run)
        assert leased == []  # the lane woken for the first query still waits
        assert delivery.flush(30)
        assert [len(ids) for ids in leased] == [18]
        _each_once_in_order(receiver, runs=3)
        delivery.submit_all(_query(4))
        assert delivery.close(30)
    finally:
        receiver.close()
    _each_once_in_order(receiver, runs=4)
    assert [len(ids) for ids in leased] == [18, 6]


def test_events_another_delivery_of_the_process_sent_from_the_same_spool_file_count_as_delivered(
    tmp_path: Path,
) -> None:
    """Two sessions' deliveries on one spool file, one destination (a Connect client's and the in-process server's):
    the lanes of one lease whatever waits, the other's events too. The lingering one's events, sent by the other,
    are gone from the file: its account says delivered, not spooled for replay."""
    receiver = LineageReceiver()
    lingering_spool, other_spool = FailoverSpool(tmp_path / "spool"), FailoverSpool(tmp_path / "spool")
    client = OpenLineageClient(transport=_http(receiver.url))
    lingering = Delivery(client, lingering_spool, ErrorLog(), Redactor(), linger=3600.0)
    other = Delivery(client, other_spool, ErrorLog(), Redactor())
    try:
        _idle(lingering.sender)
        _idle(other.sender)
        lingering.submit_all(_query(1))
        other.submit_all(_query(2))
        _sent(other_spool, receiver, 12)
        fates = lingering_spool.fates()
        assert (fates.delivered, fates.spooled, fates.unsent) == (6, (), ())
        assert other_spool.fates().delivered == 6
        assert lingering.close(30)
        assert other.close(30)
    finally:
        receiver.close()
    _each_once_in_order(receiver, runs=2)


def _traced(statements: list[tuple[int, str]], statement: str) -> None:
    statements.append((threading.get_ident(), statement))


def test_what_a_batch_delivered_is_forgotten_in_the_next_queries_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A handed batch, once delivered, is not forgotten in a transaction of its own: the next query's put deletes
    it in its own transaction, before its rows go in (so that query is handed off in turn). One transaction a
    query in all; the last query's events are forgotten at close."""
    monkeypatch.setattr(sender_module, "ACKNOWLEDGE_SECONDS", 60.0)  # the lane never forgets on its own here
    receiver = LineageReceiver()
    spool = FailoverSpool(tmp_path / "spool")
    disk = _disk(spool)
    delivery = Delivery(OpenLineageClient(transport=_http(receiver.url)), spool, ErrorLog(), Redactor())
    try:
        _idle(delivery.sender)
        for run in (1, 2, 3):
            statements: list[tuple[int, str]] = []
            disk._db.set_trace_callback(functools.partial(_traced, statements))
            delivery.submit_all(_query(run))
            _sent(spool, receiver, 6 * run)
            _idle(delivery.sender)
            disk._db.set_trace_callback(None)
            begun = [statement for _, statement in statements if statement.startswith("BEGIN")]
            assert begun == ["BEGIN IMMEDIATE"], statements
            mine = [statement.split(" (")[0] for thread, statement in statements if thread == threading.get_ident()]
            expected = (
                ["BEGIN IMMEDIATE", "INSERT INTO events"]
                if run == 1
                else ["BEGIN IMMEDIATE", "DELETE FROM events WHERE id IN", "DELETE FROM leases WHERE id IN"]
            )
            assert [statement[: len(prefix)] for statement, prefix in zip(mine, expected)] == expected, mine
            totals = [statement for statement in mine if statement.startswith("UPDATE totals")]
            assert len(totals) == 1, "what is forgotten and what is put change the byte total in one statement"
            with disk._lock:
                (rows,) = disk._db.execute("SELECT COUNT(*) FROM events").fetchone()
                (total,) = disk._db.execute("SELECT value FROM totals WHERE name = 'bytes'").fetchone()
                (size,) = disk._db.execute("SELECT SUM(size) FROM events").fetchone()
            assert rows == 6, "the query just delivered waits to be forgotten with the next"
            assert total == size > 0
        assert delivery.close(30)
    finally:
        receiver.close()
    _each_once_in_order(receiver, runs=3)
    assert spool.fates().delivered == 18
    reopened = Spool(tmp_path / "spool")
    assert reopened.pending() == Pending(0, (), 0)
    reopened.close()


def test_events_left_to_be_forgotten_are_gone_to_this_spool_and_held_for_others_until_a_write_forgets_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``forget_later``: this spool's readers take the events as gone at once (nothing waits, a handoff takes
    the next query as if they were forgotten); another process's spool sees them leased, not waiting; a write
    that fails keeps them to be forgotten by the next one."""
    spool = Spool(tmp_path)
    monkeypatch.setattr(spool_module, "_forgettable", _unshared)
    other = Spool(tmp_path)  # another process's
    mine = Handoff("lane", 60, limit=6)
    first = spool.put_all(DESTINATION, _payloads(_query(1)), mine)
    spool.forget_later(first.ids)
    assert spool.forgetting and spool.pending().count == 0 and not spool.waiting(DESTINATION)
    assert other.pending().count == 6 and other.lease(DESTINATION, "other lane", 50, 60) == []
    second = spool.put_all(DESTINATION, _payloads(_query(2)), mine)
    assert [event.id for event in second.leased] == second.ids == [7, 8, 9, 10, 11, 12]
    assert not spool.forgetting and other.pending().count == 6 and other.held_by("lane") == second.ids

    spool.forget_later(second.ids)
    with spool._lock:
        spool._db.execute("CREATE TEMP TRIGGER refuse BEFORE INSERT ON events BEGIN SELECT RAISE(ABORT, 'no'); END")
    with pytest.raises(sqlite3.IntegrityError):
        spool.put_all(DESTINATION, _payloads(_query(3)))
    assert spool.forgetting and spool.pending().count == 0 and other.pending().count == 6
    with spool._lock:
        spool._db.execute("DROP TRIGGER refuse")
    spool.acknowledge_all(())
    assert not spool.forgetting and other.pending() == Pending(0, (), 0)
    spool.close()
    other.close()


def _unshared(file: Path) -> Any:
    """What another process's spool on the same file holds to forget: its own."""
    return spool_module._Forgettable()


def test_the_spools_of_one_process_on_one_file_forget_each_others_delivered_events(tmp_path: Path) -> None:
    """Each session's delivery opens a spool of its own on the process's spool file: what one was told to forget
    later is gone to the others' readers too, and the first write of any of them forgets it, so an application
    run's end spooled by another is handed off at once, not held behind it."""
    mine, sibling = Spool(tmp_path), Spool(tmp_path)
    first = mine.put_all(DESTINATION, _payloads(_query(1)), Handoff("lane", 60, limit=6))
    mine.forget_later(first.ids)
    assert sibling.forgetting and sibling.pending().count == 0 and not sibling.waiting(DESTINATION)
    end = _payloads([_event(100, RunState.COMPLETE, "APPLICATION", size=100)])
    handed = sibling.put_all(DESTINATION, end, Handoff("other lane", 60, limit=50))
    assert [event.job for event in handed.leased] == ["default/job_100"]
    assert not mine.forgetting and mine.held_by("lane") == []
    mine.close()
    sibling.close()


def test_a_lane_blocked_behind_another_processes_delivered_events_looks_again_soon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process's sender delivered a query's events and forgets them with its next write: until then they
    are held there, and an application run's end spooled here must wait for them. The lane that found it blocked
    looks again after ACKNOWLEDGE_SECONDS, not after the idle poll (made ten minutes long here)."""
    monkeypatch.setattr(sender_module, "ACKNOWLEDGE_SECONDS", 0.2)
    monkeypatch.setattr(sender_module, "IDLE_POLL_SECONDS", 600.0)
    monkeypatch.setattr(spool_module, "_forgettable", _unshared)
    other = Spool(tmp_path)  # another process's
    held = other.put_all(DESTINATION, _payloads(_query(1)), Handoff("other process's lane", 60, limit=6))
    other.forget_later(held.ids)
    receiver = LineageReceiver()
    spool = Spool(tmp_path)
    sender = Sender(spool, DESTINATION, _http(receiver.url), ErrorLog())
    try:
        _idle(sender)
        spool.put_all(DESTINATION, _payloads([_event(100, RunState.COMPLETE, "APPLICATION", size=100)]))
        sender.wake()
        deadline = time.monotonic() + 30
        while not sender._lanes[0].blocked:
            assert time.monotonic() < deadline, "the lane never found the end blocked"
            time.sleep(0.01)
        other.acknowledge_all(())  # the other process's next write
        while not receiver.events:
            assert time.monotonic() < deadline, "the blocked lane did not look again"
            time.sleep(0.05)
        assert [event["job"]["name"] for event in receiver.events] == ["job_100"]
        assert sender.close(30)
    finally:
        receiver.close()
        other.close()


def test_a_lane_forgets_what_it_delivered_itself_when_nothing_is_spooled_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no query after it, what a lane delivered is forgotten by the lane after ACKNOWLEDGE_SECONDS, long
    before its lease runs out: another process would then send it again."""
    monkeypatch.setattr(sender_module, "ACKNOWLEDGE_SECONDS", 0.2)
    receiver = LineageReceiver()
    spool = Spool(tmp_path)
    sender = Sender(spool, DESTINATION, _http(receiver.url), ErrorLog())
    try:
        _idle(sender)
        handoff = sender.offer()
        assert handoff is not None
        asked = time.time()
        stored = spool.put_all(DESTINATION, _payloads(_query(1)), handoff)
        sender.hand(handoff, stored.leased, asked)
        deadline = time.monotonic() + 30
        while True:
            with spool._lock:
                (rows,) = spool._db.execute("SELECT COUNT(*) FROM events").fetchone()
            if not rows:
                break
            assert time.monotonic() < deadline, "the delivered events were never forgotten"
            time.sleep(0.05)
        assert len(receiver.events) == 6 and not spool.forgetting
        assert sender.close(30)
    finally:
        receiver.close()


def test_the_spool_hands_off_only_what_a_lease_would_take_at_once(tmp_path: Path) -> None:
    """A handoff leases the new events only when a lease by its owner would take them all right after: nothing of
    the destination before them (waiting, or held by another sender), no more than its limit, and for a one-run
    lease one query run's events. Otherwise nothing is leased, and a lease finds them as ever."""
    spool = Spool(tmp_path)
    mine = Handoff("lane", 60, limit=6)
    first = spool.put_all(DESTINATION, _payloads(_query(1)), mine)
    assert [event.id for event in first.leased] == first.ids == [1, 2, 3, 4, 5, 6]
    assert [event.payload for event in first.leased] == [p.json for p in _payloads(_query(1))]
    assert spool.held_by("lane") == first.ids
    assert spool.put_all(DESTINATION, _payloads(_query(2)), mine).leased == []  # the first query's are held
    spool.acknowledge_all(first.ids)
    assert spool.put_all(DESTINATION, _payloads(_query(3)), mine).leased == []  # the second waits, nobody holds it
    assert [e.job for e in spool.lease(DESTINATION, "lane", 50, 60)] == ["default/job_2"] * 6 + ["default/job_3"] * 6

    empty = Spool(tmp_path / "limits")
    assert empty.put_all(DESTINATION, _payloads(_query(1)), Handoff("lane", 60, limit=5)).leased == []
    empty.acknowledge_all([event.id for event in empty.lease(DESTINATION, "lane", 50, 60)])
    two_runs = _payloads(_query(2))[:3] + _payloads(_query(3))[:3]
    assert empty.put_all(DESTINATION, two_runs, Handoff("lane", 60, limit=50, one_run=True)).leased == []
    empty.acknowledge_all([event.id for event in empty.lease(DESTINATION, "lane", 50, 60)])
    application = _payloads([_event(100, RunState.START, "APPLICATION", size=100)])
    assert empty.put_all(DESTINATION, application, Handoff("lane", 60, limit=50, one_run=True)).leased == []
    empty.acknowledge_all([event.id for event in empty.lease(DESTINATION, "lane", 50, 60)])
    alone = empty.put_all(DESTINATION, application + two_runs, Handoff("lane", 60, limit=50))
    assert len(alone.leased) == 7  # a lane alone takes runs and barriers together, as its lease would


def _handed_off(sender: Sender, spool: Spool) -> tuple[Handoff, StoredAll, float]:
    """A query spooled with the handoff of ``sender``'s idle lanes (all idle first), not yet handed: the handoff,
    what the spool stored, and when it was asked."""
    _idle(sender)
    handoff = sender.offer()
    assert handoff is not None
    asked = time.time()
    return handoff, spool.put_all(DESTINATION, _payloads(_query(1)), handoff), asked


def test_a_batch_handed_to_a_lane_of_a_paused_destination_goes_back_to_the_spool(tmp_path: Path) -> None:
    """The destination paused between the handoff and the lane's turn (a send failed): the lane sends nothing
    and gives the batch back, so the spool leases it again once the pause is over."""
    spool = Spool(tmp_path)
    receiver = LineageReceiver()
    sender = Sender(spool, DESTINATION, _http(receiver.url), ErrorLog(), backoff=Backoff(first=30, most=30))
    try:
        handoff, stored, asked = _handed_off(sender, spool)
        assert spool.held_by(handoff.owner) == stored.ids
        sender._backoff.failed()  # as a send of another lane would have
        sender.hand(handoff, stored.leased, asked)
        deadline = time.monotonic() + 30
        while spool.held_by(handoff.owner):
            assert time.monotonic() < deadline, "the handed batch was never given back"
            time.sleep(0.01)
        assert sender.offer() is None, "paused: no lane is offered"
        assert receiver.events == []
        assert spool.pending().count == 6
    finally:
        sender.close(0)
        receiver.close()


def test_a_batch_handed_to_a_lane_that_may_not_send_now_goes_back_and_the_sending_lane_looks_again(
    tmp_path: Path,
) -> None:
    """Another lane took the one open slot between the handoff and this lane's turn (a wake, the idle poll): the
    lane gives the batch back, and the lane that sends looks for it when it is done, rather than the batch waiting
    for a lane's idle poll (up to 5 s: a close with a shorter timeout then tried nothing)."""
    spool = Spool(tmp_path)
    receiver = LineageReceiver()
    sender = Sender(spool, DESTINATION, _http(receiver.url), ErrorLog(), concurrency=4)
    try:
        handoff, stored, asked = _handed_off(sender, spool)
        with sender._lock:
            sender._sending_lanes += 1  # as a lane woken meanwhile, sending now, would have
        sender.hand(handoff, stored.leased, asked)
        deadline = time.monotonic() + 30
        while spool.held_by(handoff.owner) or not sender._unclaimed_wake:
            # Without the wake, the sending lane, once done, found nothing that told it the batch waits.
            assert time.monotonic() < deadline, (spool.held_by(handoff.owner), sender._unclaimed_wake)
            time.sleep(0.01)
        _idle(sender)
        assert sender._unclaimed_wake, "taken by a lane that may not send"
        with sender._lock:
            sender._sending_lanes -= 1
        assert sender.flush(30)
        assert [event["job"]["name"] for event in receiver.events] == ["job_1"] * 6
    finally:
        sender.close(0)
        receiver.close()


def test_a_failover_spool_hands_off_from_its_one_store_only(tmp_path: Path) -> None:
    """The disk spool hands a batch off (with the ids the sender gives back); once the disk is full and events go
    on in memory after what it holds, none is: the order between the stores is the lease's to keep. A spool in
    memory alone hands off as the disk did."""
    handoff = Handoff("lane", 60, limit=50)
    spool = FailoverSpool(tmp_path / "spool")
    stored = spool.put_all(DESTINATION, _payloads(_query(1)), handoff)
    assert [event.id for event in stored.leased] == stored.ids
    disk = _disk(spool)
    (pages,) = disk._db.execute("PRAGMA page_count").fetchone()
    disk._db.execute(f"PRAGMA max_page_count = {pages + 2}")
    # Another destination: nothing of its own on the disk, which is full for its events
    stored = spool.put_all("other test", _payloads(_query(2)), handoff)
    assert (spool.path, stored.leased) == (None, [])
    assert spool.pending("other test").count == 6

    in_memory = FailoverSpool(None)
    stored = in_memory.put_all(DESTINATION, _payloads(_query(3)), handoff)
    assert [event.id for event in stored.leased] == stored.ids
    in_memory.release(stored.ids, "lane")
    assert [event.id for event in in_memory.lease(DESTINATION, "lane", 50, 60)] == stored.ids


def test_an_application_end_spooled_while_a_lane_sends_goes_as_soon_as_that_batch_is_delivered(
    tmp_path: Path,
) -> None:
    """With several lanes: a query's events go to one lane, and the application run's end is spooled while that
    lane still sends them. The lane woken for the end finds it must wait (it goes after every earlier event),
    so the lane that delivers the batch looks again and sends it: the flush ends well before a lane's idle poll
    (5 s) would have found it."""
    receiver = LineageReceiver(delay_seconds=0.1)
    spool = FailoverSpool(tmp_path / "spool")
    delivery = Delivery(OpenLineageClient(transport=_http(receiver.url)), spool, ErrorLog(), Redactor(), concurrency=4)
    try:
        delivery.submit_all([_event(100, RunState.START, "APPLICATION", size=100)])
        assert delivery.flush(30)
        _idle(delivery.sender)
        delivery.submit_all(_query(1))
        delivery.submit_all([_event(100, RunState.COMPLETE, "APPLICATION", size=100)])
        assert delivery.flush(3)
    finally:
        delivery.close(30)
        receiver.close()
    assert [(event["job"]["name"], event["eventType"]) for event in receiver.events] == [
        ("job_100", "START"),
        *[("job_1", state) for state in ("START", *["RUNNING"] * 4, "COMPLETE")],
        ("job_100", "COMPLETE"),
    ]


@pytest.mark.parametrize("failing", ["offer", "hand"])
def test_a_handoff_that_fails_loses_nothing_and_never_reaches_the_caller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    """``submit_all`` never raises: when offering a lane the events, or handing them over, fails, they are
    spooled all the same, the failure is said once, and a lane sends them."""
    receiver = LineageReceiver()
    spool = FailoverSpool(tmp_path / "spool")
    errors = ErrorLog()

    def broken(self: Sender, *args: Any) -> None:
        raise RuntimeError(f"{failing} broke")

    monkeypatch.setattr(Sender, failing, broken)
    delivery = Delivery(OpenLineageClient(transport=_http(receiver.url)), spool, errors, Redactor())
    try:
        _idle(delivery.sender)
        delivery.submit_all(_query(1))
        assert delivery.close(30)
    finally:
        receiver.close()
    assert errors.counts == {"handing events to a sender's lane": 1}
    assert [event["eventType"] for event in receiver.events] == ["START", *["RUNNING"] * 4, "COMPLETE"]


def test_a_held_delivery_spools_every_event_and_waits_for_no_send(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Refused transport settings (``Held``): each event is spooled under a destination the spool keeps no
    settings for, nothing is sent, flushing and closing return at once, and the start and end lines say how to
    deliver them."""
    from openlineage.client.transport.noop import NoopConfig, NoopTransport

    from spark_lineage.delivery import HELD_DESTINATION, Held

    spool = FailoverSpool(tmp_path / "spool")
    held = Held("spark.openlineage.transport.type='htp' is not a known transport.", "--conf a=b")
    with caplog.at_level(logging.INFO, logger="spark_lineage"):
        delivery = Delivery(
            OpenLineageClient(transport=NoopTransport(NoopConfig())), spool, ErrorLog(), Redactor(), held=held
        )
        delivery.submit_all(_query(1))
        assert delivery.flush(None) is False  # at once: nothing will ever be sent
        assert spool.pending().count == 6
        assert spool.destinations() == {HELD_DESTINATION: None}
        assert delivery.close(None) is False
    replay = f"spark-lineage replay --spool {tmp_path / 'spool'} --conf a=b"
    assert [record.getMessage() for record in caplog.records] == [
        "spark_lineage: delivery is off: spark.openlineage.transport.type='htp' is not a known transport. Lineage is "
        f"still captured, and spooled in {spool.path}: nothing is lost. Once the settings are fixed, deliver it "
        f"with: {replay}",
        "spark_lineage: 6 lineage events: 0 delivered, 6 spooled for replay, 0 lost; the 6 spooled (jobs "
        f"default/job_1) were not delivered to {HELD_DESTINATION} and wait in {tmp_path / 'spool'}: deliver them "
        f"with: {replay}",
    ]


def test_closing_waits_for_no_refusing_backend_when_every_event_is_on_disk(tmp_path: Path) -> None:
    """No timeout at all: a close that waited for the refusing backend (or its backoff) would never return."""
    spool = FailoverSpool(tmp_path / "spool")
    delivery = Delivery(
        OpenLineageClient(transport=_http(f"http://127.0.0.1:{free_port()}")), spool, ErrorLog(), Redactor()
    )
    delivery.submit_all(_query(1))
    assert delivery.close(None) is False
    assert Spool(tmp_path / "spool").pending().count == 6  # all there for a replay
