"""What lineage costs the driver's Python process, stage by stage: CPU time of the thread that does each stage,
how many times it ran, and the JVM round trips it made.

Every stage of a query's way from the listener to the backend marks itself with :func:`stage`. Accounting is
*exclusive*: a stage entered inside another (the JSON of an event inside spooling it) stops the outer stage's
clock, so the stages add up to the CPU time of the threads that ran them. It costs two reads of the thread's
CPU clock per stage (about a microsecond), and is always on: ``benchmarks/cpu_per_query.py`` reads it, as can
anyone debugging a slow job (:func:`snapshot`).

Round trips to the JVM are counted only while :func:`spark_lineage.jvm.round_trips.counting` is on (a benchmark
or a test): py4j's connections are wrapped for the duration.
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
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


class _Totals:
    __slots__ = ("calls", "cpu_ns", "round_trips")

    def __init__(self) -> None:
        self.cpu_ns = 0
        self.calls = 0
        self.round_trips = 0


_totals: dict[Stage, _Totals] = {s: _Totals() for s in Stage}
_lock = threading.Lock()
_local = threading.local()
_clock = time.thread_time_ns


@contextmanager
def stage(which: Stage) -> Iterator[None]:
    """Charge the CPU time the calling thread spends inside to ``which`` (and not to the stage it is nested in)."""
    stack: list[Stage] | None = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    now = _clock()
    if stack:
        _charge(stack[-1], now - _local.since)
    stack.append(which)
    _local.since = now
    try:
        yield
    finally:
        now = _clock()
        _charge(stack.pop(), now - _local.since, calls=1)
        _local.since = now


def current() -> Stage | None:
    """The stage the calling thread is in, if any."""
    stack: list[Stage] | None = getattr(_local, "stack", None)
    return stack[-1] if stack else None


def _charge(which: Stage, cpu_ns: int, calls: int = 0) -> None:
    totals = _totals[which]
    with _lock:
        totals.cpu_ns += cpu_ns
        totals.calls += calls


def count_round_trip() -> None:
    """One JVM round trip made by the calling thread, charged to its stage (:mod:`spark_lineage.jvm.round_trips`)."""
    which = current()
    if which is not None:
        with _lock:
            _totals[which].round_trips += 1


def snapshot() -> dict[Stage, StageCost]:
    """Each stage's totals so far."""
    with _lock:
        return {s: StageCost(t.cpu_ns, t.calls, t.round_trips) for s, t in _totals.items()}


def reset() -> None:
    """Start counting from zero (a benchmark, after its warm-up)."""
    with _lock:
        for totals in _totals.values():
            totals.cpu_ns = totals.calls = totals.round_trips = 0


def since(before: dict[Stage, StageCost]) -> dict[Stage, StageCost]:
    """What each stage cost since ``before`` (a :func:`snapshot`)."""
    now = snapshot()
    return {
        s: StageCost(c.cpu_ns - before[s].cpu_ns, c.calls - before[s].calls, c.round_trips - before[s].round_trips)
        for s, c in now.items()
    }
