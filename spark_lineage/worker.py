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


REMINDER_SECONDS = 300.0
"""How often, at most, a kind of error that keeps happening is mentioned again at WARNING, with its count."""


class ErrorLog:
    """Reports errors once per kind: the first at WARNING, in one line; every one at DEBUG with its traceback.

    A kind that keeps happening is mentioned again at most every :data:`REMINDER_SECONDS`, with how many times
    it happened since; :meth:`summarize` says what was not mentioned yet (at shutdown). A job's log must not
    fill with one traceback per event when a backend is down, yet a traceback is one ``DEBUG`` away.
    Never raises."""

    def __init__(
        self,
        prefix: str = "spark_lineage",
        clock: Callable[[], float] = time.monotonic,
        reminder_seconds: float = REMINDER_SECONDS,
    ) -> None:
        self._prefix = prefix
        self._clock = clock
        self._reminder_seconds = reminder_seconds
        self._lock = threading.Lock()
        self.counts: dict[str, int] = {}
        self._mentioned: dict[str, tuple[int, float]] = {}
        """Per kind: the count when it was last said at WARNING, and when."""

    def report(self, kind: str, error: BaseException | None = None, message: str | None = None) -> None:
        """One more error of ``kind``; ``message`` says it for people (default: ``<kind> failed: <error>``)."""
        try:
            now = self._clock()
            with self._lock:
                count = self.counts.get(kind, 0) + 1
                self.counts[kind] = count
                said, when = self._mentioned.get(kind, (0, now))
                first = count == 1
                remind = not first and now - when >= self._reminder_seconds
                if first or remind:
                    self._mentioned[kind] = (count, now)
            text = f"{self._prefix}: " + (message or f"{kind} failed: {one_line(error)}")
            if first:
                log.warning("%s (repeats are counted; details at DEBUG)", text)
            elif remind:
                log.warning("%s (%d more failures since the last mention, %d in all)", text, count - said, count)
            log.debug("%s: %s failed (%d)", self._prefix, kind, count, exc_info=error)
        except Exception:  # noqa: BLE001 - logging itself must not fail the caller
            pass

    def summarize(self, skip: Callable[[str], bool] = lambda kind: False) -> None:
        """Say at WARNING, once per kind, how many errors were not mentioned yet (kinds ``skip`` accepts are
        said elsewhere: undelivered events are counted by the delivery's own summary)."""
        with self._lock:
            unsaid = {
                kind: (count - self._mentioned.get(kind, (0, 0.0))[0], count)
                for kind, count in self.counts.items()
                if count > self._mentioned.get(kind, (0, 0.0))[0] and not skip(kind)
            }
            for kind, (_, count) in unsaid.items():
                self._mentioned[kind] = (count, self._clock())
        for kind, (more, count) in unsaid.items():
            log.warning("%s: %s failed %d more times (%d in all; details at DEBUG)", self._prefix, kind, more, count)


def one_line(error: BaseException | None) -> str:
    """``error`` as one short line: its type and the first line of its message."""
    if error is None:
        return "unknown error"
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0][:200]}" if lines else type(error).__name__


def problem(error: BaseException) -> str:
    """What went wrong with a send, in a few words: ``connection refused``, ``timed out``, ``HTTP 503``..."""
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in chain and len(chain) < 10:
        chain.append(current)
        current = current.__cause__ or current.__context__
    for link in chain:
        if isinstance(link, ConnectionRefusedError) or "connection refused" in str(link).lower():
            return "connection refused"
    for link in chain:
        text = str(link)
        if "Name or service not known" in text or "nodename nor servname" in text or "getaddrinfo failed" in text:
            return "unknown host"
    if any(timed_out(link) for link in chain):
        return "timed out"
    status = getattr(getattr(error, "response", None), "status_code", None)
    if isinstance(status, int):
        return f"HTTP {status}"
    return one_line(error)


def timed_out(error: BaseException) -> bool:
    """Whether the backend did not answer in time (requests' and the standard library's timeouts alike)."""
    return isinstance(error, TimeoutError) or "timeout" in type(error).__name__.lower()


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
        on_drop: Callable[[T, str], None] | None = None,
    ) -> None:
        """``on_drop(item, why)`` is told of each item that is never processed: refused by a full queue, or
        still waiting when :meth:`close` gave up."""
        self._process = process
        self._on_drop = on_drop
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
            self._dropped(item, f"the {self._name} queue was full ({self._queue.maxsize} items)")
            self._errors.report(
                f"{self._name} queue full",
                message=f"the {self._name} queue is full ({self._queue.maxsize} items); lineage is being dropped. "
                + self._full_hint,
            )
            return False

    @property
    def backlog(self) -> int:
        """How many items wait (approximately: other threads may be adding or taking)."""
        return self._queue.qsize()

    @property
    def capacity(self) -> int:
        return self._queue.maxsize

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
            # What waits is never processed: take it out, so that the worker stops after what it is doing.
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                self._queue.task_done()
                self.dropped += 1
                self._dropped(item, "it was still waiting for analysis when shutdown's time was up")  # type: ignore[arg-type]
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(_STOP)
        return flushed

    def _dropped(self, item: T, why: str) -> None:
        if self._on_drop is None:
            return
        try:
            self._on_drop(item, why)
        except Exception as error:  # noqa: BLE001 - counting a loss never fails the caller
            self._errors.report(f"counting a dropped {self._name} item", error)

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
