"""Stage accounting: each stage is charged the CPU time its thread spent inside it, nested stages apart."""

from __future__ import annotations

import gc
import threading
import time

from spark_lineage import costs
from spark_lineage.costs import Stage


def _burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_a_nested_stage_is_charged_to_itself_and_not_to_the_stage_around_it() -> None:
    before = costs.snapshot()
    with costs.stage(Stage.SPOOL_WRITE):
        _burn(0.02)
        with costs.stage(Stage.JSON):
            _burn(0.05)
        _burn(0.02)
    spent = costs.since(before)

    assert spent[Stage.JSON].calls == 1 and spent[Stage.SPOOL_WRITE].calls == 1
    assert 0.05e9 <= spent[Stage.JSON].cpu_ns < 0.07e9
    assert 0.04e9 <= spent[Stage.SPOOL_WRITE].cpu_ns < 0.06e9
    assert costs.current() is None


def test_each_thread_keeps_its_own_stages() -> None:
    before = costs.snapshot()
    seen: list[Stage | None] = []

    def other() -> None:
        seen.append(costs.current())
        with costs.stage(Stage.SEND):
            _burn(0.01)

    with costs.stage(Stage.CAPTURE):
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    spent = costs.since(before)

    assert seen == [None]
    assert spent[Stage.SEND].calls == 1 and spent[Stage.SEND].cpu_ns >= 0.01e9
    # the other thread's CPU is not the capture's
    assert spent[Stage.CAPTURE].cpu_ns < 0.01e9


def test_round_trips_are_charged_to_the_stage_that_made_them_and_only_inside_one() -> None:
    before = costs.snapshot()
    costs.count_round_trip()  # outside any stage: not ours
    with costs.stage(Stage.CAPTURE):
        costs.count_round_trip()
        with costs.stage(Stage.ANALYSIS):
            costs.count_round_trip()
    spent = costs.since(before)

    assert spent[Stage.CAPTURE].round_trips == 1
    assert spent[Stage.ANALYSIS].round_trips == 1
    assert sum(cost.round_trips for cost in spent.values()) == 2


def test_threads_that_ended_keep_their_totals_and_no_memory() -> None:
    """A process that makes a thread per task keeps one set of totals for the threads that ended, not one each."""
    gc.collect()
    before, clocks = costs.snapshot(), len(costs._threads)

    def task() -> None:
        with costs.stage(Stage.RDD_JOBS):
            costs.count_round_trip()

    for _ in range(50):
        thread = threading.Thread(target=task)
        thread.start()
        thread.join()
    gc.collect()
    spent = costs.since(before)

    assert (spent[Stage.RDD_JOBS].calls, spent[Stage.RDD_JOBS].round_trips) == (50, 50)
    assert len(costs._threads) <= clocks


def test_a_clock_collected_while_its_lock_is_held_does_not_wait_for_itself() -> None:
    """An ended thread's clock is freed by the cyclic garbage collector, which runs its finalizer on whatever
    thread allocates at that moment, also one inside ``snapshot()`` holding the module's lock: the finalizer
    must not take that lock (it waited for itself forever, and a unit run for pytest-timeout's 300 s)."""
    gc.collect()
    before = costs.snapshot()

    def task() -> None:
        with costs.stage(Stage.SEND):
            pass

    gc.disable()  # the ended thread's clock stays garbage until collected below, under the lock
    try:
        thread = threading.Thread(target=task)
        thread.start()
        thread.join()
        with costs._lock:
            gc.collect()
    finally:
        gc.enable()
    assert costs.since(before)[Stage.SEND].calls == 1
