"""Several requests in flight per backend (``python.delivery.concurrency``), each run's events still in order:
the spool's lease rule, the sender's lanes against a slow backend on loopback, and ``spark-lineage replay``'s
progress and early stop (no Spark)."""

from __future__ import annotations

import json
import math
import os
import pty
import select
import sqlite3
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import attr
import pytest
from openlineage.client.event_v2 import RunEvent, RunState
from openlineage.client.transport.file import FileConfig, FileTransport

from spark_lineage.delivery.sender import Backoff, Sender, lane_transports
from spark_lineage.delivery.spool import NEXT_BARRIER, SPOOL_FILE, Spool
from spark_lineage.worker import ErrorLog
from tests.support import REPO_ROOT, LineageReceiver
from tests.unit.test_spool import _event as spool_event
from tests.unit.test_spool import _http, _put

APPLICATION = 999
TYPES = [RunState.START, RunState.RUNNING, RunState.RUNNING, RunState.RUNNING, RunState.COMPLETE]


def _event(run: int, state: RunState, second: int = 0) -> RunEvent:
    """Event ``second`` of run ``run`` (its time tells it from the run's other events of the same type)."""
    event = spool_event(run, state, "APPLICATION" if run == APPLICATION else "SQL_JOB")
    return attr.evolve(event, eventTime=f"2026-12-01T10:{second // 60:02d}:{second % 60:02d}.000+00:00")


def _busy_job(runs: int) -> list[tuple[int, RunState]]:
    """A busy job's events as it spools them: the application's START, then ``runs`` query runs of START,
    three RUNNING and COMPLETE each, a new one starting every tick and each lasting ten ticks (so about ten
    are under way at once, their events interleaved), then the application's COMPLETE."""
    timeline = sorted((run + 2.5 * step, run, state) for run in range(runs) for step, state in enumerate(TYPES))
    return [
        (APPLICATION, RunState.START),
        *[(run, state) for _, run, state in timeline],
        (APPLICATION, RunState.COMPLETE),
    ]


def _types(spool_rows: list[Any]) -> list[tuple[str, str]]:
    return [(event.job, json.loads(event.payload)["eventType"]) for event in spool_rows]


# --- the lease rule ------------------------------------------------------------------------------------------


def test_an_earlier_event_nobody_holds_blocks_its_runs_later_events_for_every_owner(tmp_path: Path) -> None:
    """A run's later event goes only in the batch that holds every earlier one not yet sent: held by anyone (its
    own owner too), or by nobody after a failed send (then it goes first, in whichever batch takes the run)."""
    spool = Spool(tmp_path)
    for state in (RunState.START, RunState.RUNNING, RunState.COMPLETE):
        _put(spool, _event(1, state))
    _put(spool, _event(2, RunState.START))
    (start,) = spool.lease("http test", "a", 1, 60)
    # Neither a's next batch nor anyone else's holds a later event of run 1 while a sends its START.
    assert _types(spool.lease("http test", "a", 10, 60)) == [("default/job_2", "START")]
    assert spool.lease("http test", "b", 10, 60) == []
    # a's send failed: its START goes back, unsent, and goes first again, whoever takes the run.
    spool.release([start.id], "a", attempted=[start.id])
    (again,) = spool.lease("http test", "b", 1, 60)
    assert (again.id, again.attempts) == (start.id, 1)
    assert spool.lease("http test", "c", 10, 60, one_run=True) == []
    spool.release([again.id], "b")
    assert _types(spool.lease("http test", "c", 10, 60, one_run=True)) == [
        ("default/job_1", "START"),
        ("default/job_1", "RUNNING"),
        ("default/job_1", "COMPLETE"),
    ]


