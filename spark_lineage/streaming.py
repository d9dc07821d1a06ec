"""Structured Streaming queries as runs: one run per query, from its start to its termination, and a run per
micro-batch under it, as openlineage-spark reports micro-batches.

Spark's streaming listener tells when a query starts, makes progress and ends; no query listener hears a
micro-batch itself (it runs without an action name). So the datasets come from the plan of a micro-batch,
read once per query when its first batch has run: a query reads and writes the same datasets in every batch.

- START of the query's run when the query starts (no datasets are known yet);
- RUNNING with its sources and sink once the first batch's plan is read;
- per micro-batch that ran, a run of its own, named like a batch query (``<app>.<physical root>[.<output>]``),
  as openlineage-spark reports the micro-batch's SQL execution: START, a RUNNING event per Spark job it ran
  (with ``spark_jobDetails``) and one when its first job ended, and COMPLETE with the rows the sink wrote. The
  JVM files a micro-batch's jobs by the query run and batch ids (:func:`~spark_lineage.jvm.wire.
  micro_batch_key`), and they are taken when its progress is reported, waiting :data:`BATCH_JOBS_WAIT_SECONDS`
  at most for the job listener to catch up;
- COMPLETE when the query stops or runs out of input, FAIL with the error when it fails.

A query's handle is taken when it starts (Spark forgets a query once it has ended), so even a query that
ends before the worker reads its first progress has its plan read.

A ``foreachBatch`` function's queries are reported by the session's query listener, like any query; what
they read from the batch DataFrame (an RDD of the micro-batch's plan, which names no source) is the stream's
sources: :meth:`StreamTracker.sources` answers them on the analysis worker, reading the query's plan there
when the streams worker has not yet.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from openlineage.client.event_v2 import RunEvent, RunState

from spark_lineage.config import ParentJob
from spark_lineage.events import EventBuilder, new_run_id
from spark_lineage.jvm import JvmBridge, PendingQuery, PendingStreamEvent, StreamEventKind
from spark_lineage.lineage import DatasetLineage, QueryLineage
from spark_lineage.plan import CapturedQuery, QueryJob
from spark_lineage.worker import ErrorLog

MICRO_BATCH = "micro_batch"
"""The action name a micro-batch is captured under (Spark gives it none)."""
_ANALYZED = ("analyzed",)
_STREAMS_KEPT = 1000
BATCH_JOBS_WAIT_SECONDS = 2.0
"""How long a micro-batch's progress waits for the job listener to have filed all the batch's jobs."""


@dataclass(frozen=True)
class MicroBatch:
    """One micro-batch, as a progress report describes it."""

    batch_id: int
    start_ms: int
    end_ms: int
    output_rows: int | None
    ran: bool
    """Whether a batch ran: a query waiting for data reports progress too, with no batch."""

    @classmethod
    def from_progress(cls, progress: Mapping[str, Any]) -> MicroBatch:
        durations = progress.get("durationMs") or {}
        start_ms = iso_millis(str(progress.get("timestamp"))) or int(time.time() * 1000)
        sink = progress.get("sink") or {}
        rows = sink.get("numOutputRows")
        return cls(
            batch_id=int(progress.get("batchId", -1)),
            start_ms=start_ms,
            end_ms=start_ms + int(durations.get("triggerExecution", 0)),
            output_rows=rows if isinstance(rows, int) and rows >= 0 else None,
            ran="addBatch" in durations,
        )


def iso_millis(text: str) -> int | None:
    """Epoch milliseconds of a Spark timestamp (``2024-01-02T03:04:05.678Z``)."""
    try:
        return int(dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


@dataclass
class _Stream:
    """What is known of one running query."""

    run: ParentJob
    query: Any
    """Spark's handle of the query (opaque here: only the bridge reads it)."""
    lineage: QueryLineage | None = None
    announced: bool = False
    """Whether its RUNNING event (its datasets, once its plan was read) was sent."""
    batch: CapturedQuery | None = None
    """The micro-batch read, without its plan: what names the micro-batch runs."""


