"""What lineage costs the driver's Python process, stage by stage: CPU time of the thread that does each stage,
how many times it ran, and the JVM round trips it made.

Every stage of a query's way from the listener to the backend marks itself with :func:`stage`. Accounting is
*exclusive*: a stage entered inside another (the JSON of an event inside spooling it) stops the outer stage's
clock, so the stages add up to the CPU time of the threads that ran them. It costs two reads of the thread's
CPU clock per stage (about a microsecond each), and is always on: ``benchmarks/cpu_per_query.py`` reads it, as can
anyone debugging a slow job (:func:`snapshot`).

Round trips to the JVM are counted only while :func:`spark_lineage.jvm.round_trips.counting` is on (a benchmark
or a test): py4j's connections are wrapped for the duration.
"""

from __future__ import annotations

import enum
import threading
import time
import weakref
from collections import deque
from contextlib import AbstractContextManager
from dataclasses import dataclass


class Stage(enum.Enum):
    """The stages a query's lineage goes through, and what else our threads do, in the order they happen."""

    LISTENER = "listener callback (queueing)"
    JOB_LISTENER = "job listener (RDD jobs)"
    CAPTURE = "capture (JVM reads)"
    ANALYSIS = "analysis (handlers, naming)"
    COLUMN_LINEAGE = "column lineage"
    EVENTS = "event building"
    RUNNING_EVENTS = "RUNNING events"
    ENRICHMENT = "openlineage-python enrichment"
    JSON = "JSON"
    REDACTION = "redaction"
    SPOOL_WRITE = "spool write"
    LEASE = "lease"
    SEND = "send"
    ACKNOWLEDGE = "acknowledge"
    SESSIONS = "other sessions, Connect"
    STREAMS = "streaming"
    ICEBERG = "Iceberg reports"
    RDD_JOBS = "RDD jobs"


@dataclass(frozen=True)
class StageCost:
    """One stage's totals since the process started (or :func:`reset`)."""

    cpu_ns: int = 0
    calls: int = 0
    round_trips: int = 0


class _Thread:
    """One thread's clock: the stages it is in, since when the innermost one runs, and what each stage cost on
    it (by :attr:`Stage` order; summed over the threads when asked, so that charging takes no lock). When its
    thread has ended and it is collected, its totals are added to those of the threads that ended."""

    __slots__ = ("__weakref__", "entered", "since", "stack", "totals")

    def __init__(self) -> None:
        self.stack: list[int] = []
        self.since = 0
        self.totals = [[0, 0, 0] for _ in _STAGES]  # CPU ns, calls, round trips
        self.entered = [_Entered(self, index) for index in range(len(_STAGES))]


class _Entered:
    """``with stage(which):`` on one thread (one object per thread and stage, made once: entering a stage is two
    reads of the thread's clock, and no allocation)."""

    __slots__ = ("index", "thread")

    def __init__(self, thread: _Thread, index: int) -> None:
        self.thread = thread
        self.index = index

    def __enter__(self) -> None:
        thread = self.thread
        now = _clock()
        if thread.stack:
            thread.totals[thread.stack[-1]][0] += now - thread.since
        thread.stack.append(self.index)
        thread.since = now

    def __exit__(self, *exc_info: object) -> None:
        thread = self.thread
        now = _clock()
        totals = thread.totals[thread.stack.pop()]
        totals[0] += now - thread.since
        totals[1] += 1
        thread.since = now


_STAGES = tuple(Stage)
_INDEX = {which: index for index, which in enumerate(_STAGES)}
_threads: weakref.WeakSet[_Thread] = weakref.WeakSet()
"""The clock of every thread that entered a stage and has not ended."""
_ended = [[0, 0, 0] for _ in _STAGES]
"""What each stage cost on the threads that ended (so that a process that makes threads keeps no more)."""
_ending: deque[list[list[int]]] = deque()
"""The totals of threads that ended, not yet added to :data:`_ended`. A thread's clock is collected by the
cyclic garbage collector, which may run its finalizer on any thread at any allocation, also on one that holds
:data:`_lock` (a finalizer that took it would wait for itself forever): the finalizer only appends here, which
takes no lock, and what is here is added under the lock when totals are read."""
_lock = threading.Lock()
_local = threading.local()
_clock = time.thread_time_ns


def _this_thread() -> _Thread:
    try:
        return _local.thread  # type: ignore[no-any-return]
    except AttributeError:
        thread = _local.thread = _Thread()
        weakref.finalize(thread, _thread_ended, thread.totals)
        with _lock:
            _threads.add(thread)
        return thread


def _thread_ended(totals: list[list[int]]) -> None:
    _ending.append(totals)  # no lock: see _ending


def _fold_ended() -> None:
    """Add the totals of the threads that ended since the last call to :data:`_ended` (``_lock`` held)."""
    while _ending:
        for ended, counted in zip(_ended, _ending.popleft()):
            for column, value in enumerate(counted):
                ended[column] += value


def stage(which: Stage) -> AbstractContextManager[None]:
    """Charge the CPU time the calling thread spends inside to ``which`` (and not to the stage it is nested in)."""
    return _this_thread().entered[_INDEX[which]]


def current() -> Stage | None:
    """The stage the calling thread is in, if any."""
    stack = _this_thread().stack
    return _STAGES[stack[-1]] if stack else None


def count_round_trip() -> None:
    """One JVM round trip made by the calling thread, charged to its stage (:mod:`spark_lineage.jvm.round_trips`)."""
    thread = _this_thread()
    if thread.stack:
        thread.totals[thread.stack[-1]][2] += 1


def snapshot() -> dict[Stage, StageCost]:
    """Each stage's totals so far (a stage being charged on another thread at that moment may count its last
    charge or not)."""
    with _lock:
        _fold_ended()
        rows = [thread.totals for thread in _threads]
        rows.append([list(totals) for totals in _ended])
    return {
        which: StageCost(*(sum(row[index][column] for row in rows) for column in range(3)))
        for index, which in enumerate(_STAGES)
    }


def reset() -> None:
    """Start counting from zero (a benchmark, after its warm-up)."""
    with _lock:
        _fold_ended()
        for totals in [*(row for thread in _threads for row in thread.totals), *_ended]:
            totals[:] = [0, 0, 0]


def since(before: dict[Stage, StageCost]) -> dict[Stage, StageCost]:
    """What each stage cost since ``before`` (a :func:`snapshot`)."""
    now = snapshot()
    return {
        s: StageCost(c.cpu_ns - before[s].cpu_ns, c.calls - before[s].calls, c.round_trips - before[s].round_trips)
        for s, c in now.items()
    }