def test_one_run_batches_split_interleaved_runs_between_owners(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    for run, state in [(1, RunState.START), (2, RunState.START), (1, RunState.COMPLETE), (2, RunState.COMPLETE)]:
        _put(spool, _event(run, state))
    assert _types(spool.lease("http test", "a", 10, 60, one_run=True)) == [
        ("default/job_1", "START"),
        ("default/job_1", "COMPLETE"),
    ]
    assert _types(spool.lease("http test", "b", 10, 60, one_run=True)) == [
        ("default/job_2", "START"),
        ("default/job_2", "COMPLETE"),
    ]


def test_application_events_are_barriers(tmp_path: Path) -> None:
    """The application's START goes before everything after it and its COMPLETE after everything before it,
    however many senders take events at once."""
    spool = Spool(tmp_path)
    for run, state in [
        (APPLICATION, RunState.START),
        (1, RunState.START),
        (2, RunState.START),
        (1, RunState.COMPLETE),
        (APPLICATION, RunState.COMPLETE),
        (3, RunState.START),
    ]:
        _put(spool, _event(run, state))
    (app_start,) = spool.lease("http test", "a", 1, 60)
    assert _types([app_start]) == [("default/job_999", "START")]
    assert spool.lease("http test", "b", 10, 60) == []
    assert spool.lease("http test", "b", 10, 60, one_run=True) == []
    spool.acknowledge(app_start.id)
    run_1 = spool.lease("http test", "b", 10, 60, one_run=True)
    assert _types(run_1) == [("default/job_1", "START"), ("default/job_1", "COMPLETE")]
    (run_2,) = spool.lease("http test", "c", 10, 60)  # not the application's COMPLETE: runs 1 and 2 are out
    assert _types([run_2]) == [("default/job_2", "START")]
    for event in run_1:
        spool.acknowledge(event.id)
    assert spool.lease("http test", "d", 10, 60) == []
    spool.acknowledge(run_2.id)
    # Once everything before it is sent, the COMPLETE goes, and what came after it only in its batch or later.
    assert _types(spool.lease("http test", "d", 10, 60)) == [
        ("default/job_999", "COMPLETE"),
        ("default/job_3", "START"),
    ]


def test_a_batch_holds_a_barrier_when_it_holds_everything_before_it(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    for run, state in [
        (APPLICATION, RunState.START),
        (1, RunState.START),
        (1, RunState.COMPLETE),
        (APPLICATION, RunState.COMPLETE),
    ]:
        _put(spool, _event(run, state))
    assert _types(spool.lease("http test", "a", 2, 60)) == [("default/job_999", "START"), ("default/job_1", "START")]
    spool.release_owned("a")
    assert _types(spool.lease("http test", "a", 10, 60)) == [
        ("default/job_999", "START"),
        ("default/job_1", "START"),
        ("default/job_1", "COMPLETE"),
        ("default/job_999", "COMPLETE"),
    ]


def test_a_spool_without_the_barriers_index_gets_it_and_leasing_finds_barriers_through_it(tmp_path: Path) -> None:
    """Each lease looks for the next application-run event: with the index, that reads those events only, however
    many wait."""
    spool = Spool(tmp_path)
    _put(spool, _event(1, RunState.START))
    spool.close()
    with sqlite3.connect(tmp_path / SPOOL_FILE) as db:  # a spool written by a version without the index
        db.execute("DROP INDEX events_barriers")
    spool = Spool(tmp_path)
    assert _types(spool.lease("http test", "a", 10, 60)) == [("default/job_1", "START")]
    with sqlite3.connect(tmp_path / SPOOL_FILE) as db:
        plan = db.execute(f"EXPLAIN QUERY PLAN {NEXT_BARRIER}", ("http test", 0)).fetchall()
    assert any("USING INDEX events_barriers" in row[-1] for row in plan), plan


# --- lanes -------------------------------------------------------------------------------------------------


def test_http_lanes_are_copies_with_their_own_session_and_other_transports_get_one_lane(tmp_path: Path) -> None:
    transport = _http("http://127.0.0.1:9", timeout=3)
    _ = transport.session  # made already: no lane may use it
    lanes = lane_transports(transport, 4)
    assert len(lanes) == 4 and transport not in lanes
    assert all(lane._session is None and lane.config is transport.config for lane in lanes)
    lanes[0].timeout = 24
    assert [lane.timeout for lane in lanes] == [24, 3, 3, 3] and transport.timeout == 3
    sessions = {id(lane.session) for lane in lanes}  # each made on first use
    assert len(sessions) == 4 and id(transport.session) not in sessions
    assert lane_transports(transport, 1) == [transport]
    file_transport = FileTransport(FileConfig(log_file_path=str(tmp_path / "events.jsonl")))
    assert lane_transports(file_transport, 4) == [file_transport]


@pytest.mark.once
def test_a_backend_taking_1_s_per_request_gets_80_events_in_run_order_within_the_concurrency_bound(
    tmp_path: Path,
) -> None:
    """16 runs of 5 events (80, interleaved as a busy job spools them) and the application's START and COMPLETE,
    to a backend that takes 1 s per request. One at a time that is 82 s; with concurrency 8 (8 rather than the
    default 4, to keep this test short) the runs go 8 at a time, each run's events one after the other:
    ceil(16 / 8) = 2 waves of 5 events of 1 s, plus the application's two events alone, about 12 s."""
    seconds, concurrency, runs = 1.0, 8, 16
    receiver = LineageReceiver(delay_seconds=seconds)
    spool = Spool(tmp_path)
    try:
        started = time.monotonic()
        sender = Sender(spool, "http test", _http(receiver.url, timeout=10), ErrorLog(), concurrency=concurrency)
        for second, (run, state) in enumerate(_busy_job(runs)):
            _put(spool, _event(run, state, second))
            sender.wake()
        bound = math.ceil(runs / concurrency) * len(TYPES) * seconds + 2 * seconds + 10
        assert sender.close(bound), f"{spool.pending().count} events left after {bound} s"
        took = time.monotonic() - started
    finally:
        receiver.close()
    assert not receiver.invalid
    assert len(receiver.events) == runs * len(TYPES) + 2
    assert set(receiver.copies().values()) == {1}
    assert receiver.most_in_flight == concurrency
    assert [receiver.events[0]["eventType"], receiver.events[-1]["eventType"]] == ["START", "COMPLETE"]
    assert receiver.events[0]["job"]["name"] == receiver.events[-1]["job"]["name"] == f"job_{APPLICATION}"
    arrivals: dict[str, list[str]] = defaultdict(list)
    for event in receiver.events:
        arrivals[event["job"]["name"]].append(event["eventType"])
        if event["eventType"] == "RUNNING":
            arrivals[event["job"]["name"]][-1] += " " + event["eventTime"]
    for run in range(runs):
        # START, the three RUNNING in the order spooled (their times), COMPLETE
        types = [text.split(" ")[0] for text in arrivals[f"job_{run}"]]
        assert types == [state.value for state in TYPES], (run, arrivals[f"job_{run}"])
        running = arrivals[f"job_{run}"][1:4]
        assert running == sorted(running), (run, running)
    assert took < bound


def test_a_backend_failing_under_four_requests_is_reported_once_and_paused_once(tmp_path: Path) -> None:
    """The first request goes alone and succeeds; the four sent next at once all get HTTP 503. That is one
    failure of the backend: reported once, one pause, then one request alone (it succeeds) before the rest."""
    four_at_once = threading.Barrier(4, action=lambda: setattr(receiver, "status", 503), timeout=30)
    answered = []
    lock = threading.Lock()

    def before_reply() -> None:
        with lock:
            answered.append(len(answered) + 1)
            number = answered[-1]
        if 2 <= number <= 5:
            four_at_once.wait()
        elif number == 6:
            receiver.status = 200

    receiver = LineageReceiver(before_reply=before_reply)
    spool = Spool(tmp_path)
    try:
        for run in range(8):
            _put(spool, _event(run, RunState.START))
        errors = ErrorLog()
        sender = Sender(
            spool, "http test", _http(receiver.url), errors, backoff=Backoff(first=0.1, most=0.2), concurrency=4
        )
        assert sender.close(60)
    finally:
        receiver.close()
    assert errors.counts == {"delivering to http test: HTTP 503": 1}
    assert receiver.requests == 8 + 4
    assert {key[0] for key in receiver.copies()} == {f"0195f5b6-0000-7000-8000-{run:012d}" for run in range(8)}


def test_events_in_the_middle_of_their_sends_are_not_sent_again_by_the_next_sender(tmp_path: Path) -> None:
    """The sender closes while four requests are under way: each of those events stays leased until its request
    ends, and the next sender (a replay, the next enable()) sends only the others."""
    receiver = LineageReceiver(delay_seconds=2)
    spool = Spool(tmp_path)
    try:
        for run in range(8):
            _put(spool, _event(run, RunState.START))
        first = Sender(spool, "http test", _http(receiver.url, timeout=5), ErrorLog(), concurrency=4)
        deadline = time.monotonic() + 30
        while receiver.in_flight < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert receiver.in_flight == 4
        assert not first.close(0)
        assert Sender(spool, "http test", _http(receiver.url, timeout=5), ErrorLog(), concurrency=4).close(60)
        copies = receiver.copies()
    finally:
        receiver.close()
    assert len(copies) == 8 and set(copies.values()) == {1}


def test_lineage_receiver_answers_requests_in_parallel() -> None:
    """The receiver the throughput tests count on takes requests on threads of its own: four requests of 1 s
    each, sent at once, are all being answered at the same time."""
    receiver = LineageReceiver(delay_seconds=1.0)
    try:
        transports = lane_transports(_http(receiver.url), 4)
        threads = [
            threading.Thread(target=transport.emit, args=(_event(run, RunState.START),))
            for run, transport in enumerate(transports)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert receiver.most_in_flight == 4 and len(receiver.events) == 4
    finally:
        receiver.close()


# --- replay --------------------------------------------------------------------------------------------------


def _spooled(directory: Path, destination: str, settings: dict[str, Any]) -> Spool:
    spool = Spool(directory)
    spool.remember_destination(destination, json.dumps(settings))
    for run in range(3):
        _put(spool, _event(run, RunState.START), destination)
    return spool


def _replay(spool: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "spark_lineage.cli", "replay", "--spool", str(spool), "--timeout", "30", *args],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
        cwd=REPO_ROOT,
        env=env,
    )


@pytest.mark.parametrize(
    ("status", "hint"),
    [
        (
            401,
            "Unauthorized: check the credentials (OPENLINEAGE_API_KEY, or --conf spark.openlineage.transport.auth.*)",
        ),
        (404, "Not Found: check the url and endpoint (--conf spark.openlineage.transport.url, .endpoint)"),
    ],
)
def test_replay_stops_at_once_on_an_answer_that_will_not_heal_naming_the_url_it_tried(
    tmp_path: Path, status: int, hint: str
) -> None:
    """The events were spooled for another URL; replay sends to the one --conf names, with a secret urlParams
    value: one request, then one line naming the URL tried (its query's values left out) and the status."""
    receiver = LineageReceiver(status=status)
    spool_dir = tmp_path / "spool"
    try:
        _spooled(spool_dir, "http http://old-host:5000/api/v1/lineage", {"type": "http", "url": "http://old-host:5000"})
        result = _replay(
            spool_dir,
            "--conf",
            f"spark.openlineage.transport.url={receiver.url}",
            "--conf",
            "spark.openlineage.transport.type=http",
            "--conf",
            "spark.openlineage.transport.urlParams.code=Planted-Secret-77",
        )
        assert receiver.requests == 1
    finally:
        receiver.close()
    assert result.returncode == 1
    assert result.stderr == (
        f"spark-lineage replay: stopped: {receiver.url}/api/v1/lineage?code=*********(redacted) answered HTTP "
        f"{status} {hint}\n"
    )
    assert result.stdout == (
        f"spark-lineage replay: 0 of 3 events delivered from {spool_dir}; 3 left (jobs default/job_0, "
        "default/job_1, default/job_2), kept in the spool\n"
    )
    assert Spool(spool_dir).pending().count == 3


def _replay_on_a_terminal(spool: Path) -> tuple[int, str]:
    """``spark-lineage replay`` with stderr on a pseudo-terminal (stdout a pipe): its exit status, and what the
    terminal showed."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "spark_lineage.cli", "replay", "--spool", str(spool), "--timeout", "60"],
        stdout=subprocess.PIPE,
        stderr=terminal,
        cwd=REPO_ROOT,
    )
    os.close(terminal)
    shown = b""
    while True:
        ready, _, _ = select.select([controller], [], [], 90)
        if not ready:
            break
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # the terminal's other end closed: the process ended
            break
        if not chunk:
            break
        shown += chunk
    os.close(controller)
    process.communicate(timeout=30)
    return process.returncode, shown.decode()


def test_replay_shows_its_progress_on_a_terminal_only(tmp_path: Path) -> None:
    receiver = LineageReceiver(delay_seconds=0.3)
    spool_dir = tmp_path / "spool"
    try:
        destination = f"http {receiver.url}/api/v1/lineage"
        settings = {"type": "http", "url": receiver.url}
        spool = _spooled(spool_dir, destination, settings)
        for run in range(3, 12):
            _put(spool, _event(run, RunState.START), destination)
        status, shown = _replay_on_a_terminal(spool_dir)
        assert status == 0
        updates = [part for part in shown.split("\r") if part.startswith("spark-lineage replay:")]
        assert updates, shown
        # 12 events of 0.3 s, 4 at a time: about a second, a progress line every quarter of one
        for update in updates:
            done, left, rate = update.removesuffix("\x1b[K").split(": ", 1)[1].split(", ")
            assert done.endswith(" delivered") and left.endswith(" left") and rate.endswith(" events/s")
        assert updates[-1].startswith("spark-lineage replay: 12 delivered, 0 left, ")
        assert shown.endswith("\r\x1b[K")  # the progress is cleared at the end
        _spooled(spool_dir, destination, settings)
        result = _replay(spool_dir)
        assert (result.returncode, result.stderr) == (0, "")
        assert result.stdout == f"spark-lineage replay: 3 of 3 events delivered from {spool_dir}\n"
    finally:
        receiver.close()
