"""A Spark listener that passes Python only the starts and ends of RDD jobs, and keeps SQL executions' jobs.

A listener written in Python would be called over py4j for every listener event Spark posts: each task's
start and end, metrics updates, block updates (thousands of round trips for a job of a thousand tasks). This
one is a ``java.lang.reflect.Proxy`` of ``SparkListenerInterface`` whose invocation handler is composed of
method handles (:mod:`spark_lineage.jvm.method_handles`), so every event is filtered in the JVM:

- at the start of a job whose properties carry no SQL execution id (an RDD action), Python is called with the
  job's id, time and properties as one text, and the ``ActiveJob`` Spark keeps for it, captured in the JVM at
  once: Spark forgets it when the job ends, and a short job may end before Python could ask; at its end, with
  the end event;
- the start and end of a job of a SQL execution are kept in the JVM as text (the job's id, time and
  properties, and the id of the ``QueryExecution`` running it; at its end, its id, time and outcome), filed
  under its query (:mod:`spark_lineage.jvm.sql_jobs`), which takes them when it is read: the query's run gets a
  RUNNING event per job, and Python is not called.

The Python side only queues (:class:`JobSink`); :class:`RddJobReader` reads what a queued RDD job holds on the
analysis thread, as plain data, and :func:`read_sql_job` what a SQL job's text says.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
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
_END = "end"
"""What the sink receives beside an RDD job's end: a string crosses py4j as a value, with no round trip."""
_EXECUTION_END = "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd"
_FIELD_SEP = "\x1f"
_UNSET = "\x1d"
"""Stands for a job property that is not set."""
_JOB_PROPERTIES = ("spark.job.description", "spark.jobGroup.id", "callSite.short")
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
UNREAD_GRAPHS_KEPT = 1_000
"""How many jobs that write nothing keep their final stage, unread, until they end."""


@dataclass
class PendingJob:
    """What the listener hands to the worker for an RDD job: at its start, its text and the JVM reference to
    its ``ActiveJob``; at its end, the end event; nothing read yet."""

    event: Any
    active_job: Any = None
    """At a start: the ``Option`` of the job's ``ActiveJob``; ``None`` for an end."""

    @property
    def is_start(self) -> bool:
        return self.active_job is not None


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
                # A JavaObject compares through a JVM call: the type says what was passed (an RDD job's end
                # comes with a marker string, its start with its ActiveJob).
                self._submit(PendingJob(event, None if isinstance(extra, str) else extra))
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

    def _build(self, sink: Any) -> Any:
        jobs = self._jsc.dagScheduler().jobIdToActiveJob()
        store = sql_job_store(self._gateway, self._classes)
        return _ListenerBuilder(self._gateway, self._classes).build(sink, jobs, store, self._rdd_jobs)


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

    def _remember(self, ids: Any, job_id: Any) -> Any:
        return self._void(self._forget(ids, job_id, "add"))

    def _forget(self, ids: Any, job_id: Any, operation: str = "remove") -> Any:
        """``(event) -> boolean``: add the event's job id to ``ids``, or remove it (whether it was there)."""
        return self.mh.filterArguments(
            self.mh.insertArguments(
                self._method("java.util.Set", operation, "java.lang.Object"), 0, self._objects(ids)
            ),
            0,
            self._handles(job_id),
        )

    def _string(self, handle: Any, kind: str) -> Any:
        """``(event) -> String``: what ``handle`` answers, as text."""
        return self._after(handle, self._method("java.lang.String", "valueOf", kind))

    def _joined(self, *parts: Any) -> Any:
        """``(event) -> String``: the parts' texts joined with the field separator."""
        sequence = self._classes.java_class("java.lang.CharSequence")
        join = self._method("java.lang.String", "join", "java.lang.CharSequence", "[Ljava.lang.CharSequence;")
        collected = self.mh.insertArguments(
            join.asCollector(self._classes.java_class("[Ljava.lang.CharSequence;"), len(parts)),
            0,
            self._objects(_FIELD_SEP),
        )
        filters = [part.asType(part.type().changeReturnType(sequence)) for part in parts]
        each = self.mh.filterArguments(collected, 0, self._handles(*filters))
        return self.mh.permuteArguments(each, self._method_type(self.STR, self.OBJ), self._ints(*([0] * len(parts))))

    def _ignore(self) -> Any:
        return self.mh.empty(self._method_type(self.VOID, self.OBJ))


