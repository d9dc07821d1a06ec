"""Lineage for one SparkSession: the listener, the two workers, the application run, and shutdown.

Threads involved, and what each may do:

- Spark's listener-bus thread calls :class:`~spark_lineage.jvm.QueryListener`, and
  :class:`~spark_lineage.jvm.JobSink` at the start and end of each RDD job that writes files, and at the end
  of one that writes nothing only if it failed, which only queue (a SQL execution's jobs, whose query run gets
  a RUNNING event per job, are kept in the JVM and read with their query);
- the *analysis* worker reads the JVM (through the bridge), analyzes, builds events and writes them to the
  spool (:mod:`spark_lineage.delivery`);
- the *sender* thread sends what the spool holds, in order, with one backoff per backend, so a slow or dead
  backend never holds up analysis and loses nothing;
- the *JVM watch* thread (:mod:`spark_lineage.jvm.watch`) waits for the JVM's process to end, and then ends
  the application runs of that JVM (:meth:`~spark_lineage.process.LineageProcess.jvm_ended`), with no JVM call.

What the process holds for all its sessions (their handles, the trimmers, the exit hooks) is
:mod:`spark_lineage.process`'s.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openlineage.client.event_v2 import RunEvent, RunState

from spark_lineage import analysis, costs, handlers, naming
from spark_lineage.config import LineageConfig
from spark_lineage.connect.sessions import ConnectSessions
from spark_lineage.costs import Stage
from spark_lineage.deadline import Deadline
from spark_lineage.delivery import Delivery, Held, undelivered
from spark_lineage.events import EventBuilder, new_run_id
from spark_lineage.facets import LOGICAL_PLAN_FACET, UNKNOWN_FACET
from spark_lineage.handlers.rdd import add_job_statistics, rdd_job_lineage
from spark_lineage.jvm import (
    SHAPE,
    CaptureRules,
    IcebergMetricsReporter,
    JobSink,
    JvmBridge,
    PendingJob,
    PendingQuery,
    PendingReport,
    PendingSessionEvent,
    PendingStreamEvent,
    QueryListener,
    SessionSink,
    StreamListener,
    TreeDetail,
)
from spark_lineage.lineage import AnalysisContext, QueryLineage
from spark_lineage.plan import (
    CapturedQuery,
    ConnectClient,
    ConnectSessionEnded,
    ConnectSessionStarted,
    RddJobEnd,
    RddJobStart,
    SessionInfo,
)
from spark_lineage.process import PROCESS, RunSummary, Runtime
from spark_lineage.redaction import Redactor
from spark_lineage.streaming import StreamTracker
from spark_lineage.worker import BoundedWorker, ErrorLog

if TYPE_CHECKING:
    from openlineage.client import OpenLineageClient

log = logging.getLogger("spark_lineage")

RECORD_CAPTURES_ENV = "SPARK_LINEAGE_RECORD_CAPTURES"
# Started RDD jobs whose end has not been seen are forgotten beyond this many (a lost end event).
_RDD_JOBS_KEPT = 10_000
# Iceberg reports nobody claims (a scan planned by a read-only action) are kept only this much.
_REPORTS_KEPT_PER_TABLE = 20
_TABLES_WITH_REPORTS_KEPT = 200
_REMOTE_CATALOG_TYPES = frozenset({"rest", "nessie", "glue"})
_DROPPED_LABELS: dict[type, str] = {
    PendingQuery: "(a query)",
    PendingSessionEvent: "(a query of another session)",
    PendingJob: "(a Spark job)",
    PendingStreamEvent: "(a streaming query's progress)",
}
"""What stands for the job of a run lost before its job had a name."""
_SHAPE_ONLY_BACKLOG = 0.5
"""When the analysis queue is fuller than this share of its size, queries are read without their expressions
(reported without column lineage), so that the worker catches up instead of dropping queries."""
"""A directory: when set, every captured query is also written there as JSON (how plan fixtures are made)."""


__all__ = ["LineageRuntime", "RunSummary", "SparkLineageHandle", "start_runtime"]
"""``RunSummary`` is :mod:`spark_lineage.process`'s, named here too."""