class StreamTracker:
    """Turns one session's streaming query events into runs. Runs on the session's streams worker, apart from
    the analysis worker, so that a busy analysis queue cannot outlast a short query's handle."""

    def __init__(
        self,
        bridge: JvmBridge,
        events: EventBuilder,
        capture: Callable[[PendingQuery], CapturedQuery | None],
        analyze: Callable[[CapturedQuery], QueryLineage],
        deliver: Callable[[Sequence[RunEvent]], None],
        errors: ErrorLog,
        *,
        batch_jobs: bool = True,
    ) -> None:
        """``batch_jobs``: whether micro-batch runs get their Spark jobs' RUNNING events (as query runs do)."""
        self._bridge = bridge
        self._events = events
        self._capture = capture
        self._analyze = analyze
        self._deliver = deliver
        self._errors = errors
        self._batch_jobs = batch_jobs
        self._streams: dict[str, _Stream] = {}
        self._ended_sources: dict[str, list[DatasetLineage]] = {}
        """The sources of the queries that ended, for their last ``foreachBatch`` queries analyzed after."""
        self._lock = threading.Lock()
        """Held by the streams worker while it handles an event, and by the analysis worker asking for
        :meth:`sources`."""

    def handle(self, pending: PendingStreamEvent) -> None:
        try:
            after: Callable[[], None] | None = None
            with self._lock:
                if pending.kind is StreamEventKind.STARTED:
                    self._started(pending)
                elif pending.kind is StreamEventKind.PROGRESS:
                    after = self._progress(pending)
                else:
                    self._terminated(pending)
            if after is not None:  # out of the lock: a foreachBatch query's sources() need not wait for it
                after()
        finally:
            pending.event = None  # let the JVM free the event now

    def sources(self, query_id: str) -> list[DatasetLineage] | None:
        """What the streaming query ``query_id`` reads (for a query its ``foreachBatch`` function ran, on the
        analysis worker); ``None`` for a query started before lineage was on, or whose plan could not be read."""
        with self._lock:
            stream = self._streams.get(query_id)
            if stream is None:
                return self._ended_sources.get(query_id)
            if stream.lineage is None:
                self._read_plan(stream, int(time.time() * 1000))
            return None if stream.lineage is None else stream.lineage.inputs

    def _started(self, pending: PendingStreamEvent) -> None:
        started = self._bridge.streams.started(pending.event)
        start_ms = iso_millis(started.timestamp) or pending.at_ms
        run = ParentJob(self._events.config.namespace, self._events.stream_job_name(started.name), new_run_id(start_ms))
        self._streams[started.query_id] = _Stream(run, self._bridge.streams.query(started.query_id))
        while len(self._streams) > _STREAMS_KEPT:  # queries whose end we never heard of
            self._streams.pop(next(iter(self._streams)))
        self._deliver([self._events.stream_event(RunState.START, start_ms, run, None)])

    def _progress(self, pending: PendingStreamEvent) -> Callable[[], None] | None:
        """Handle a micro-batch's progress; what is left to do once the lock is let go: read the batch's Spark
        jobs (which waits, up to :data:`BATCH_JOBS_WAIT_SECONDS`, for the job listener) and report its run."""
        progress = json.loads(self._bridge.streams.progress_json(pending.event))
        stream = self._streams.get(str(progress.get("id")))
        if stream is None:  # started before lineage was on
            return None
        if stream.lineage is None:
            self._read_plan(stream, pending.at_ms)
        if stream.lineage is not None and not stream.announced:  # its plan may have been read for a foreachBatch
            stream.announced = True
            self._deliver([self._events.stream_event(RunState.RUNNING, pending.at_ms, stream.run, stream.lineage)])
        batch = MicroBatch.from_progress(progress)
        captured, lineage = stream.batch, stream.lineage  # set once, never changed after
        if not batch.ran or captured is None or lineage is None:
            return None

        def report() -> None:
            query = dataclasses.replace(
                captured,
                start_ms=batch.start_ms,
                end_ms=batch.end_ms,
                metrics={} if batch.output_rows is None else {"numOutputRows": batch.output_rows},
                jobs=self._jobs_of(progress.get("runId"), batch),
            )
            self._deliver(self._events.query_events(query, lineage, parent=stream.run, streaming=True))

        return report

    def _jobs_of(self, run_id: Any, batch: MicroBatch) -> tuple[QueryJob, ...]:
        """The Spark jobs a micro-batch ran; none when they could not be read (the batch's run is reported
        anyway, without its RUNNING events)."""
        if not self._batch_jobs or not run_id:
            return ()
        try:
            return self._bridge.streams.batch_jobs(str(run_id), batch.batch_id, BATCH_JOBS_WAIT_SECONDS)
        except Exception as exc:  # noqa: BLE001 - the batch's run is still reported
            self._errors.report("reading a micro-batch's Spark jobs", exc)
            return ()

    def _terminated(self, pending: PendingStreamEvent) -> None:
        terminated = self._bridge.streams.terminated(pending.event)
        stream = self._streams.pop(terminated.query_id, None)
        if stream is None:
            return
        if stream.lineage is None:
            self._read_plan(stream, pending.at_ms)
        if stream.lineage is not None:
            self._ended_sources[terminated.query_id] = stream.lineage.inputs
            while len(self._ended_sources) > _STREAMS_KEPT:
                self._ended_sources.pop(next(iter(self._ended_sources)))
        state = RunState.FAIL if terminated.error else RunState.COMPLETE
        self._deliver(
            [self._events.stream_event(state, pending.at_ms, stream.run, stream.lineage, error=terminated.error)]
        )

    def _read_plan(self, stream: _Stream, now_ms: int) -> None:
        """The datasets of the query's latest micro-batch; none before its first."""
        if stream.query is None:
            return
        try:
            execution = self._bridge.streams.last_execution(stream.query)
        except Exception as exc:  # noqa: BLE001 - the query is still reported, without datasets
            self._errors.report("reading a streaming query's plan", exc)
            return
        if execution is None:
            return
        captured = self._capture(PendingQuery(MICRO_BATCH, execution, now_ms, plans=_ANALYZED))
        if captured is None:
            return
        stream.lineage = self._analyze(captured)
        # Each batch's events are built from this one's capture, with the batch's own Spark jobs.
        stream.batch = dataclasses.replace(captured, tree=None, sql=None, capture_errors=[], jobs=())
        stream.query = None  # read once: every batch reads and writes the same datasets
