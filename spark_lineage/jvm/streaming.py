"""Structured Streaming from the JVM: the query listener, and the reads of a query's events and plan.

Spark posts a streaming query's lifecycle to the listeners of the session that started it. PySpark's own
listener classes convert every event field by field inside the callback (tens of py4j calls per
micro-batch); :class:`StreamListener` implements the same JVM interface and only queues the event. The worker
then reads what it needs: a few values when a query starts or ends, the progress as one JSON text per
micro-batch, and, once per query, the plan of a micro-batch (an ``IncrementalExecution``, read like any
query by :class:`~spark_lineage.jvm.spark.QueryReader`).
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from spark_lineage.jvm.listener import read_micro_batch_jobs
from spark_lineage.jvm.sql_jobs import sql_job_store
from spark_lineage.jvm.values import JavaCallback, JvmClasses, unwrap_option
from spark_lineage.jvm.wire import micro_batch_key
from spark_lineage.plan import QueryJob

log = logging.getLogger(__name__)

_LISTENER_INTERFACE = "org.apache.spark.sql.streaming.PythonStreamingQueryListener"
_LISTENER_WRAPPER = "org.apache.spark.sql.streaming.PythonStreamingQueryListenerWrapper"
_BATCH_JOBS_POLL_SECONDS = 0.05


class StreamEventKind(enum.Enum):
    STARTED = "started"
    PROGRESS = "progress"
    TERMINATED = "terminated"


@dataclass
class PendingStreamEvent:
    """What the streaming listener hands to the worker: the JVM event, unread."""

    kind: StreamEventKind
    event: Any
    at_ms: int


@dataclass(frozen=True)
class StreamStarted:
    query_id: str
    name: str | None
    timestamp: str
    """ISO 8601, as Spark gives it."""


@dataclass(frozen=True)
class StreamTerminated:
    query_id: str
    error: str | None
    """The exception that stopped the query, as text; ``None`` when it was stopped or ran out of input."""


class StreamListener(JavaCallback):
    """A ``PythonStreamingQueryListener``. Spark calls it on its listener threads (``onQueryStarted`` on the
    query's own thread, which ``start()`` waits for): it only queues, and never lets an exception escape."""

    def __init__(self, sink: Callable[[PendingStreamEvent], object], name: str) -> None:
        super().__init__(name)
        self._sink = sink

    def _queue(self, kind: StreamEventKind, event: Any) -> None:
        try:
            self._sink(PendingStreamEvent(kind, event, int(time.time() * 1000)))
        except BaseException:
            log.debug("spark_lineage streaming listener could not queue an event", exc_info=True)

    def onQueryStarted(self, event: Any) -> None:
        self._queue(StreamEventKind.STARTED, event)

    def onQueryProgress(self, event: Any) -> None:
        self._queue(StreamEventKind.PROGRESS, event)

    def onQueryIdle(self, event: Any) -> None:
        """An idle query has nothing new to report."""

    def onQueryTerminated(self, event: Any) -> None:
        self._queue(StreamEventKind.TERMINATED, event)

    class Java:
        implements = [_LISTENER_INTERFACE]


class StreamReader:
    """Reads streaming query events and queries of one session, on the streams worker's thread."""

    def __init__(self, jsession: Any, gateway: Any, classes: JvmClasses) -> None:
        self._jsession = jsession
        self._gateway = gateway
        self._classes = classes
        self._wrapper: Any = None

    def register(self, listener: StreamListener) -> None:
        from pyspark.java_gateway import ensure_callback_server_started

        ensure_callback_server_started(self._gateway)  # type: ignore[no-untyped-call]
        wrapper = self._classes(_LISTENER_WRAPPER)(listener)
        self._jsession.streams().addListener(wrapper)
        self._wrapper = wrapper

    def unregister(self) -> None:
        wrapper, self._wrapper = self._wrapper, None
        if wrapper is not None:
            self._jsession.streams().removeListener(wrapper)

    def started(self, event: Any) -> StreamStarted:
        return StreamStarted(
            query_id=str(event.id().toString()),
            name=_text(event.name()),
            timestamp=str(event.timestamp()),
        )

    def terminated(self, event: Any) -> StreamTerminated:
        return StreamTerminated(
            query_id=str(event.id().toString()),
            error=_text(self._option(event.exception())),
        )

    def progress_json(self, event: Any) -> str:
        return str(event.progress().json())

    def query(self, query_id: str) -> Any:
        """The running query with this id (Spark's handle), or ``None`` once it has ended."""
        return self._jsession.streams().get(query_id)

    def batch_jobs(self, run_id: str, batch_id: int, wait_seconds: float) -> tuple[QueryJob, ...]:
        """The Spark jobs a micro-batch ran, in the order they started, taken out of the JVM (two round trips).
        Spark posts a query's progress on a listener queue of its own, which may be ahead of the job listener's:
        until the micro-batch's end has been filed after its jobs, they are taken again, ``wait_seconds`` at
        most."""
        store = sql_job_store(self._gateway, self._classes)
        key = micro_batch_key(run_id, batch_id)
        deadline = time.monotonic() + wait_seconds
        taken: list[str] = []
        while True:
            joined = store.take_slowly(key)
            if joined:
                taken.append(joined)
            jobs, complete = read_micro_batch_jobs("".join(taken))
            if complete or time.monotonic() >= deadline:
                return jobs
            time.sleep(_BATCH_JOBS_POLL_SECONDS)

    def last_execution(self, query: Any) -> Any:
        """The execution of the query's latest micro-batch (an ``IncrementalExecution``), or ``None`` before the
        first."""
        return query.streamingQuery().lastExecution()

    def _option(self, option: Any) -> Any:
        return unwrap_option(option, getattr(self._classes("scala.Predef"), "$conforms")())


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