class _ListenerBuilder(ListenerProxyBuilder, SqlJobHandles):
    """Composes the filtering job listener."""

    def build(self, sink: Any, jobs: Any, store: SqlJobStore, rdd_jobs: bool = True) -> Any:
        tracked = self._classes("java.util.concurrent.ConcurrentHashMap").newKeySet()
        return self.proxy(
            {
                "onJobStart": self._on_start(sink, jobs, tracked, store, rdd_jobs),
                "onJobEnd": self._on_end(sink, tracked, store),
                "onOtherEvent": self._choose(
                    [(self._is(_EXECUTION_END), self.ending_execution(store))], otherwise=self._ignore()
                ),
            },
            "spark_lineage job listener",
        )

    def _job_id(self, event_class: str) -> Any:
        """``(event) -> Integer``: the job id, boxed as Spark's job map and our set key it."""
        return self._boxed(self._method(event_class, "jobId"))

    def _on_start(self, sink: Any, jobs: Any, tracked: Any, store: SqlJobStore, rdd_jobs: bool) -> Any:
        """``(SparkListenerJobStart) -> void``: for a job that is no SQL execution, remember its id and pass on
        its text with its ``ActiveJob`` (an ``Option``); file a SQL execution's job's text, with the id of the
        query running it, under that query."""
        execution_id = self._property(_SQL_EXECUTION_ID)
        is_null = self._method("java.util.Objects", "isNull", "java.lang.Object")
        not_sql = self.mh.guardWithTest(
            self._after(self._method(_JOB_START, "properties"), is_null),
            self._constant(True),
            self._after(execution_id, is_null),
        )
        job_id = self._job_id(_JOB_START)
        active_job = self.mh.filterArguments(
            self.mh.insertArguments(
                self._method("scala.collection.mutable.HashMap", "get", "java.lang.Object"), 0, self._objects(jobs)
            ),
            0,
            self._handles(job_id),
        )
        accept = self._accept(sink)
        text = self._start_text(None)
        passed_on = self.mh.permuteArguments(
            self.mh.filterArguments(accept, 0, self._handles(text, self._as_object(active_job))),
            self._method_type(self.VOID, self.OBJ),
            self._ints(0, 0),
        )
        query_id = self._query_id(execution_id)
        sql_text = self._start_text(query_id, execution_id)
        return self.mh.guardWithTest(
            not_sql,
            self._then(self._remember(tracked, job_id), passed_on) if rdd_jobs else self._ignore(),
            self.filing_start(store, sql_text, query_id, execution_id, job_id),
        )

    def _on_end(self, sink: Any, tracked: Any, store: SqlJobStore) -> Any:
        """``(SparkListenerJobEnd) -> void``: pass on the end of an RDD job whose start was passed on; add a
        SQL execution's job's end, as text, to its query's jobs."""
        job_id = self._job_id(_JOB_END)
        accept = self._accept(sink)
        passed_on = self.mh.insertArguments(accept, 1, self._objects(_END))
        result = self._after(
            self._after(self._method(_JOB_END, "jobResult"), self._method("java.lang.Object", "getClass")),
            self._method("java.lang.Class", "getName"),
        )
        text = self._as_object(
            self._joined(
                self._string(job_id, "java.lang.Object"), self._string(self._method(_JOB_END, "time"), "long"), result
            )
        )
        return self.mh.guardWithTest(self._forget(tracked, job_id), passed_on, self.filing_end(store, text, job_id))

    def _property(self, name: str) -> Any:
        """``(SparkListenerJobStart) -> String``: a property the job was submitted with, or null."""
        get = self.mh.insertArguments(
            self._method("java.util.Properties", "getProperty", "java.lang.String"), 1, self._objects(name)
        )
        return self._after(self._method(_JOB_START, "properties"), get)

    def _query_id(self, execution_id: Any) -> Any:
        """``(SparkListenerJobStart) -> String``: the id of the ``QueryExecution`` of the job's SQL execution,
        or empty when Spark no longer holds it (the execution ended before this listener got to the job)."""
        query = self._after(
            self._after(execution_id, self._method("java.lang.Long", "parseLong", "java.lang.String")),
            self._method(_SQL_EXECUTION, "getQueryExecution", "long"),
        )
        empty = self.mh.dropArguments(self.mh.constant(self.STR, ""), 0, self._types(self.OBJ))
        its_id = self._string(self._method(_QUERY_EXECUTION, "id"), "long")
        return self._after(
            query, self.mh.guardWithTest(self._method("java.util.Objects", "isNull", "java.lang.Object"), empty, its_id)
        )

    def _start_text(self, query_id: Any, execution_id: Any = None) -> Any:
        """``(SparkListenerJobStart) -> Object``: the job's id, time and properties (and ``query_id``'s and
        ``execution_id``'s texts) joined into one string."""
        unset = self.mh.insertArguments(
            self._method("java.util.Objects", "toString", "java.lang.Object", "java.lang.String"),
            1,
            self._objects(_UNSET),
        )
        parts = [
            self._string(self._job_id(_JOB_START), "java.lang.Object"),
            self._string(self._method(_JOB_START, "time"), "long"),
            *(self._after(self._property(name), unset) for name in _JOB_PROPERTIES),
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
        self._unread: OrderedDict[int, Any] = OrderedDict()
        """The final stages of started jobs that write nothing, by job id, until they end."""

    def read(self, pending: PendingJob) -> RddJobStart | RddJobEnd:
        try:
            if pending.is_start:
                return self._read_start(pending)
            end = self._read_end(pending.event)
            if end.error is None:
                self._unread.pop(end.job_id, None)  # a job that wrote nothing and succeeded is not reported
            return end
        finally:
            pending.event = pending.active_job = None  # let the JVM free the job's RDDs and closures

    def _read_start(self, pending: PendingJob) -> RddJobStart:
        """A job's start. Only a Hadoop save writes files: any other job's graph is read only if it fails, so
        that the many jobs that read and write nothing (``count()``, Spark's parquet footer reads) cost a few
        round trips, not one per RDD."""
        time_ms, details = _job_started(str(pending.event).split(_FIELD_SEP))
        job_id = details.job_id
        option = pending.active_job
        if not bool(option.isDefined()):
            return RddJobStart(job_id, time_ms, details=details)
        stage = option.get().finalStage()
        function = safe(stage.func)  # a map-stage job's final stage has none
        if function is None or not str(function.getClass().getName()).startswith(_HADOOP_WRITER):
            self._unread[job_id] = stage
            while len(self._unread) > UNREAD_GRAPHS_KEPT:
                self._unread.popitem(last=False)
            return RddJobStart(job_id, time_ms, details=details, graph_unread=True)
        errors: list[str] = []
        output = None
        try:
            output = self._output_path(function)
        except Exception as error:  # noqa: BLE001
            errors.append(f"output path: {message(error)}")
        return self._with_graph(RddJobStart(job_id, time_ms, (), output, tuple(errors), details), stage)

    def read_unread_graph(self, start: RddJobStart) -> RddJobStart:
        """A start whose graph was left unread (``graph_unread``), with its graph: its job failed."""
        stage = self._unread.pop(start.job_id, None)
        if stage is None:
            return replace(start, graph_unread=False, errors=(*start.errors, "RDD lineage: no longer kept"))
        return self._with_graph(replace(start, graph_unread=False), stage)

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
        event = read_sql_job(PendingSqlJob(text))
        log.record(replace(event, query_id=query_id) if isinstance(event, SqlJobStart) else event)
    return log.take(query_id)


def read_sql_job(pending: PendingSqlJob) -> SqlJobStart | SqlJobEnd:
    """What the JVM wrote of a SQL execution's job start (id, time, properties, query id) or end (id, time,
    the class of its result)."""
    fields = pending.text.split(_FIELD_SEP)
    if len(fields) == 3:
        return SqlJobEnd(int(fields[0]), int(fields[1]), fields[2].rsplit(".", 1)[-1].startswith("JobSucceeded"))
    time_ms, details = _job_started(fields)
    execution_id = fields[6] if len(fields) > 6 else ""
    return SqlJobStart(
        int(fields[5]) if fields[5] else None, time_ms, details, int(execution_id) if execution_id.isdigit() else None
    )


def _job_started(fields: list[str]) -> tuple[int, SparkJobDetails]:
    """A job start's time and details from its text's first five fields."""
    description, group, call_site = (None if value == _UNSET else value for value in fields[2:5])
    return int(fields[1]), SparkJobDetails(int(fields[0]), description, group, call_site)


def _captured(fields: Any, function: Any, function_class: Any, index: int) -> Any:
    """The ``index``-th value a Java lambda captured (``arg$<index>``), or ``None``. The field is looked up
    first: reading one that is not there throws, and PySpark's conversion of each exception costs a dozen round
    trips (a closure that captured fewer values is the usual case)."""
    try:
        field = fields.getField(function_class, f"arg${index}", True)
        return None if field is None else fields.readField(field, function, True)
    except Exception:  # noqa: BLE001 - not a lambda
        return None
