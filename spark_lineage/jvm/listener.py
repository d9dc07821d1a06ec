"""A Spark listener that passes Python only the RDD jobs that write files or fail, and keeps SQL executions' jobs.

A listener written in Python would be called over py4j for every listener event Spark posts: each task's
start and end, metrics updates, block updates (thousands of round trips for a job of a thousand tasks). This
one is a ``java.lang.reflect.Proxy`` of ``SparkListenerInterface`` whose invocation handler is composed of
method handles (:mod:`spark_lineage.jvm.method_handles`), so every event is filtered in the JVM:

- a job whose properties carry no SQL execution id (an RDD action) is told apart at its start, by the closure
  of its final stage: only a Hadoop save's (``SparkHadoopWriter``'s) writes files. Spark's ``ActiveJob`` for
  it is captured in the JVM at once (Spark forgets it when the job ends, and a short job may end before Python
  could ask). A job that writes files is passed to Python at its start, its id, time and properties as one
  text with that ``ActiveJob``, and at its end, as text (its id, time and outcome), or as the end event when
  it failed (for its exception). A job that writes nothing (``count()``, Spark's own parquet footer reads),
  which openlineage-spark reports only if it fails, is not passed at its start: the JVM keeps its start's
  text and its ``ActiveJob`` until it ends (:data:`RDD_JOBS_KEPT` jobs at most, should Spark drop the events
  that end them), and calls Python only if it failed, once, with its end event and what it kept;
- the start and end of a job of a SQL execution are kept in the JVM as text (the job's id, time and
  properties, and the id of the ``QueryExecution`` running it; at its end, its id, time and outcome), filed
  under its query (:mod:`spark_lineage.jvm.sql_jobs`), which takes them when it is read: the query's run gets a
  RUNNING event per job, and Python is not called.

The Python side only queues (:class:`JobSink`; what it is passed: :class:`PendingJob`); :class:`RddJobReader`
reads what a queued RDD job holds on the analysis thread, as plain data, and :func:`read_sql_job` what a SQL
job's text says. So a job that writes nothing and succeeds, the usual RDD job, costs Python nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from spark_lineage import costs
from spark_lineage.costs import Stage
from spark_lineage.jvm.method_handles import HandleBuilder
from spark_lineage.jvm.rdd import RddGraphReader
from spark_lineage.jvm.sql_jobs import SqlJobHandles, SqlJobStore, job_texts, sql_job_store
from spark_lineage.jvm.values import JvmClasses, message, safe
from spark_lineage.jvm.wire import JOB_END_FIELDS, JOB_PROPERTIES, JobMarker, JobStartField, Separator
from spark_lineage.plan import (
    JobIo,
    QueryJob,
    RddJobEnd,
    RddJobStart,
    SparkJobDetails,
    SqlJobEnd,
    SqlJobStart,
)
from spark_lineage.query_jobs import QueryJobLog

log = logging.getLogger(__name__)

_JOB_START = "org.apache.spark.scheduler.SparkListenerJobStart"
_JOB_END = "org.apache.spark.scheduler.SparkListenerJobEnd"
_LISTENER = "org.apache.spark.scheduler.SparkListenerInterface"
_SQL_EXECUTION_ID = "spark.sql.execution.id"
_EXECUTION_END = "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd"
_SQL_EXECUTION = "org.apache.spark.sql.execution.SQLExecution"
_QUERY_EXECUTION = "org.apache.spark.sql.execution.QueryExecution"
_OUTPUT_DIR = "mapreduce.output.fileoutputformat.outputdir"
"""Where both Hadoop output APIs keep a file output's directory (``FileOutputFormat.setOutputPath``)."""
_WRITE_CONFIGS = ("HadoopMapRedWriteConfigUtil", "HadoopMapReduceWriteConfigUtil")
STATUS_STORE_WAIT_SECONDS = 1.0
"""How long an RDD job's end waits for the status store to have heard it too, for the job's statistics."""
_CAPTURED_ARGUMENTS = 4
"""How many of a write closure's captured values are looked at for the write's configuration."""
_HADOOP_WRITER = "org.apache.spark.internal.io.SparkHadoopWriter"
"""The class whose closures are the jobs of a Hadoop save: the only RDD jobs that write files. Every other
job's closure is some other class's (``collect``, ``count``, Spark's own parquet footer reads)."""
_ACTIVE_JOB = "org.apache.spark.scheduler.ActiveJob"
_RESULT_STAGE = "org.apache.spark.scheduler.ResultStage"
_JOB_SUCCEEDED = "org.apache.spark.scheduler.JobSucceeded$"
RDD_JOBS_KEPT = 1_000
"""Started RDD jobs the JVM keeps until their end: all are forgotten beyond this many (ends Spark dropped).
Each one that writes nothing holds its ``ActiveJob``, and with it its RDDs, so fewer than SQL jobs."""


