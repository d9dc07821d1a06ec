"""The bridge to one SparkSession's JVM: session facts, the query listener, and Spark's listener bus.

The bridge is made for every new session the start-up hook sees, so making one costs nothing: the readers
behind :meth:`JvmBridge.capture` and the Iceberg reporter are created on first use.

Once the JVM has ended (:meth:`JvmBridge.watch_jvm`, :attr:`JvmBridge.gone`), the bridge makes no JVM call:
the context counts as stopped, so shutdown skips every JVM step, and reads raise :class:`JvmGoneError` at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any

from spark_lineage import costs
from spark_lineage.costs import Stage
from spark_lineage.errors import JvmError, JvmGoneError
from spark_lineage.jvm import watch
from spark_lineage.jvm.iceberg import IcebergMetricsReporter, IcebergReporterInstaller, PendingReport
from spark_lineage.jvm.listener import JobListener, JobSink, PendingJob, RddJobReader
from spark_lineage.jvm.sessions import (
    PendingSessionEvent,
    SessionListener,
    SessionSink,
    our_listeners,
    read_session_event,
)
from spark_lineage.jvm.spark import CaptureRules, PendingQuery, QueryReader, read_session_conf
from spark_lineage.jvm.streaming import StreamListener, StreamReader
from spark_lineage.jvm.values import JavaCallback, JvmClasses, release, safe, unwrap_option
from spark_lineage.plan import (
    CapturedQuery,
    ConnectClient,
    ConnectSessionEnded,
    ConnectSessionStarted,
    JobIo,
    RddJobEnd,
    RddJobStart,
    SessionInfo,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

_QUERY_LISTENER = "org.apache.spark.sql.util.QueryExecutionListener"


class QueryListener(JavaCallback):
    """A ``QueryExecutionListener`` implemented in Python. Spark calls it on its listener-bus thread; it only
    hands a :class:`PendingQuery` to ``sink`` and returns, and never lets an exception escape into Spark."""

    def __init__(self, sink: Callable[[PendingQuery], object], name: str) -> None:
        super().__init__(name)
        self._sink = sink
        self.calls = 0
        """How many queries Spark has reported to this listener."""

    def onSuccess(self, funcName: str, qe: Any, durationNs: int) -> None:
        self.calls += 1
        try:
            with costs.stage(Stage.LISTENER):
                self._sink(PendingQuery(funcName, qe, int(time.time() * 1000), duration_ns=int(durationNs)))
        except BaseException:
            log.debug("spark_lineage listener could not queue a query", exc_info=True)

    def onFailure(self, funcName: str, qe: Any, exception: Any) -> None:
        self.calls += 1
        try:
            with costs.stage(Stage.LISTENER):
                self._sink(PendingQuery(funcName, qe, int(time.time() * 1000), exception=exception))
        except BaseException:
            log.debug("spark_lineage listener could not queue a failed query", exc_info=True)

    class Java:
        implements = [_QUERY_LISTENER]


class JvmBridge:
    """All JVM access for one SparkSession."""

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark
        self._jsession = spark._jsparkSession
        self._sc = spark.sparkContext
        self._gateway = self._sc._gateway
        self._classes = JvmClasses(self._sc._jvm)
        self._listener_handle: Any = None
        self._readers: dict[int, QueryReader] = {}
        """One per thread that captures (the analysis and streaming workers): a reader is not thread-safe."""
        self._iceberg: IcebergReporterInstaller | None = None
        self._job_listener: JobListener | None = None
        self._session_listener: SessionListener | None = None
        self._jobs: RddJobReader | None = None

    @property
    def spark_context(self) -> Any:
        return self._sc

    # --- session -------------------------------------------------------------------------------------------

    @cached_property
    def session_key(self) -> str:
        """Identifies the JVM session (not the Python wrapper), so one session gets one handle. Asked once: it
        never changes."""
        try:
            return str(self._jsession.sessionUUID())
        except Exception:  # noqa: BLE001 - older or unusual sessions: fall back to the JVM object identity
            return f"session-{self._jsession.hashCode()}"

    def session_info(self, conf: dict[str, str] | None = None) -> SessionInfo:
        """The session's identity and confs; ``conf`` when the caller has just read them."""
        jsc = self._sc._jsc.sc()
        conf = self.session_conf() if conf is None else conf
        return SessionInfo(
            app_name=str(jsc.appName()),
            app_id=str(jsc.applicationId()),
            spark_version=str(jsc.version()),
            master=str(jsc.master()),
            warehouse=conf.get("spark.sql.warehouse.dir"),
            user=safe(lambda: str(jsc.sparkUser())),
            deploy_mode=conf.get("spark.submit.deployMode", "client"),
            driver_host=conf.get("spark.driver.host"),
            ui_url=safe(lambda: unwrap_option(jsc.uiWebUrl(), getattr(self._classes("scala.Predef"), "$conforms")())),
            session_id=self.session_key,
            conf=conf,
        )

    def session_conf(self) -> dict[str, str]:
        """Every conf the session sees: SparkConf entries and runtime settings."""
        return read_session_conf(self._jsession)

    def redaction_regex(self) -> str | None:
        """``spark.redaction.regex`` as the session has it (``None``: Spark's default)."""
        value = self._jsession.conf().get("spark.redaction.regex", None)
        return None if value is None else str(value)

    # --- the JVM's end -------------------------------------------------------------------------------------

    def watch_jvm(self, on_end: Callable[[], None]) -> bool:
        """Call ``on_end`` (once, from a daemon thread) when the JVM's process ends, however it ends; from then
        on :attr:`gone` is true. Returns whether the JVM is watched. Never raises."""
        return watch.watch(self._gateway, on_end)

    @property
    def gone(self) -> bool:
        """The JVM has ended: the bridge makes no JVM call any more."""
        return watch.ended(self._gateway)

    def _alive(self) -> None:
        if self.gone:
            raise JvmGoneError

    def is_stopped(self) -> bool:
        if self.gone:
            return True
        try:
            return bool(self._sc._jsc is None or self._sc._jsc.sc().isStopped())
        except Exception:  # noqa: BLE001 - a dead gateway is a stopped context
            return True

    def drain_listener_bus(self, timeout_ms: int) -> bool:
        """Wait until Spark has delivered every queued listener event (so every finished query has reached our
        callback). Returns False on timeout or when the context is gone."""
        if self.is_stopped():
            return False
        try:
            self._sc._jsc.sc().listenerBus().waitUntilEmpty(int(timeout_ms))
            return True
        except Exception:  # noqa: BLE001 - a TimeoutException is a normal outcome here
            return False

    # --- listener ------------------------------------------------------------------------------------------

    def register_listener(self, listener: QueryListener) -> None:
        from pyspark.java_gateway import ensure_callback_server_started

        ensure_callback_server_started(self._gateway)  # type: ignore[no-untyped-call]
        # Each time a Python object crosses to Java it gets a new proxy, and unregister matches by identity:
        # keep one JVM-side handle and use it for both calls.
        holder = self._classes("java.util.ArrayList")()
        holder.add(listener)
        handle = holder.get(0)
        self._jsession.listenerManager().register(handle)
        self._listener_handle = handle
        # The session listener leaves the queries of sessions that call one of ours to that one.
        our_listeners(self._gateway, self._classes).add(handle, self.session_key)

    def listener_names(self) -> list[str]:
        """The names (``toString``) of the query listeners this session calls. Spark copies a session's
        listeners into its clones: a stream runs on a clone of the session that started it, and
        ``foreachBatch`` wraps that clone in a new Python session."""
        # Our listeners come back from Java as proxies, not as themselves: their names tell them apart.
        return [str(listener.toString()) for listener in self._jsession.listenerManager().listListeners()]

    def unregister_listener(self) -> None:
        handle, self._listener_handle = self._listener_handle, None
        if handle is not None and not self.is_stopped():
            self._jsession.listenerManager().unregister(handle)
            our_listeners(self._gateway, self._classes).discard(handle, self.session_key)

    # --- streaming queries ---------------------------------------------------------------------------------

    @cached_property
    def streams(self) -> StreamReader:
        """Streaming query events and queries of this session."""
        return StreamReader(self._jsession, self._gateway, self._classes)

    def register_stream_listener(self, listener: StreamListener) -> None:
        self.streams.register(listener)

    def unregister_stream_listener(self) -> None:
        if not self.is_stopped():
            self.streams.unregister()

    # --- Spark jobs: SQL executions' (kept in the JVM for their query), RDD actions' -------------------------

    def add_job_listener(self, sink: JobSink, rdd_jobs: bool = True) -> None:
        """Add the Spark listener that keeps each SQL execution's jobs in the JVM for its query's read, and with
        ``rdd_jobs`` hands ``sink`` the start and end of each job that is none (:mod:`spark_lineage.jvm.listener`)."""
        listener = JobListener(self._sc, self._gateway, self._classes, sink, rdd_jobs)
        listener.install()
        self._job_listener = listener

    def remove_job_listener(self) -> None:
        listener, self._job_listener = self._job_listener, None
        if listener is not None and not self.gone:
            listener.remove()

    # --- every other session of the context (Spark Connect's) ---------------------------------------------

    def add_session_listener(self, sink: SessionSink) -> None:
        """Add the Spark listener that hands ``sink`` the queries of the sessions none of our query listeners
        hears, and Spark Connect's session events (:mod:`spark_lineage.jvm.sessions`)."""
        listener = SessionListener(self._sc, self._gateway, self._classes, sink)
        listener.install()
        self._session_listener = listener

    def remove_session_listener(self) -> None:
        listener, self._session_listener = self._session_listener, None
        if listener is not None and not self.gone:
            listener.remove()

    def read_session_event(
        self, pending: PendingSessionEvent
    ) -> PendingQuery | ConnectSessionStarted | ConnectSessionEnded | ConnectClient | None:
        """What a queued session event says; a query as a :class:`PendingQuery` of its own session (read from
        the JVM: the other events are text alone, read even once the JVM has ended)."""
        if pending.event is not None:
            self._alive()
        return read_session_event(pending)

    def query_session_conf(self) -> dict[str, str]:
        """Every conf the session of the query this thread captured last sees (one round trip)."""
        self._alive()
        return self._reader().session_conf()

    def read_job(self, pending: PendingJob) -> RddJobStart | RddJobEnd | tuple[RddJobStart, RddJobEnd]:
        """What a queued job event holds, as plain data (and the JVM references it held dropped): a start, an
        end, or both, for a job that writes nothing and failed."""
        self._alive()
        return self._job_reader().read(pending)

    def read_job_io(self, job_id: int) -> JobIo:
        """What an ended job's tasks read and wrote (see :meth:`RddJobReader.read_io`)."""
        self._alive()
        return self._job_reader().read_io(job_id)

    def _job_reader(self) -> RddJobReader:
        if self._jobs is None:
            self._jobs = RddJobReader(self._classes, self._sc._jsc.sc())
        return self._jobs

    # --- queries -------------------------------------------------------------------------------------------

    def capture(self, pending: PendingQuery, rules: CaptureRules) -> CapturedQuery | None:
        """Read a finished query (see :meth:`spark_lineage.jvm.spark.QueryReader.capture`)."""
        self._alive()
        reader = self._reader(rules)
        try:
            if pending.origin is None:
                reader.use_session(lambda: self._jsession, self.session_key)
            else:
                reader.use_session(pending.query_execution.sparkSession, pending.origin.session_uuid)
            return reader.capture(pending, rules)
        finally:
            release(pending.query_execution, pending.exception)
            pending.query_execution = pending.exception = None

    def _reader(self, rules: CaptureRules | None = None) -> QueryReader:
        reader = self._readers.get(threading.get_ident())
        if reader is None:
            if rules is None:
                raise JvmError("no query was captured on this thread")
            reader = QueryReader(self._jsession, self._gateway, self._classes, rules.probes_for)
            self._readers[threading.get_ident()] = reader
        return reader

    # --- Iceberg metrics reporter --------------------------------------------------------------------------

    def install_iceberg_reporter(self, reporter: IcebergMetricsReporter, catalog_names: list[str]) -> list[str]:
        self._alive()
        return self._iceberg_installer().install(reporter, catalog_names)

    def install_iceberg_reporter_in_connect_session(
        self, reporter: IcebergMetricsReporter, catalog_names: list[str], session_id: str, user: str
    ) -> list[str]:
        """Add the reporter to the Iceberg catalogs of a Spark Connect session (each session has catalogs of its
        own); nothing when the session is gone already."""
        self._alive()
        service = getattr(self._classes("org.apache.spark.sql.connect.service.SparkConnectService$"), "MODULE$")
        try:
            manager = service.sessionManager()
        except Exception:  # noqa: BLE001 - Spark 3.5 keeps its sessions in the service itself
            session = service.getIsolatedSession(user, session_id).session()
        else:
            key = self._classes("org.apache.spark.sql.connect.service.SessionKey")(user, session_id)
            holder = manager.getIsolatedSessionIfPresent(key)
            if not bool(holder.isDefined()):
                return []
            session = holder.get().session()
        return self._iceberg_installer().install(reporter, catalog_names, session)

    def uninstall_iceberg_reporter(self) -> None:
        if self._iceberg is not None:
            self._iceberg.uninstall(context_stopped=self.is_stopped())

    def iceberg_report_json(self, pending: PendingReport) -> tuple[str, str]:
        self._alive()
        return self._iceberg_installer().report_json(pending)

    def _iceberg_installer(self) -> IcebergReporterInstaller:
        if self._iceberg is None:
            self._iceberg = IcebergReporterInstaller(self._jsession, self._classes)
        return self._iceberg
