"""The bounded workers and once-per-kind error logging."""

from __future__ import annotations

import logging
import threading

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
