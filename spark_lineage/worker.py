"""Background work that never hurts the job: bounded queues drained in order by daemon threads, and error
reporting that logs each kind of failure once."""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

log = logging.getLogger("spark_lineage")

T = TypeVar("T")
_WORKER_NICENESS = 10


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
    driver the job's own threads run first and lineage work takes the idle time.

    Only where the job runs in this process (a driver's JVM, its tasks in local mode): elsewhere (a Spark
    Connect client) nothing of the job is left to yield to, and a thread that holds the GIL at a lowered priority
    while other processes keep the cores busy makes the user's own Python thread wait for it."""
    if not hasattr(os, "setpriority") or not hasattr(threading, "get_native_id"):
        return
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), _WORKER_NICENESS)


class BoundedWorker(Generic[T]):
    """One daemon thread that runs ``process`` on each submitted item, in submission order.

    ``submit`` never blocks: when ``capacity`` items are waiting, the item is refused and counted, so a
    stalled backend costs bounded memory and never stalls the thread that submits.

    The thread yields the CPU to the job (:func:`yield_cpu_to_the_job`, unless told the job runs elsewhere): on a
    driver whose cores the job keeps busy it runs only now and then. :meth:`close` does not wait for it to get
    through what is queued: once the item in its hands is done, the closing thread (a user's ``disable()``,
    ``spark.stop()``, the exit) takes the rest in order, at its own priority, within the shutdown's deadline.
    """

    def __init__(
        self,
        name: str,
        process: Callable[[T], None],
        capacity: int,
        errors: ErrorLog,
        full_hint: str = "Raise spark.openlineage.python.queueSize or check the backend.",
        on_drop: Callable[[T, str], None] | None = None,
        timer: Callable[[], float | None] | None = None,
        yield_cpu: bool = True,
    ) -> None:
        """``on_drop(item, why)`` is told of each item that is never processed: refused by a full queue, or
        still waiting when :meth:`close` gave up. ``timer()``, when given, runs on the worker's thread after each
        item, and again once the seconds it last returned have passed with no item (``None``: not before the next
        item): work that is due at a time rather than on an item. ``yield_cpu``: the thread yields the CPU to the job
        (:func:`yield_cpu_to_the_job`), where the job runs in this process."""
        self._process = process
        self._on_drop = on_drop
        self._timer = timer
        self._yield_cpu = yield_cpu
        self._full_hint = full_hint
        self._errors = errors
        self._name = name
        self._capacity = capacity
        self._items: collections.deque[T] = collections.deque()
        self._changed = threading.Condition()
        """Guards the items and the state below; notified when an item comes, is done, or the worker stops."""
        self._busy = False
        """Whether the thread is processing an item (taken out of ``_items``)."""
        self._closing = False
        """Set by :meth:`close`: the thread takes no further item, and ends."""
        self.dropped = 0
        self.interrupted: KeyboardInterrupt | None = None
        """The user's interrupt (Ctrl-C) that ended :meth:`close`'s take-over, for its caller to raise again once
        lineage's own closing is done (:meth:`raise_interrupt`): the interrupt is the user's, not lineage's to
        swallow."""
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, item: T) -> bool:
        with self._changed:
            if self._queued(item):
                return True
            self.dropped += 1
            closing = self._closing
        if closing:
            self._dropped(item, f"it came after the {self._name} worker had stopped")
            return False
        self._dropped(item, f"the {self._name} queue was full ({self._capacity} items)")
        self._errors.report(
            f"{self._name} queue full",
            message=f"the {self._name} queue is full ({self._capacity} items); lineage is being dropped. "
            + self._full_hint,
        )
        return False

    def submit_within(self, item: T, timeout: float | None) -> bool:
        """Submit ``item`` once the queue has room, waiting for it at most ``timeout`` seconds: for a caller that
        waits anyway (a flush's own request). False when there was no room by then, or the worker has stopped;
        nothing is said nor counted then, as no lineage was lost (the caller says what its item was for)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            self._wait(lambda: len(self._items) < self._capacity or self._closing, deadline)
            return self._queued(item)

    def _queued(self, item: T) -> bool:
        """Queue ``item`` (holding ``_changed``) if there is room and the worker still runs."""
        if len(self._items) >= self._capacity or self._closing:
            return False
        self._items.append(item)
        self._changed.notify_all()
        return True

    @property
    def backlog(self) -> int:
        """How many items wait (approximately: other threads may be adding or taking)."""
        return len(self._items)

    @property
    def capacity(self) -> int:
        return self._capacity

    def flush(self, timeout: float | None) -> bool:
        """Wait until everything submitted so far is processed. True if it was, False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            return self._wait(lambda: not self._items and not self._busy, deadline)

    def close(self, timeout: float | None, *, take_over: bool = True) -> bool:
        """Stop the thread once the item in its hands is done and, with ``take_over``, process what waits on this
        thread, in order, until ``timeout``; without, wait that long for the worker's thread to process it (a
        thread that must not run lineage's code: a signal handler). Items still waiting at the deadline are
        abandoned (and counted). True when every item was processed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            if not take_over:
                self._wait(lambda: not self._items and not self._busy, deadline)
            self._closing = True
            self._changed.notify_all()
            done = self._wait(lambda: not self._busy, deadline)
            left = list(self._items)
            self._items.clear()
        for index, item in enumerate(left):
            if not done or (deadline is not None and time.monotonic() >= deadline):
                self._abandon(left[index:], "it was still waiting for analysis when shutdown's time was up")
                return False
            try:
                self._process_one(item, interruptible=True)
            except KeyboardInterrupt as interrupt:  # the user's Ctrl-C ends the take-over; what is left is counted
                self.interrupted = interrupt
                self._abandon(left[index:], "shutdown was interrupted (KeyboardInterrupt) before it was analyzed")
                return False
        return done

    def raise_interrupt(self) -> None:
        """Raise the user's interrupt that ended :meth:`close`'s take-over (:attr:`interrupted`), once; for the
        caller of :meth:`close`, once lineage's own closing is done. Not while the interpreter exits (the main
        thread has finished: an exit hook closed lineage): the Ctrl-C then only cut the exit's analysis short,
        what it left is counted as lost, the exit goes on, and Python would only print the interrupt as an
        exception ignored in an exit hook."""
        interrupt, self.interrupted = self.interrupted, None
        if interrupt is not None and threading.main_thread().is_alive():
            raise interrupt

    def _abandon(self, items: list[T], why: str) -> None:
        for item in items:
            self.dropped += 1
            self._dropped(item, why)

    def _wait(self, until: Callable[[], bool], deadline: float | None) -> bool:
        """Wait (holding ``_changed``) until ``until()``; False at ``deadline``."""
        while not until():
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            self._changed.wait(remaining)
        return True

    def _dropped(self, item: T, why: str) -> None:
        if self._on_drop is None:
            return
        try:
            self._on_drop(item, why)
        except Exception as error:  # noqa: BLE001 - counting a loss never fails the caller
            self._errors.report(f"counting a dropped {self._name} item", error)

    def _process_one(self, item: T, *, interruptible: bool = False) -> None:
        """Process ``item``; whatever it raises is said (once per kind), but, when ``interruptible`` (on the
        thread that closes the worker: the user's), a ``KeyboardInterrupt``, which is raised on."""
        try:
            self._process(item)
        except BaseException as error:  # the worker outlives any single item
            if interruptible and isinstance(error, KeyboardInterrupt):
                raise
            self._errors.report(f"{self._name} item", error)

    def _run(self) -> None:
        if self._yield_cpu:
            yield_cpu_to_the_job()
        due: float | None = None  # when the timer is to run again, with no item before (time.monotonic())
        while True:
            with self._changed:
                self._busy = False
                self._changed.notify_all()
                while not self._items and not self._closing:
                    remaining = None if due is None else due - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        break
                    self._changed.wait(remaining)
                if self._closing:
                    return
                item = self._items.popleft() if self._items else None
                self._busy = True
            if item is not None:
                self._process_one(item)
            if self._timer is not None:
                due = self._run_timer()

    def _run_timer(self) -> float | None:
        """Run the timer; when it is to run again (``None``: after the next item)."""
        try:
            seconds = self._timer() if self._timer is not None else None
        except Exception as error:  # noqa: BLE001 - the worker outlives its timer's failures
            self._errors.report(f"{self._name} timer", error)
            return None
        return None if seconds is None else time.monotonic() + max(seconds, 0.0)
