"""Background work that never hurts the job: bounded queues drained in order by daemon threads, and error
reporting that logs each kind of failure once."""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

log = logging.getLogger("spark_lineage")

T = TypeVar("T")
_WORKER_NICENESS = 10
_STOP = object()


class ErrorLog:
    """Logs the first error of each kind with its traceback, counts the rest, and never raises."""

    def __init__(self, prefix: str = "spark_lineage") -> None:
        self._prefix = prefix
        self._lock = threading.Lock()
        self.counts: dict[str, int] = {}

    def report(self, kind: str, error: BaseException | None = None, message: str | None = None) -> None:
        try:
            with self._lock:
                count = self.counts.get(kind, 0) + 1
                self.counts[kind] = count
            if count == 1:
                text = f"{self._prefix}: " + (message or f"{kind} failed: {error!r}")
                log.warning(
                    text + " (further errors of this kind are logged at DEBUG)",
                    exc_info=error if error is not None else None,
                )
            else:
                log.debug("%s: %s failed again: %r", self._prefix, kind, error)
        except Exception:  # noqa: BLE001 - logging itself must not fail the caller
            pass


def yield_cpu_to_the_job() -> None:
    """Lower this thread's scheduling priority where the OS allows it per thread (Linux), so that on a busy
    driver the job's own threads run first and lineage work takes the idle time."""
    if not hasattr(os, "setpriority") or not hasattr(threading, "get_native_id"):
        return
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), _WORKER_NICENESS)


class BoundedWorker(Generic[T]):
    """One daemon thread that runs ``process`` on each submitted item, in submission order.

    ``submit`` never blocks: when ``capacity`` items are waiting, the item is refused and counted, so a
    stalled backend costs bounded memory and never stalls the thread that submits.
    """

    def __init__(
        self,
        name: str,
        process: Callable[[T], None],
        capacity: int,
        errors: ErrorLog,
        full_hint: str = "Raise spark.openlineage.python.queueSize or check the backend.",
    ) -> None:
        self._process = process
        self._full_hint = full_hint
        self._errors = errors
        self._name = name
        self._queue: queue.Queue[object] = queue.Queue(maxsize=capacity)
        self.dropped = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, item: T) -> bool:
        try:
            self._queue.put_nowait(item)
            return True
        except queue.Full:
            self.dropped += 1
            self._errors.report(
                f"{self._name} queue full",
                message=f"the {self._name} queue is full ({self._queue.maxsize} items); lineage is being dropped. "
                + self._full_hint,
            )
            return False

    def flush(self, timeout: float | None) -> bool:
        """Wait until everything submitted so far is processed. True if it was, False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._queue.all_tasks_done:
            while self._queue.unfinished_tasks:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._queue.all_tasks_done.wait(remaining)
        return True

    def close(self, timeout: float | None) -> bool:
        """Flush, then stop the thread. Items still queued at the deadline are abandoned (and counted)."""
        flushed = self.flush(timeout)
        if not flushed:
            self.dropped += self._queue.qsize()
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(_STOP)
        return flushed

    def _run(self) -> None:
        yield_cpu_to_the_job()
        while True:
            item = self._queue.get()
            try:
                if item is _STOP:
                    return
                self._process(item)  # type: ignore[arg-type]
            except BaseException as error:  # noqa: BLE001 - the worker outlives any single item
                self._errors.report(f"{self._name} item", error)
            finally:
                self._queue.task_done()