@dataclass
class PendingJob:
    """What the listener passes the sink of an RDD job, as it passed it, nothing read yet; one of:

    - the start of a job that writes files: its start's text (the job's id, time and properties, as
      :meth:`_ListenerBuilder._start_text` joins them), and the ``Option`` of its ``ActiveJob``;
    - the end of a job that writes files: its end's text (the job's id, time and the class of its result, as
      :meth:`_ListenerBuilder._end_text` joins them) when it succeeded, its ``SparkListenerJobEnd`` when it
      failed; and ``JobMarker.END``;
    - the end of a job that writes nothing and failed (its start was not passed): its ``SparkListenerJobEnd``,
      and what the JVM kept of its start, the list ``[start's text, Option of its ActiveJob]``.

    Told apart by the Python types py4j gives (a string crosses as ``str``, a JVM object as a reference), which
    costs no JVM call.
    """

    event: Any
    """A text, or a ``SparkListenerJobEnd``."""
    extra: Any = None
    """The ``Option`` of a start's ``ActiveJob``, ``JobMarker.END`` (:mod:`~spark_lineage.jvm.wire`), or what the
    JVM kept of a failed job's start."""

    @property
    def is_start(self) -> bool:
        return isinstance(self.event, str) and not isinstance(self.extra, str)

    @property
    def is_unseen_failure(self) -> bool:
        """The end of a failed job whose start was not passed (it writes nothing), with what it kept of it."""
        return not isinstance(self.event, str) and not isinstance(self.extra, str)


@dataclass(frozen=True)
class PendingSqlJob:
    """The start or end of a job of a SQL execution, as the JVM wrote it: plain text, read without the JVM."""

    text: str


class JobSink:
    """The Python end of the listener: queues what the JVM passes and returns. Never raises into Spark."""

    def __init__(self, submit: Callable[[PendingJob], object]) -> None:
        self._submit = submit
        self.calls = 0

    def accept(self, event: Any, extra: Any) -> None:
        self.calls += 1
        try:
            with costs.stage(Stage.JOB_LISTENER):
                self._submit(PendingJob(event, extra))
        except BaseException:
            log.debug("spark_lineage could not queue a job event", exc_info=True)

    class Java:
        implements = ["java.util.function.BiConsumer"]


