"""The bounded workers and once-per-kind error logging."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from spark_lineage.worker import BoundedWorker, ErrorLog


def test_items_are_processed_in_order_and_flushed() -> None:
    seen: list[int] = []
    worker: BoundedWorker[int] = BoundedWorker("test", seen.append, 100, ErrorLog())
    for item in range(50):
        assert worker.submit(item)
    assert worker.flush(10)
    assert seen == list(range(50))
    assert worker.close(10)


def test_full_queue_refuses_without_blocking_and_counts() -> None:
    gate = threading.Event()
    worker: BoundedWorker[int] = BoundedWorker("test", lambda _: gate.wait(10), 2, ErrorLog())
    results = [worker.submit(i) for i in range(6)]
    # one item in process, two waiting: the rest are refused at once
    assert results.count(False) >= 3
    assert worker.dropped == results.count(False)
    assert not worker.flush(0.05)
    gate.set()
    assert worker.flush(10)


def test_every_item_never_processed_is_told_with_why() -> None:
    gate = threading.Event()
    seen: list[int] = []
    told: list[tuple[int, str]] = []
    worker: BoundedWorker[int] = BoundedWorker(
        "test",
        lambda item: (gate.wait(10), seen.append(item)),
        2,
        ErrorLog(),
        on_drop=lambda *told_: told.append(told_),
    )
    worker.submit(0)
    while worker.backlog:  # the first item is taken, and waits on the gate
        threading.Event().wait(0.01)
    assert [worker.submit(item) for item in (1, 2, 3)] == [True, True, False]
    assert told == [(3, "the test queue was full (2 items)")]
    assert not worker.close(0.1)  # 1 and 2 still wait: never processed
    gate.set()
    expired = "it was still waiting for analysis when shutdown's time was up"
    assert told[1:] == [(1, expired), (2, expired)]
    assert worker.dropped == 3
    threading.Event().wait(0.2)
    assert seen == [0]


def test_a_failing_item_does_not_stop_the_worker_and_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[int] = []

    def process(item: int) -> None:
        if item % 2:
            raise ValueError(f"odd {item}")
        seen.append(item)

    with caplog.at_level(logging.DEBUG, logger="spark_lineage"):
        errors = ErrorLog()
        worker: BoundedWorker[int] = BoundedWorker("test", process, 100, errors)
        for item in range(10):
            worker.submit(item)
        assert worker.flush(10)
    assert seen == [0, 2, 4, 6, 8]
    assert errors.counts == {"test item": 5}
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "odd 1" in warnings[0].getMessage()


Told = list[tuple[int, str]]


def _recording_worker(gate: threading.Event, told: Told) -> tuple[BoundedWorker[int], Told]:
    """A worker whose first item waits on ``gate``; each item is recorded with the thread that processed it."""
    seen: list[tuple[int, str]] = []

    def process(item: int) -> None:
        if item == 0:
            gate.wait(10)
        seen.append((item, threading.current_thread().name))

    worker: BoundedWorker[int] = BoundedWorker("test", process, 10, ErrorLog(), on_drop=lambda *t: told.append(t))
    worker.submit(0)
    while worker.backlog:  # the worker's thread has the first item
        threading.Event().wait(0.01)
    for item in (1, 2, 3):
        assert worker.submit(item)
    return worker, seen


def test_close_finishes_what_waits_on_the_closing_thread_once_the_workers_item_is_done() -> None:
    # The worker's thread yields the CPU to the job: on a busy driver it would take its time over what waits.
    gate, told = threading.Event(), Told()
    worker, seen = _recording_worker(gate, told)
    threading.Timer(0.2, gate.set).start()
    assert worker.close(10)
    me = threading.current_thread().name
    assert seen == [(0, "test"), (1, me), (2, me), (3, me)]
    assert not worker.submit(4), "a closed worker takes nothing more"
    assert told == [(4, "it came after the test worker had stopped")]
    assert worker.dropped == 1


def test_close_without_taking_over_leaves_every_item_to_the_workers_thread() -> None:
    gate, told = threading.Event(), Told()
    worker, seen = _recording_worker(gate, told)
    threading.Timer(0.2, gate.set).start()
    assert worker.close(10, take_over=False)
    assert seen == [(0, "test"), (1, "test"), (2, "test"), (3, "test")]
    assert told == []


def test_a_timer_runs_after_each_item_and_again_when_it_said_with_no_item() -> None:
    """The timer runs on the worker's thread after each item; the seconds it returns bring it back with no item
    (``None``: not before the next item); a timer that fails is said once and the worker goes on."""
    calls: list[str] = []
    due = threading.Event()
    plan = iter([0.05, None, "fail", None])
    errors = ErrorLog()

    def timer() -> float | None:
        calls.append(threading.current_thread().name)
        step = next(plan, None)
        if step == "fail":
            raise RuntimeError("timer broke")
        if len(calls) == 2:
            due.set()
        return step  # type: ignore[return-value]

    seen: list[int] = []
    worker: BoundedWorker[int] = BoundedWorker("test", seen.append, 10, errors, timer=timer)
    worker.submit(1)
    assert due.wait(10)  # the second call came with no item: 0.05 s after the first
    assert worker.flush(10)
    assert (seen, calls) == ([1], ["test", "test"])
    worker.submit(2)  # its timer fails
    worker.submit(3)
    assert worker.flush(10)
    assert seen == [1, 2, 3] and len(calls) == 4
    assert errors.counts == {"test timer": 1}
    assert worker.close(10)


def test_a_ctrl_c_on_the_closing_thread_ends_the_take_over_counts_what_is_left_and_is_kept_for_the_caller() -> None:
    """The thread that closes the worker (the user's) analyzes what waits; a ``KeyboardInterrupt`` there (the
    user's Ctrl-C) is not swallowed: the take-over ends, the item it interrupted and those after it are each told
    as dropped, and the interrupt waits in ``interrupted`` for the caller to raise once its closing is done."""
    gate = threading.Event()
    seen: list[int] = []
    told: list[tuple[int, str]] = []

    def process(item: int) -> None:
        if item == 0:
            gate.wait(10)  # holds the worker's thread while the rest queue
        elif item == 2:
            raise KeyboardInterrupt
        seen.append(item)

    worker: BoundedWorker[int] = BoundedWorker(
        "test", process, 10, ErrorLog(), on_drop=lambda *told_: told.append(told_)
    )
    for item in range(5):
        worker.submit(item)
    while worker.backlog > 4:  # the worker's thread took item 0
        threading.Event().wait(0.01)
    threading.Timer(0.2, gate.set).start()
    assert not worker.close(10)  # items 1 to 4 on this thread, once item 0 is done
    assert isinstance(worker.interrupted, KeyboardInterrupt)
    why = "shutdown was interrupted (KeyboardInterrupt) before it was analyzed"
    assert (seen, told) == ([0, 1], [(2, why), (3, why), (4, why)])
    assert worker.dropped == 3
    with pytest.raises(KeyboardInterrupt):
        worker.raise_interrupt()
    worker.raise_interrupt()  # once
    assert worker.interrupted is None


HOLD = "hold"


def hold_until_closed(worker: BoundedWorker[Any], interrupted: Callable[[Any], bool]) -> None:
    """Hold ``worker``'s own thread until the worker is closed, so that the thread that closes it (the main one)
    takes over what is submitted after; there, an item that ``interrupted`` accepts meets a Ctrl-C (a
    ``KeyboardInterrupt``) while it is processed."""
    process = worker._process

    def held(item: Any) -> None:
        if item == HOLD:
            deadline = time.monotonic() + 30
            while not worker._closing and time.monotonic() < deadline:
                time.sleep(0.01)
        elif interrupted(item) and threading.current_thread() is threading.main_thread():
            raise KeyboardInterrupt
        else:
            process(item)

    worker._process = held
    worker.submit(HOLD)
    while worker.backlog:  # the worker's thread holds it
        time.sleep(0.01)


AT_EXIT = """
import atexit
from spark_lineage.worker import BoundedWorker, ErrorLog
from tests.unit.test_worker import hold_until_closed

worker = BoundedWorker(
    "test", lambda item: print("analyzed", item), 10, ErrorLog(), on_drop=lambda item, why: print("lost", item, why)
)

def close():
    worker.close(10)
    worker.raise_interrupt()
    print("closed", flush=True)

atexit.register(close)
hold_until_closed(worker, lambda item: item == 1)
for item in range(3):
    worker.submit(item)
"""


def run_to_exit(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` (which may import the tests) in a fresh interpreter to its exit, exit hooks included."""
    root = Path(__file__).resolve().parents[2]
    return subprocess.run(
        [sys.executable, "-c", script, *args], cwd=root, capture_output=True, text=True, timeout=120, check=False
    )


def test_a_ctrl_c_while_an_exit_hook_closes_the_worker_is_not_raised_again() -> None:
    """At the process's exit the interrupt only cut the exit's analysis short: what was left is counted, the exit
    goes on, and no traceback follows (Python prints an exception raised in an exit hook as ignored)."""
    result = run_to_exit(AT_EXIT)
    why = "shutdown was interrupted (KeyboardInterrupt) before it was analyzed"
    printed = f"analyzed 0\nlost 1 {why}\nlost 2 {why}\nclosed\n"
    assert (result.returncode, result.stdout, result.stderr) == (0, printed, "")


def test_a_ctrl_c_on_the_workers_own_thread_is_said_and_the_worker_goes_on() -> None:
    errors = ErrorLog()
    seen: list[int] = []

    def process(item: int) -> None:
        if item == 0:
            raise KeyboardInterrupt
        seen.append(item)

    worker: BoundedWorker[int] = BoundedWorker("test", process, 10, errors)
    worker.submit(0)
    worker.submit(1)
    assert worker.flush(10)
    assert seen == [1] and errors.counts == {"test item": 1} and worker.interrupted is None
    assert worker.close(10)


@pytest.mark.skipif(not hasattr(os, "getpriority"), reason="per-thread priorities are Linux's")
def test_the_thread_yields_the_cpu_to_the_job_unless_the_job_runs_elsewhere() -> None:
    """A driver's worker lowers its thread's priority (the job's threads share the cores); one that serves a
    Spark Connect client keeps the process's (the job runs on the server)."""
    niceness = {}
    for yield_cpu in (True, False):
        worker: BoundedWorker[int] = BoundedWorker(
            "test",
            lambda _, key=yield_cpu: niceness.__setitem__(
                key, os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
            ),
            10,
            ErrorLog(),
            yield_cpu=yield_cpu,
        )
        worker.submit(0)
        assert worker.flush(10)
        assert worker.close(10)
    process = os.getpriority(os.PRIO_PROCESS, 0)
    assert niceness == {True: min(process + 10, 19), False: process}


def test_an_item_submitted_within_a_timeout_waits_for_room_and_is_neither_said_nor_counted_when_none_came() -> None:
    """A caller that waits anyway (a flush's own request) is given room when the queue has some within its time;
    when it has none, its item is refused without the "queue full" warning and is not counted as lost lineage."""
    gate = threading.Event()
    seen: list[int] = []
    errors = ErrorLog()

    def process(item: int) -> None:
        if item == 0:
            gate.wait(10)
        seen.append(item)

    worker: BoundedWorker[int] = BoundedWorker("test", process, 1, errors)
    worker.submit(0)
    while worker.backlog:  # the worker's thread holds item 0
        threading.Event().wait(0.01)
    assert worker.submit(1)  # the queue is full now
    assert not worker.submit_within(2, 0.05)
    assert (worker.dropped, errors.counts) == (0, {})
    threading.Timer(0.2, gate.set).start()
    assert worker.submit_within(3, 10)
    assert worker.flush(10)
    assert seen == [0, 1, 3]
    assert worker.close(10)
    assert not worker.submit_within(4, 10), "a worker that has stopped takes nothing, and says nothing"
    assert (worker.dropped, errors.counts) == (0, {})