WorkItem = PendingQuery | PendingJob | PendingSessionEvent | PendingReport | Callable[[], object]
"""What the analysis worker is given: what the listeners queued, or a function to run on its thread."""


class SparkLineageHandle:
    """Controls lineage for one SparkSession; returned by :func:`spark_lineage.enable`. Keeps the
    :class:`~spark_lineage.handles.LineageHandle` protocol, as pyiceberg's handle does."""

    def __init__(self, runtime: Runtime | None) -> None:
        self._runtime = runtime

    @property
    def enabled(self) -> bool:
        return self._runtime is not None and self._runtime.active

    @property
    def app_run_id(self) -> str | None:
        """The run id of the application run that query runs point to as their parent."""
        return self._runtime.app_run_id if self._runtime else None

    @property
    def config(self) -> LineageConfig | None:
        return self._runtime.config if self._runtime else None

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Deliver everything queued so far: waits for Spark to hand over finished queries, analyzes them and
        sends their events. Returns False if ``timeout`` seconds were not enough (a backend that is down or
        slow): what was not sent waits in the spool and is sent later, or by ``spark-lineage replay``."""
        if self._runtime is None:
            return True
        return self._runtime.flush(timeout)

    def disable(self, timeout: float | None = None) -> bool:
        """Stop lineage for this session: unregister the listener, deliver what is queued, and complete the
        application run, waiting at most ``timeout`` seconds (default: ``python.shutdownTimeoutSeconds``). True
        if every event was delivered; what was not waits in the spool, and a warning says how to send it
        (``spark-lineage replay``). ``enable()`` again starts a new application run."""
        if self._runtime is None:
            return True
        return self._runtime.shutdown(RunState.COMPLETE, timeout=timeout)

    def __enter__(self) -> SparkLineageHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.disable()

    def __repr__(self) -> str:
        state = "enabled" if self.enabled else "disabled"
        return f"<spark_lineage handle {state} app_run_id={self.app_run_id}>"


class LineageRuntime:
    """The live machinery behind an enabled handle."""

    def __init__(
        self,
        bridge: JvmBridge,
        config: LineageConfig,
        client: OpenLineageClient,
        session: SessionInfo,
        redactor: Redactor,
        held: Held | None = None,
    ) -> None:
        """``held``: why nothing is sent (refused transport settings): events are spooled, for a replay."""
        self.bridge = bridge
        self.config = config
        self.client = client
        self.errors = ErrorLog()
        self.session = session
        self.started_ms = int(time.time() * 1000)
        self.app_run_id = config.application_run_id or new_run_id(self.started_ms)
        self.events = EventBuilder(config, self.session, self.app_run_id)
        self.context = AnalysisContext(session=self.session)
        self.active = False
        self.context_id = id(bridge.spark_context)
        self._shutdown_lock = threading.Lock()
        self._ended = threading.Event()
        """Set when :meth:`shutdown` has done all it does."""
        self._unread = 0
        """Finished queries and jobs that were not read: the JVM ended first."""
        self._record_dir = os.environ.get(RECORD_CAPTURES_ENV)
        self._recorded = 0
        self.analysis_worker: BoundedWorker[WorkItem] = BoundedWorker(
            "spark_lineage-analysis", self._analyze, config.queue_size, self.errors, on_drop=self._dropped
        )
        self.delivery = Delivery.configured(config, client, self.errors, redactor, held=held)
        self.listener = QueryListener(self.analysis_worker.submit, f"spark_lineage:{self.session.session_id}")
        # Streaming queries have a worker of their own: a query's handle must be taken while it runs, and a
        # short query may be over by the time a busy analysis worker would get to its start.
        self.stream_context = AnalysisContext(session=self.session)
        self.streams = StreamTracker(
            bridge,
            self.events,
            self._capture,
            lambda query: self._lineage(query, self.stream_context),
            self._deliver,
            self.errors,
            batch_jobs=analysis.reports_query_jobs(self.session.conf),
        )
        self.stream_worker: BoundedWorker[PendingStreamEvent] = BoundedWorker(
            "spark_lineage-streams", self._stream_event, config.queue_size, self.errors, on_drop=self._dropped
        )
        self.stream_listener = StreamListener(
            self.stream_worker.submit, f"spark_lineage-streams:{self.session.session_id}"
        )
        columns = config.column_lineage
        self._unknown_nodes = config.facet_enabled(UNKNOWN_FACET)
        """Whether queries list the plan nodes no handler knows (the ``spark_unknown`` facet)."""
        read_only_roots = analysis.read_only_roots(self.session.conf)
        self._capture_rules = CaptureRules(
            probes_for=handlers.probes_for,
            is_reported=lambda root, func: analysis.is_reported(
                root,
                func,
                filter_read_only=config.filter_read_only_actions,
                read_only_roots=read_only_roots,
                allowed=config.allowed_spark_nodes,
                denied=config.denied_spark_nodes,
            ),
            wants_metrics=analysis.wants_write_metrics,
            detail=TreeDetail(
                expressions=columns is not None,
                sql=columns is not None and columns.descriptions,
                output_types=self._unknown_nodes,
            ),
            max_plan_chars=columns.max_plan_chars if columns is not None else 0,
            logical_plan_json=config.facet_enabled(LOGICAL_PLAN_FACET) or self._unknown_nodes,
        )
        self.iceberg_reporter = IcebergMetricsReporter(self.analysis_worker.submit)
        self._shape_rules = replace(self._capture_rules, detail=SHAPE)
        self.job_sink = JobSink(self.analysis_worker.submit)
        self.session_sink = SessionSink(self.analysis_worker.submit)
        self.connect = ConnectSessions(self.events, self.session)
        """The Spark Connect sessions whose queries this runtime reports (heard on the listener bus)."""
        self._owns_session_listener = False
        self._iceberg_catalogs: list[str] = []
        """The Iceberg catalogs whose reporters get ours, in this session and in each Connect session."""
        self._rdd_jobs: dict[int, RddJobStart] = {}
        self._reports_query_jobs = analysis.reports_query_jobs(self.session.conf)
        self._owns_job_listener = False

    # --- lifecycle -----------------------------------------------------------------------------------------

    @property
    def jvm_gone(self) -> bool:
        return self.bridge.gone

    def owns_listener(self, name: str) -> bool:
        return bool(self.listener.toString() == name)

    def start(self) -> None:
        self.delivery.submit(self.events.application_event(RunState.START, self.started_ms))
        self.bridge.register_listener(self.listener)
        self.active = True
        # The one line that says lineage is on and where it goes (no secret: the destination has none, and
        # the log redaction applies anyway).
        log.info(
            "spark_lineage: lineage on for application %s (namespace %s); %s",
            self.events.app_job_name,
            self.config.namespace,
            self.delivery.description(),
        )
        try:
            self.bridge.register_stream_listener(self.stream_listener)
        except Exception as exc:  # noqa: BLE001 - batch lineage without streaming beats no lineage
            self.errors.report("adding the streaming query listener", exc)
        self._add_job_listener()
        if not self.config.iceberg_metrics_reporter_disabled:
            local: list[str] = []
            remote: list[str] = []
            self._iceberg_catalogs = iceberg_catalog_names(self.session.conf)
            for name in self._iceberg_catalogs:
                catalog = naming.IcebergCatalog.from_spark_conf(name, dict(self.session.conf))
                (remote if catalog is not None and catalog.type in _REMOTE_CATALOG_TYPES else local).append(name)
            if local:
                try:
                    self.bridge.install_iceberg_reporter(self.iceberg_reporter, local)
                except Exception as exc:  # noqa: BLE001 - lineage without Iceberg metrics beats no lineage
                    self.errors.report("adding the Iceberg metrics reporter", exc)
            if remote:
                # Starting a REST catalog asks its server for configuration: never on the caller's thread.
                self.analysis_worker.submit(lambda: self.bridge.install_iceberg_reporter(self.iceberg_reporter, remote))

    def flush(self, timeout: float | None, *, past_refusals: bool = True) -> bool:
        """Analyze and deliver what is queued within ``timeout``. Never raises: a JVM that cannot be drained
        (gone, stopping) is said once, and whatever was queued is still delivered. Without ``past_refusals``, a
        backend that refuses is not waited for (see :meth:`spark_lineage.delivery.sender.Sender.flush`)."""
        deadline = Deadline(timeout)
        if self.active:
            try:
                self.bridge.drain_listener_bus(deadline.millis())
            except Exception as exc:  # noqa: BLE001 - lineage's problem, never the caller's
                self.errors.report("draining Spark's listener bus", exc)
        analyzed = self.analysis_worker.flush(deadline.seconds())
        analyzed = self.stream_worker.flush(deadline.seconds()) and analyzed
        delivered = self.delivery.flush(deadline.seconds(), past_refusals=past_refusals)
        return analyzed and delivered

    def shutdown(
        self,
        state: RunState,
        *,
        timeout: float | None = None,
        error: str | None = None,
        stack: str | None = None,
        ending_first: bool = False,
    ) -> bool:
        """Unregister, drain, end the application run as ``state`` says, and close the client, all within the
        configured shutdown timeout. Never raises (it runs inside ``spark.stop()``, ``disable()``, exit hooks and
        signal handlers): whatever fails is said once; only the user's own Ctrl-C (a ``KeyboardInterrupt`` on this
        thread while it analyzes what was left) is raised on, once lineage has closed, but not at the process's
        exit (see :meth:`~spark_lineage.worker.BoundedWorker.raise_interrupt`). ``ending_first``: the
        process is dying, so the application run's terminal event is spooled before anything else, and a replay
        delivers it whatever happens next. Returns whether every event was delivered (what was not waits in the
        spool); True when already shut down."""
        with self._shutdown_lock:
            if not self.active:
                return True
            self.active = False
        try:
            return self._shut_down(state, timeout, error, stack, ending_first)
        except Exception as exc:  # noqa: BLE001 - no error of lineage's reaches the user's code
            self.errors.report("shutting lineage down", exc)
            return False
        finally:
            self._ended.set()

    def wait_ended(self, timeout: float) -> bool:
        """Wait until a shutdown under way (on another thread) has done all it does. False on timeout."""
        return self._ended.wait(timeout)

    def _shut_down(
        self, state: RunState, timeout: float | None, error: str | None, stack: str | None, ending_first: bool
    ) -> bool:
        deadline = Deadline(self.config.shutdown_timeout if timeout is None else timeout)
        ending = self.events.application_event(state, int(time.time() * 1000), error=error, stack=stack)
        if ending_first:
            self.delivery.submit(ending)
        try:
            self.bridge.drain_listener_bus(deadline.millis())
            self.bridge.unregister_listener()
        except Exception as exc:  # noqa: BLE001
            self.errors.report("unregistering the listener", exc)
        try:
            self.bridge.unregister_stream_listener()
        except Exception as exc:  # noqa: BLE001
            self.errors.report("unregistering the streaming query listener", exc)
        self._remove_job_listener()
        self.iceberg_reporter.active = False  # tables that still hold it report to nobody
        try:
            self.bridge.uninstall_iceberg_reporter()
        except Exception as exc:  # noqa: BLE001
            self.errors.report("restoring Iceberg metrics reporters", exc)
        # What waits for analysis is analyzed on this thread (see BoundedWorker.close), but on a dying process's
        # (a signal's handler, the JVM watch's), which leaves it to the workers' threads.
        take_over = not ending_first
        analyzed = self.analysis_worker.close(deadline.seconds(), take_over=take_over)
        analyzed = self.stream_worker.close(deadline.seconds(), take_over=take_over) and analyzed
        # Connect sessions still open end with the server: their runs are aborted.
        self._deliver(self.connect.end_all(RunState.ABORT, int(time.time() * 1000)))
        if not ending_first:
            self.delivery.submit(ending)
        delivered = self.delivery.close(deadline.seconds())
        if self._unread:
            log.warning("spark_lineage: %d lineage items went unreported: the JVM ended first", self._unread)
        self.errors.summarize(skip=undelivered)
        try:
            self.client.close(max(deadline.seconds() or 0.0, 0.0))
        except Exception as exc:  # noqa: BLE001
            self.errors.report("closing the transport", exc)
        PROCESS.remove(self)
        self.analysis_worker.raise_interrupt()
        self.stream_worker.raise_interrupt()
        return analyzed and delivered and not self._unread

    def _add_job_listener(self) -> None:
        """Listen to the SparkContext's jobs, unless another enabled session of the same context does: a job
        belongs to the context, not to a session, and is reported once."""
        with PROCESS.lock:
            if self.context_id in PROCESS.job_listener_owners:
                return
            PROCESS.job_listener_owners[self.context_id] = self
        try:
            self.bridge.add_job_listener(self.job_sink, rdd_jobs=not self.config.rdd_events_disabled)
            self._owns_job_listener = True
        except Exception as exc:  # noqa: BLE001 - SQL lineage without job events beats no lineage
            self.errors.report("adding the job listener", exc)
            with PROCESS.lock:
                PROCESS.job_listener_owners.pop(self.context_id, None)
            return
        if self.config.all_sessions:
            try:
                self.bridge.add_session_listener(self.session_sink)
                self._owns_session_listener = True
            except Exception as exc:  # noqa: BLE001 - this session's lineage without the others' beats none
                self.errors.report("adding the listener for the driver's other sessions", exc)

    def _remove_job_listener(self) -> None:
        if not self._owns_job_listener:
            return
        self._owns_job_listener = False
        try:
            self.bridge.remove_job_listener()
        except Exception as exc:  # noqa: BLE001
            self.errors.report("removing the job listener", exc)
        if self._owns_session_listener:
            self._owns_session_listener = False
            try:
                self.bridge.remove_session_listener()
            except Exception as exc:  # noqa: BLE001
                self.errors.report("removing the listener for the driver's other sessions", exc)
        with PROCESS.lock:
            if PROCESS.job_listener_owners.get(self.context_id) is self:
                del PROCESS.job_listener_owners[self.context_id]
            # Another enabled session of the same context takes the context's jobs over.
            heir = next(
                (
                    runtime
                    for runtime in PROCESS.live_runtimes()
                    if isinstance(runtime, LineageRuntime)
                    and runtime is not self
                    and runtime.active
                    and runtime.context_id == self.context_id
                ),
                None,
            )
        if heir is not None and not self.bridge.is_stopped():
            heir._add_job_listener()

    # --- worker steps --------------------------------------------------------------------------------------

    def _analyze(self, pending: WorkItem) -> None:
        if self.bridge.gone and not isinstance(pending, PendingSessionEvent):
            self._not_read()  # everything but a session's events is read from the JVM
            return
        if callable(pending):
            pending()
            return
        if isinstance(pending, PendingReport):
            with costs.stage(Stage.ICEBERG):
                self._keep_iceberg_report(pending)
            return
        if isinstance(pending, PendingJob):
            with costs.stage(Stage.RDD_JOBS):
                self._rdd_job(pending)
            return
        if isinstance(pending, PendingSessionEvent):
            with costs.stage(Stage.SESSIONS):
                self._session_event(pending)
            return
        self._report_query(pending)

    def _report_query(self, pending: PendingQuery) -> None:
        with costs.stage(Stage.CAPTURE):
            query = self._capture(pending)
        if query is None:
            return
        with costs.stage(Stage.ANALYSIS):
            stream = query.streaming_query  # a foreachBatch function's query reads its stream's sources
            self.context.stream_sources = self.streams.sources(stream) if stream else None
            if not self._reports_query_jobs:
                query.jobs = ()
            lineage = self._lineage(query, self.context)
        allowed = query.tree is not None and query.tree.simple_name in self.config.allowed_spark_nodes
        if self.config.filter_read_only_actions and query.succeeded and analysis.is_empty(lineage) and not allowed:
            return
        origin = pending.origin
        with costs.stage(Stage.EVENTS):
            if origin is None or origin.connect_session is None:
                events = self.events.query_events(query, lineage)
            else:
                identity = self.connect.for_query(origin, query.start_ms, self.bridge.query_session_conf)
                events = [
                    *identity.first,
                    *identity.builder.query_events(query, lineage, run_facets=identity.run_facets),
                ]
        self._deliver(events)

    def _session_event(self, pending: PendingSessionEvent) -> None:
        """A query of another session of the context (reported as this session's are), or a Spark Connect
        session's start, first operation or end."""
        if self.bridge.gone and pending.event is not None:
            self._not_read()
            return
        item = self.bridge.read_session_event(pending)
        if isinstance(item, PendingQuery):
            self._report_query(item)
        elif isinstance(item, ConnectSessionStarted):
            self._deliver(self.connect.started(item))
            if self._iceberg_catalogs and self.iceberg_reporter.active:
                try:
                    self.bridge.install_iceberg_reporter_in_connect_session(
                        self.iceberg_reporter, self._iceberg_catalogs, item.session_id, item.user
                    )
                except Exception as exc:  # noqa: BLE001 - the session's lineage without Iceberg metrics
                    self.errors.report("adding the Iceberg metrics reporter to a Connect session", exc)
        elif isinstance(item, ConnectClient):
            self._deliver(self.connect.client(item))
        elif isinstance(item, ConnectSessionEnded):
            self._deliver(self.connect.ended(item))

    def _capture(self, pending: PendingQuery) -> CapturedQuery | None:
        """A finished query as plain data (``None``: not reported), recorded when recording is on. Read without
        its expressions when the worker is far behind."""
        waiting = self.analysis_worker.backlog
        behind = waiting > self.analysis_worker.capacity * _SHAPE_ONLY_BACKLOG and self._capture_rules.detail != SHAPE
        try:
            query = self.bridge.capture(pending, self._shape_rules if behind else self._capture_rules)
        except Exception as exc:  # noqa: BLE001 - report the query anyway, with what went wrong
            if self.bridge.gone:  # the JVM ended while this query was read
                self._not_read()
                return None
            self.errors.report("capturing a query", exc)
            query = CapturedQuery(
                func_name=pending.func_name,
                start_ms=pending.end_ms,
                end_ms=pending.end_ms,
                tree=None,
                capture_errors=[f"capture failed: {exc}"],
            )
        finally:
            pending.query_execution = None  # let the JVM free the plan now
        if query is not None:
            if behind:
                query.capture_errors.append(
                    f"column lineage: not read, the analysis was behind ({waiting} items waiting, of "
                    f"python.queueSize={self.analysis_worker.capacity})"
                )
            self._record(query)
        return query

    def _stream_event(self, pending: PendingStreamEvent) -> None:
        if self.bridge.gone:
            self._not_read()
            return
        with costs.stage(Stage.STREAMS):
            self.streams.handle(pending)

    def _dropped(self, item: object, why: str) -> None:
        """A query or job the workers never got to: counted lost in the line that ends the process's lineage
        (what Spark reports beside them, Iceberg reports and session events, are no runs of their own)."""
        if isinstance(item, PendingSessionEvent) and item.event is None:
            return
        label = _DROPPED_LABELS.get(type(item))
        if label is not None:
            self.delivery.spool.lost(label, f"not analyzed: {why}")

    def _not_read(self) -> None:
        self._unread += 1

    def _lineage(self, query: CapturedQuery, context: AnalysisContext) -> QueryLineage:
        try:
            return analysis.analyze(query, context, self.config.column_lineage, unknown=self._unknown_nodes)
        except Exception as exc:  # noqa: BLE001
            self.errors.report("analyzing a query", exc)
            return QueryLineage(errors=[f"analysis failed: {exc!r}"])

    def _deliver(self, events: Sequence[RunEvent]) -> None:
        """Spool events together (one transaction: see :meth:`Delivery.submit_all`)."""
        PROCESS.finished(events)
        self.delivery.submit_all(events)

    def _rdd_job(self, pending: PendingJob) -> None:
        """Keep a job's start until its end; then report it, as openlineage-spark does, if it wrote files or
        failed (its START is sent then, with the time it started)."""
        read = self.bridge.read_job(pending)
        if isinstance(read, RddJobStart):
            self._rdd_jobs[read.job_id] = read
            while len(self._rdd_jobs) > _RDD_JOBS_KEPT:
                self._rdd_jobs.pop(next(iter(self._rdd_jobs)))
            return
        if isinstance(read, RddJobEnd):
            job, start = read, self._rdd_jobs.pop(read.job_id, None)
            if start is None:
                return
        else:
            start, job = read  # a job that writes nothing, passed on only as it failed
        lineage = rdd_job_lineage(start)
        if not lineage.outputs and job.error is None:
            return  # an action that writes nothing: count(), collect(), Spark's own listing jobs
        if job.error is None:
            try:
                io = self.bridge.read_job_io(job.job_id)
            except Exception as exc:  # noqa: BLE001 - the run without statistics beats no run
                self.errors.report("reading an RDD job's task metrics", exc)
            else:
                add_job_statistics(lineage, io)
        self._deliver(self.events.rdd_job_events(start, job, lineage))

    def _keep_iceberg_report(self, pending: PendingReport) -> None:
        """Hold an Iceberg report for the query that caused it: Iceberg reports during the query, Spark calls
        our listener after it, and both reach this worker in that order."""
        try:
            kind, text = self.bridge.iceberg_report_json(pending)
        except Exception as exc:  # noqa: BLE001
            self.errors.report("reading an Iceberg metrics report", exc)
            return
        finally:
            pending.report = None
        report = json.loads(text)
        store = self.context.iceberg_commits if kind == "commit" else self.context.iceberg_scans
        waiting = store.setdefault(str(report.get("table-name")), [])
        waiting.append(report)
        del waiting[:-_REPORTS_KEPT_PER_TABLE]
        while len(store) > _TABLES_WITH_REPORTS_KEPT:
            store.pop(next(iter(store)))

    def _record(self, query: CapturedQuery) -> None:
        if not self._record_dir:
            return
        try:
            directory = Path(self._record_dir)
            directory.mkdir(parents=True, exist_ok=True)
            # funcName is free text (Delta names its log-state caches after the table's path): keep it a file name.
            # Queries may end in the same millisecond: a sequence number keeps each, in the order they came.
            self._recorded += 1
            func = re.sub(r"[^A-Za-z0-9_.-]+", "_", query.func_name)[:80]
            name = f"{query.end_ms}-{self._recorded:06d}-{func}.json"
            # Recorded plans carry no Spark jobs, as they never did: the unit tests give each the jobs they test.
            recorded = replace(query, jobs=()).to_dict()
            (directory / name).write_text(json.dumps(recorded, indent=2, sort_keys=True))
        except Exception as exc:  # noqa: BLE001
            self.errors.report("recording a capture", exc)


def iceberg_catalog_names(conf: Mapping[str, str]) -> list[str]:
    """The Spark catalogs the configuration makes Iceberg catalogs."""
    names = []
    for key, value in conf.items():
        if key.startswith("spark.sql.catalog.") and key.count(".") == 3 and value in naming.ICEBERG_SPARK_CATALOGS:
            names.append(key.rsplit(".", 1)[-1])
    return sorted(names)


def start_runtime(session_key: str, runtime: LineageRuntime, spark_context: Any) -> SparkLineageHandle:
    """Start a session's lineage, registered with the process (:data:`~spark_lineage.process.PROCESS`) first, so
    that its trimmers apply to its first query and the process's exit ends it."""
    with PROCESS.lock:
        handle = SparkLineageHandle(runtime)
        PROCESS.add(session_key, handle, spark_context)
        try:
            runtime.start()
        except BaseException:
            PROCESS.remove(runtime)
            raise
        runtime.bridge.watch_jvm(PROCESS.jvm_ended)
        return handle