class BusListener:
    """A listener of ours on one SparkContext's listener bus, handing what it hears to a Python sink: installed
    and removed through the bus."""

    def __init__(self, spark_context: Any, gateway: Any, classes: JvmClasses, sink: Any) -> None:
        self._jsc = spark_context._jsc.sc()
        self._gateway = gateway
        self._classes = classes
        self._sink = sink
        self._listener: Any = None

    def install(self) -> None:
        from pyspark.java_gateway import ensure_callback_server_started

        ensure_callback_server_started(self._gateway)  # type: ignore[no-untyped-call]
        # One JVM-side handle on the sink: every crossing of the Python object would make another proxy.
        holder = self._classes("java.util.ArrayList")()
        holder.add(self._sink)
        self._listener = self._build(holder.get(0))
        self._jsc.addSparkListener(self._listener)

    def _build(self, sink: Any) -> Any:
        """The listener proxy, handing what it hears to ``sink`` (the sink's JVM-side handle)."""
        raise NotImplementedError

    def remove(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None and not bool(safe(self._jsc.isStopped)):
            self._jsc.removeSparkListener(listener)


class JobListener(BusListener):
    """The filtering job listener of one SparkContext."""

    def __init__(
        self, spark_context: Any, gateway: Any, classes: JvmClasses, sink: JobSink, rdd_jobs: bool = True
    ) -> None:
        super().__init__(spark_context, gateway, classes, sink)
        self._rdd_jobs = rdd_jobs
        """Whether jobs that are no SQL execution are passed on too (``filter.rddEventsDisabled`` says not)."""
        self.rdd_jobs_started: Any = None
        """Job id -> what an RDD job's end needs from its start, until it ends (a JVM map; see
        :meth:`_ListenerBuilder._rdd_start`)."""

    def _build(self, sink: Any) -> Any:
        jobs = self._jsc.dagScheduler().jobIdToActiveJob()
        store = sql_job_store(self._gateway, self._classes)
        self.rdd_jobs_started = self._classes("java.util.concurrent.ConcurrentHashMap")()
        return _ListenerBuilder(self._gateway, self._classes).build(
            sink, jobs, store, self.rdd_jobs_started, self._rdd_jobs
        )


class ListenerProxyBuilder(HandleBuilder):
    """Composes a ``SparkListenerInterface`` proxy whose ``InvocationHandler.invoke(proxy, method, args)`` runs
    one handle per listener method, in the JVM, whatever it throws; the listeners of this package are built on
    it."""

    def proxy(self, methods: dict[str, Any], name: str) -> Any:
        """The listener: ``methods`` maps a listener method's name to ``(event) -> void``; every other method
        does nothing. ``name`` is what its ``toString`` says."""
        none = self.mh.constant(self.OBJ, None)
        identity_hash = self._boxed(self._method("java.lang.System", "identityHashCode", "java.lang.Object"))
        # Spark removes listeners by reference (``eq``); equals must not call back into the handler.
        same = self.mh.filterArguments(
            self._method("java.util.Objects", "equals", "java.lang.Object", "java.lang.Object"),
            0,
            self._handles(identity_hash, identity_hash),
        )
        equals = self.mh.dropArguments(
            self._boxed(self.mh.filterArguments(same, 1, self._handles(self._first_argument()))),
            1,
            self._types(self.OBJ),
        )
        cases = [(self._named(method), self._on_first_argument(branch)) for method, branch in methods.items()]
        cases += [
            (self._named("hashCode"), self.mh.dropArguments(identity_hash, 1, self._types(self.OBJ, self.OBJ))),
            (self._named("equals"), equals),
            (
                self._named("toString"),
                self.mh.dropArguments(self.mh.constant(self.OBJ, name), 0, self._types(self.OBJ, self.OBJ, self.OBJ)),
            ),
        ]
        handler = self._choose(cases, self.mh.dropArguments(none, 0, self._types(self.OBJ, self.OBJ, self.OBJ)))
        invocation = self._classes.java_class("java.lang.reflect.InvocationHandler")
        invoke = self._classes("java.lang.invoke.MethodHandleProxies").asInterfaceInstance(invocation, handler)
        interface = self._classes.java_class(_LISTENER)
        return self._classes("java.lang.reflect.Proxy").newProxyInstance(
            interface.getClassLoader(), self._types(interface), invoke
        )

    def _first_argument(self) -> Any:
        """``(Object[] args) -> Object``: ``args[0]``."""
        return self.mh.insertArguments(
            self.mh.arrayElementGetter(self._classes.java_class("[Ljava.lang.Object;")), 1, self._objects(0)
        ).asType(self._method_type(self.OBJ, self.OBJ))

    def _on_first_argument(self, branch: Any) -> Any:
        """``(proxy, method, args) -> null`` running ``branch(args[0])``, whatever it throws."""
        none = self.mh.constant(self.OBJ, None)
        returning_null = self.mh.filterReturnValue(
            self.mh.filterArguments(branch, 0, self._handles(self._first_argument())), none
        )
        throwable = self._classes.java_class("java.lang.Throwable")
        guarded = self.mh.catchException(
            returning_null, throwable, self.mh.dropArguments(none, 0, self._types(throwable, self.OBJ))
        )
        return self.mh.dropArguments(guarded, 0, self._types(self.OBJ, self.OBJ))

    def _named(self, name: str) -> Any:
        """``(proxy, method, args) -> boolean``: whether the method called is ``name``."""
        is_name = self._after(
            self._method("java.lang.reflect.Method", "getName"),
            self.mh.insertArguments(
                self._method("java.lang.String", "equals", "java.lang.Object"), 1, self._objects(name)
            ),
        )
        return self.mh.dropArguments(self.mh.dropArguments(is_name, 0, self._types(self.OBJ)), 2, self._types(self.OBJ))

    def _boxed(self, handle: Any) -> Any:
        return handle.asType(handle.type().changeReturnType(self.OBJ))

    def _accept(self, sink: Any) -> Any:
        """``(Object, Object) -> void``: hand both to the Python sink."""
        return self.mh.insertArguments(
            self._method("java.util.function.BiConsumer", "accept", "java.lang.Object", "java.lang.Object"),
            0,
            self._objects(sink),
        )

    def _ignore(self) -> Any:
        return self.mh.empty(self._method_type(self.VOID, self.OBJ))


class _ListenerBuilder(ListenerProxyBuilder, SqlJobHandles):
    """Composes the filtering job listener."""

    def build(self, sink: Any, jobs: Any, store: SqlJobStore, started: Any, rdd_jobs: bool = True) -> Any:
        """The listener: ``jobs`` is Spark's map of its ``ActiveJob``s, ``started`` an empty map in which RDD
        jobs are kept from their start to their end."""
        return self.proxy(
            {
                "onJobStart": self._on_start(sink, jobs, started, store, rdd_jobs),
                "onJobEnd": self._on_end(sink, started, store),
                "onOtherEvent": self._choose(
                    [(self._is(_EXECUTION_END), self.ending_execution(store))], otherwise=self._ignore()
                ),
            },
            "spark_lineage job listener",
        )

    def _job_id(self, event_class: str) -> Any:
        """``(event) -> Integer``: the job id, boxed as Spark's job map and ours key it."""
        return self._boxed(self._method(event_class, "jobId"))

    def _on_start(self, sink: Any, jobs: Any, started: Any, store: SqlJobStore, rdd_jobs: bool) -> Any:
        """``(SparkListenerJobStart) -> void``: for a job that is no SQL execution, keep what its end needs in
        ``started`` and pass its start on if it writes files (:meth:`_rdd_start`); file a SQL execution's job's
        text, with the id of the query running it, under that query."""
        execution_id = self._property(_SQL_EXECUTION_ID)
        query_id = self._query_id(execution_id)
        sql_text = self._start_text(query_id, execution_id)
        return self.mh.guardWithTest(
            self._outside_sql(),
            self._rdd_start(sink, jobs, started) if rdd_jobs else self._ignore(),
            self.filing_start(store, sql_text, query_id, execution_id, self._job_id(_JOB_START)),
        )

    def _outside_sql(self) -> Any:
        """``(SparkListenerJobStart) -> boolean``: whether the job is no SQL execution's (an RDD action): its
        properties carry no SQL execution id."""
        is_null = self._is_null()
        return self.mh.guardWithTest(
            self._after(self._method(_JOB_START, "properties"), is_null),
            self._constant(True),
            self._after(self._property(_SQL_EXECUTION_ID), is_null),
        )

    def _rdd_start(self, sink: Any, jobs: Any, started: Any) -> Any:
        """``(SparkListenerJobStart) -> void`` for a job that is no SQL execution, with the ``Option`` of its
        ``ActiveJob`` (from ``jobs``, Spark's map of them): a job that writes files (:meth:`_writes_files`) is
        kept as ``JobMarker.WRITES`` and its start passed on, its text with the ``Option``; for any other
        job, ``[its start's text, the Option]`` is kept, and nothing passed on. Beyond :data:`RDD_JOBS_KEPT` jobs
        kept, all are forgotten first."""
        job_id = self._job_id(_JOB_START)
        active_job = self.mh.filterArguments(
            self.mh.insertArguments(
                self._method("scala.collection.mutable.HashMap", "get", "java.lang.Object"), 0, self._objects(jobs)
            ),
            0,
            self._handles(job_id),
        )
        text = self._start_text(None)
        two_objects = self._method_type(self.OBJ, self.OBJ, self.OBJ)
        # (value, option, event) -> void: keep the value under the event's job id
        keep = self._void(
            self.mh.permuteArguments(
                self.mh.filterArguments(self._map_put(started), 0, self._handles(job_id)),
                self._method_type(self.OBJ, self.OBJ, self.OBJ, self.OBJ),
                self._ints(2, 0),
            )
        )
        # (option, event) -> void
        passed_on = self._then(
            self.mh.foldArguments(keep, self._returning(JobMarker.WRITES.value, self.OBJ, self.OBJ)),
            self.mh.permuteArguments(
                self.mh.filterArguments(self._accept(sink), 0, self._handles(text)),
                self._method_type(self.VOID, self.OBJ, self.OBJ),
                self._ints(1, 0),
            ),
        )
        pair = self._method("java.util.Arrays", "asList", "[Ljava.lang.Object;").asCollector(
            self._classes.java_class("[Ljava.lang.Object;"), 2
        )
        text_and_option = self.mh.permuteArguments(
            self.mh.filterArguments(pair, 0, self._handles(text)).asType(two_objects), two_objects, self._ints(1, 0)
        )
        kept = self.mh.foldArguments(keep, text_and_option)
        writes = self.mh.dropArguments(self._writes_files(), 1, self._types(self.OBJ))
        return self._then(
            self._bounded(started, RDD_JOBS_KEPT),
            self.mh.foldArguments(self.mh.guardWithTest(writes, passed_on, kept), self._as_object(active_job)),
        )

    def _writes_files(self) -> Any:
        """``(Option of an ActiveJob) -> boolean``: whether the job's final stage runs a Hadoop save's closure
        (``SparkHadoopWriter``'s); false for a job Spark no longer held, for a map-stage job (its final stage
        runs no closure of its own), and when anything throws."""
        class_name = self._after(
            self._method("java.lang.Object", "getClass"), self._method("java.lang.Class", "getName")
        )
        a_writer = self.mh.insertArguments(
            self._method("java.lang.String", "startsWith", "java.lang.String"), 1, self._objects(_HADOOP_WRITER)
        )
        runs_writer = self._after(self._after(self._method(_RESULT_STAGE, "func"), class_name), a_writer)
        stage_writes = self.mh.guardWithTest(self._is(_RESULT_STAGE), runs_writer, self._constant(False))
        final_stage = self._after(self._method("scala.Option", "get"), self._method(_ACTIVE_JOB, "finalStage"))
        writes = self.mh.guardWithTest(
            self._method("scala.Option", "isDefined"), self._after(final_stage, stage_writes), self._constant(False)
        )
        throwable = self._classes.java_class("java.lang.Throwable")
        return self.mh.catchException(
            writes, throwable, self.mh.dropArguments(self._constant(False), 0, self._types(throwable))
        )

    def _on_end(self, sink: Any, started: Any, store: SqlJobStore) -> Any:
        """``(SparkListenerJobEnd) -> void``: an RDD job's end, by what its start kept in ``started``
        (:meth:`_rdd_end`); a SQL execution's job's end, as text, added to its query's jobs."""
        job_id = self._job_id(_JOB_END)
        text = self._end_text()
        kept = self.mh.filterArguments(self._map_remove(started), 0, self._handles(job_id))
        sql_job = self.mh.dropArguments(self.filing_end(store, text, job_id), 0, self._types(self.OBJ))
        return self.mh.foldArguments(self.mh.guardWithTest(self._is_null(), sql_job, self._rdd_end(sink, text)), kept)

    def _rdd_end(self, sink: Any, text: Any) -> Any:
        """``(kept, SparkListenerJobEnd) -> void``: the end of a job that writes files (``kept`` is
        ``JobMarker.WRITES``) is passed on, as its ``text`` when it succeeded, as the event when it failed (for
        its exception), with ``JobMarker.END``; the end of any other job only when it failed, as the event with
        what its start kept."""
        accept = self._accept(sink)
        with_end = self.mh.insertArguments(accept, 1, self._objects(JobMarker.END.value))
        two_objects = self._method_type(self.VOID, self.OBJ, self.OBJ)
        succeeded = self.mh.dropArguments(
            self._after(self._method(_JOB_END, "jobResult"), self._is(_JOB_SUCCEEDED)), 0, self._types(self.OBJ)
        )
        writer_end = self.mh.guardWithTest(
            succeeded,
            self.mh.dropArguments(self.mh.filterArguments(with_end, 0, self._handles(text)), 0, self._types(self.OBJ)),
            self.mh.dropArguments(with_end, 0, self._types(self.OBJ)),
        )
        other_end = self.mh.guardWithTest(
            succeeded, self.mh.empty(two_objects), self.mh.permuteArguments(accept, two_objects, self._ints(1, 0))
        )
        return self.mh.guardWithTest(self._is("java.lang.String"), writer_end, other_end)

    def _end_text(self) -> Any:
        """``(SparkListenerJobEnd) -> Object``: the job's id, time and the class of its result, joined into one
        string: what a SQL execution's job's end is kept as, and an RDD job's end that succeeded passed as."""
        result = self._after(
            self._after(self._method(_JOB_END, "jobResult"), self._method("java.lang.Object", "getClass")),
            self._method("java.lang.Class", "getName"),
        )
        return self._as_object(
            self._joined(
                self._string(self._job_id(_JOB_END), "java.lang.Object"),
                self._string(self._method(_JOB_END, "time"), "long"),
                result,
            )
        )

    def _property(self, name: str) -> Any:
        """``(SparkListenerJobStart) -> String``: a property the job was submitted with, or null."""
        get = self.mh.insertArguments(
            self._method("java.util.Properties", "getProperty", "java.lang.String"), 1, self._objects(name)
        )
        return self._after(self._method(_JOB_START, "properties"), get)

    def _query_id(self, execution_id: Any) -> Any:
        """``(SparkListenerJobStart) -> String``: the key the job's query files its jobs under: the id of the
        ``QueryExecution`` of the job's SQL execution, or a micro-batch's key for a micro-batch's
        (:meth:`~spark_lineage.jvm.sql_jobs.SqlJobHandles.query_key`); empty when Spark no longer holds it (the
        execution ended before this listener got to the job)."""
        query = self._after(
            self._after(execution_id, self._method("java.lang.Long", "parseLong", "java.lang.String")),
            self._method(_SQL_EXECUTION, "getQueryExecution", "long"),
        )
        empty = self.mh.dropArguments(self.mh.constant(self.STR, ""), 0, self._types(self.OBJ))
        key = self.query_key().asType(self._method_type(self.STR, self.OBJ))
        return self._after(
            query, self.mh.guardWithTest(self._method("java.util.Objects", "isNull", "java.lang.Object"), empty, key)
        )

    def _start_text(self, query_id: Any, execution_id: Any = None) -> Any:
        """``(SparkListenerJobStart) -> Object``: the job's id, time and properties (and ``query_id``'s and
        ``execution_id``'s texts) joined into one string."""
        unset = self.mh.insertArguments(
            self._method("java.util.Objects", "toString", "java.lang.Object", "java.lang.String"),
            1,
            self._objects(Separator.UNSET.value),
        )
        parts = [
            self._string(self._job_id(_JOB_START), "java.lang.Object"),
            self._string(self._method(_JOB_START, "time"), "long"),
            *(self._after(self._property(name), unset) for name in JOB_PROPERTIES),
        ]
        if query_id is not None:
            parts.append(query_id)
        if execution_id is not None:
            parts.append(execution_id)
        return self._as_object(self._joined(*parts))


class RddJobReader:
    """Reads queued job events into plain data, on the analysis thread."""

    def __init__(self, classes: JvmClasses, spark_context: Any) -> None:
        """``spark_context``: the Scala ``SparkContext``, whose status store knows what a job read and wrote."""
        self._classes = classes
        self._graphs = RddGraphReader(classes)
        self._spark_context = spark_context

    def read(self, pending: PendingJob) -> RddJobStart | RddJobEnd | tuple[RddJobStart, RddJobEnd]:
        """A start, an end, or both for a job that writes nothing and failed (its start was kept in the JVM)."""
        try:
            if pending.is_start:
                return self._read_start(pending.event, pending.extra)
            end = self._read_end(pending.event)
            if not pending.is_unseen_failure:
                return end
            kept = pending.extra
            return self._read_unseen_start(str(kept.get(0)), kept.get(1)), end
        finally:
            pending.event = pending.extra = None  # let the JVM free the job's RDDs and closures

    def _read_start(self, text: str, option: Any) -> RddJobStart:
        """The start of a job that writes files (a Hadoop save, as the JVM told: the job's ``ActiveJob`` was
        held, and its final stage's closure is ``SparkHadoopWriter``'s): where it writes, and its graph."""
        time_ms, details = _job_started(text.split(Separator.FIELD.value))
        stage = option.get().finalStage()
        errors: list[str] = []
        output = None
        try:
            output = self._output_path(stage.func())
        except Exception as error:  # noqa: BLE001
            errors.append(f"output path: {message(error)}")
        return self._with_graph(RddJobStart(details.job_id, time_ms, (), output, tuple(errors), details), stage)

    def _read_unseen_start(self, text: str, option: Any) -> RddJobStart:
        """The start of a job that writes nothing, read only as it failed: its graph, when Spark still held its
        ``ActiveJob`` at its start."""
        time_ms, details = _job_started(text.split(Separator.FIELD.value))
        start = RddJobStart(details.job_id, time_ms, details=details)
        if not bool(option.isDefined()):
            return start
        return self._with_graph(start, option.get().finalStage())

    def _with_graph(self, start: RddJobStart, stage: Any) -> RddJobStart:
        try:
            return replace(start, graph=self._graphs.read(stage.rdd()))
        except Exception as error:  # noqa: BLE001 - reported with the job
            return replace(start, errors=(f"RDD lineage: {message(error)}", *start.errors))

    def _output_path(self, function: Any) -> str | None:
        """Where a Hadoop save (``saveAsTextFile``, ``saveAsHadoopFile``, ``saveAsNewAPIHadoopFile``) writes:
        the job's function is the closure ``SparkHadoopWriter.write`` runs, which captures the write's
        configuration."""
        function_class = function.getClass()
        fields = self._classes("org.apache.commons.lang3.reflect.FieldUtils")
        for index in range(1, _CAPTURED_ARGUMENTS + 1):
            value = _captured(fields, function, function_class, index)
            if value is None or not str(value.getClass().getName()).endswith(_WRITE_CONFIGS):
                continue
            path = fields.readField(value, "conf", True).value().get(_OUTPUT_DIR)
            return None if path is None else str(path)
        return None

    def _read_end(self, event: Any) -> RddJobEnd:
        """An end passed as text (:meth:`_ListenerBuilder._end_text`: it succeeded), or as the end event (it
        failed: its exception is read)."""
        if isinstance(event, str):
            job_id, time_ms, succeeded = _job_ended(event.split(Separator.FIELD.value))
            return RddJobEnd(job_id, time_ms) if succeeded else RddJobEnd(job_id, time_ms, error="job failed")
        job_id, time_ms = int(event.jobId()), int(event.time())
        result = event.jobResult()
        if str(result.getClass().getName()).startswith("org.apache.spark.scheduler.JobSucceeded"):
            return RddJobEnd(job_id, time_ms)
        exception = safe(result.exception)
        if exception is None:
            return RddJobEnd(job_id, time_ms, error="job failed")
        stack = safe(
            lambda: str(self._classes("org.apache.commons.lang3.exception.ExceptionUtils").getStackTrace(exception))
        )
        return RddJobEnd(job_id, time_ms, error=str(exception.toString()), error_stack=stack)

    def read_io(self, job_id: int) -> JobIo:
        """What an ended job's stages read and wrote, from the status store: the task metrics openlineage-spark
        sums from each task's end, summed by Spark already, so no task event crosses to Python. Asked only for
        a job that is reported (a few round trips per stage). The store hears the job end on a listener queue
        of its own, maybe a moment after ours: a job it still thinks running is asked again, briefly."""
        store = self._spark_context.statusStore()
        deadline = time.monotonic() + STATUS_STORE_WAIT_SECONDS
        job = store.job(job_id)
        while str(job.status()) == "RUNNING" and time.monotonic() < deadline:
            time.sleep(0.02)
            job = store.job(job_id)
        totals = [0, 0, 0, 0]
        for stage_id in str(job.stageIds().mkString(",")).split(","):
            stage = safe(partial(store.lastStageAttempt, int(stage_id)))
            if stage is None:  # never run and no longer kept
                continue
            for index, value in enumerate(
                (stage.inputRecords(), stage.inputBytes(), stage.outputRecords(), stage.outputBytes())
            ):
                totals[index] += int(value)
        return JobIo(*totals)


def read_query_jobs(joined: str | None, query_id: int | None) -> tuple[QueryJob, ...]:
    """The jobs of the query ``query_id``, in the order they started, from the texts of their starts and ends the
    JVM kept for it (:mod:`~spark_lineage.jvm.sql_jobs`): filed as the query's jobs always were
    (:class:`~spark_lineage.query_jobs.QueryJobLog`), a job reached once Spark no longer held its query
    included."""
    if query_id is None:
        return ()
    log = QueryJobLog()
    for text in job_texts(joined):
        log.record(_sql_job(text.split(Separator.FIELD.value), query_id))
    return log.take(query_id)


def read_micro_batch_jobs(joined: str | None) -> tuple[tuple[QueryJob, ...], bool]:
    """The jobs of a micro-batch, in the order they started, from the texts the JVM filed under its key
    (:func:`~spark_lineage.jvm.wire.micro_batch_key`), and whether they are all there (its execution's end was
    filed after them, :attr:`~spark_lineage.jvm.wire.JobMarker.BATCH_END`)."""
    texts = job_texts(joined)
    log = QueryJobLog()
    for text in texts:
        if text != JobMarker.BATCH_END.value:
            log.record(_sql_job(text.split(Separator.FIELD.value), 0))
    return log.take(0), JobMarker.BATCH_END.value in texts


def read_sql_job(pending: PendingSqlJob) -> SqlJobStart | SqlJobEnd:
    """What the JVM wrote of a SQL execution's job start (id, time, properties, query key) or end (id, time,
    the class of its result)."""
    fields = pending.text.split(Separator.FIELD.value)
    key = fields[JobStartField.QUERY_KEY] if len(fields) > JobStartField.QUERY_KEY else ""
    return _sql_job(fields, int(key) if key.isdigit() else None)


def _sql_job(fields: list[str], query_id: int | None) -> SqlJobStart | SqlJobEnd:
    """A job's start, filed under ``query_id``, or its end, from the fields of its text."""
    if len(fields) == JOB_END_FIELDS:
        return SqlJobEnd(*_job_ended(fields))
    time_ms, details = _job_started(fields)
    execution_id = fields[JobStartField.EXECUTION_ID] if len(fields) > JobStartField.EXECUTION_ID else ""
    return SqlJobStart(query_id, time_ms, details, int(execution_id) if execution_id.isdigit() else None)


def _job_started(fields: list[str]) -> tuple[int, SparkJobDetails]:
    """A job start's time and details from its text's fields up to its properties'."""
    description, group, call_site, streaming_query = (
        None if value == Separator.UNSET.value else value
        for value in fields[JobStartField.DESCRIPTION : JobStartField.STREAMING_QUERY + 1]
    )
    return int(fields[JobStartField.TIME]), SparkJobDetails(
        int(fields[JobStartField.JOB_ID]), description, group, call_site, streaming_query
    )


def _job_ended(fields: list[str]) -> tuple[int, int, bool]:
    """A job end's id, time and whether it succeeded, from its text's three fields (id, time, result class)."""
    return int(fields[0]), int(fields[1]), fields[2].rsplit(".", 1)[-1].startswith("JobSucceeded")


def _captured(fields: Any, function: Any, function_class: Any, index: int) -> Any:
    """The ``index``-th value a Java lambda captured (``arg$<index>``), or ``None``. The field is looked up
    first: reading one that is not there throws, and PySpark's conversion of each exception costs a dozen round
    trips (a closure that captured fewer values is the usual case)."""
    try:
        field = fields.getField(function_class, f"arg${index}", True)
        return None if field is None else fields.readField(field, function, True)
    except Exception:  # noqa: BLE001 - not a lambda
        return None
