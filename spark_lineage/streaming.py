"""Structured Streaming queries as runs: one run per query, from its start to its termination, and a run per
micro-batch under it, as openlineage-spark reports micro-batches.

Spark's streaming listener tells when a query starts, makes progress and ends; no query listener hears a
micro-batch itself (it runs without an action name). So the datasets come from the plan of a micro-batch,
read once per query when its first batch has run: a query reads and writes the same datasets in every batch.

- START of the query's run when the query starts (no datasets are known yet);
- RUNNING with its sources and sink once the first batch's plan is read;
- per micro-batch that ran, START and COMPLETE of a run of its own, named like a batch query
  (``<app>.<physical root>[.<output>]``), with the rows the sink wrote;
- COMPLETE when the query stops or runs out of input, FAIL with the error when it fails.

A query's handle is taken when it starts (Spark forgets a query once it has ended), so even a query that
ends before the worker reads its first progress has its plan read.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from openlineage.client.event_v2 import RunEvent, RunState

from spark_lineage.config import ParentJob
from spark_lineage.events import EventBuilder, new_run_id
from spark_lineage.jvm import JvmBridge, PendingQuery, PendingStreamEvent, StreamEventKind
from spark_lineage.lineage import QueryLineage
from spark_lineage.plan import CapturedQuery
from spark_lineage.worker import ErrorLog

MICRO_BATCH = "micro_batch"
"""The action name a micro-batch is captured under (Spark gives it none)."""
_ANALYZED = ("analyzed",)
_STREAMS_KEPT = 1000


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
    ) -> None:
        self._bridge = bridge
        self._events = events
        self._capture = capture
        self._analyze = analyze
        self._deliver = deliver
        self._errors = errors
        self._streams: dict[str, _Stream] = {}

    def handle(self, pending: PendingStreamEvent) -> None:
        try:
            if pending.kind is StreamEventKind.STARTED:
                self._started(pending)
            elif pending.kind is StreamEventKind.PROGRESS:
                self._progress(pending)
            else:
                self._terminated(pending)
        finally:
            pending.event = None  # let the JVM free the event now

    def _started(self, pending: PendingStreamEvent) -> None:
        started = self._bridge.streams.started(pending.event)
        start_ms = iso_millis(started.timestamp) or pending.at_ms
        run = ParentJob(self._events.config.namespace, self._events.stream_job_name(started.name), new_run_id(start_ms))
        self._streams[started.query_id] = _Stream(run, self._bridge.streams.query(started.query_id))
        while len(self._streams) > _STREAMS_KEPT:  # queries whose end we never heard of
            self._streams.pop(next(iter(self._streams)))
        self._deliver([self._events.stream_event(RunState.START, start_ms, run, None)])

    def _progress(self, pending: PendingStreamEvent) -> None:
        progress = json.loads(self._bridge.streams.progress_json(pending.event))
        stream = self._streams.get(str(progress.get("id")))
        if stream is None:  # started before lineage was on
            return
        if stream.lineage is None:
            self._read_plan(stream, pending.at_ms)
            if stream.lineage is not None:
                self._deliver([self._events.stream_event(RunState.RUNNING, pending.at_ms, stream.run, stream.lineage)])
        batch = MicroBatch.from_progress(progress)
        if batch.ran and stream.batch is not None and stream.lineage is not None:
            query = dataclasses.replace(
                stream.batch,
                start_ms=batch.start_ms,
                end_ms=batch.end_ms,
                metrics={} if batch.output_rows is None else {"numOutputRows": batch.output_rows},
            )
            self._deliver(self._events.query_events(query, stream.lineage, parent=stream.run, streaming=True))

    def _terminated(self, pending: PendingStreamEvent) -> None:
        terminated = self._bridge.streams.terminated(pending.event)
        stream = self._streams.pop(terminated.query_id, None)
        if stream is None:
            return
        if stream.lineage is None:
            self._read_plan(stream, pending.at_ms)
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
        # Each batch's events are built from this one's capture, without its Spark jobs (a micro-batch's run has
        # no RUNNING event per job).
        stream.batch = dataclasses.replace(captured, tree=None, sql=None, capture_errors=[], jobs=())
        stream.query = None  # read once: every batch reads and writes the same datasets
