"""The Spark jobs of SQL executions, kept in the JVM until their query is read.

Every event of a query is built when the query is read, after it ran, so the starts and ends of its jobs need
not cross to Python as they happen (two py4j callbacks per job). The job listener (:mod:`spark_lineage.jvm.
listener`) files each SQL execution's job start and end, as the text :func:`~spark_lineage.jvm.listener.
read_sql_job` reads, under the query running it (``QueryExecution.id``, as ``SQLExecution.getQueryExecution``
gives it at the job's start; a job reached once Spark no longer holds its query goes with the one an earlier
job of its execution named); the first call of a query's read (:mod:`spark_lineage.jvm.capture`) takes its
jobs' texts out, read or not. Every query a session runs is read this way, through a query listener of ours or
heard on the listener bus (:mod:`spark_lineage.jvm.sessions`).

Spark posts a SQL execution's job events before its end, on the listener queue where the query listeners hear
that end, so a query's jobs are all filed when it is read. What is kept is bounded: the jobs of an execution
without a name, which no query listener hears (a micro-batch's), are dropped at its end; of the queries not
read yet (of sessions without lineage), those of the :data:`QUERIES_KEPT` latest; a job's query until the job
ends, and an execution's until it ends (:data:`IN_FLIGHT_KEPT` of each at most, should Spark drop the events
that end them).

One :class:`SqlJobStore` per JVM, which every reader and listener of that JVM shares. Its maps are keyed by
text (query and execution ids as ``String.valueOf`` writes them): py4j passes Python integers as
``Integer`` or ``Long`` by their size.
"""

from __future__ import annotations

import threading
from typing import Any

from spark_lineage.jvm.method_handles import HandleBuilder
from spark_lineage.jvm.values import JvmClasses
from spark_lineage.jvm.wire import ITEM_SEP, MICRO_BATCH_KEY_SEP, JobMarker

QUERIES_KEPT = 1_000
"""Queries whose jobs are kept until the query is read; the oldest are dropped beyond this many."""
IN_FLIGHT_KEPT = 10_000
"""Started jobs, and SQL executions, whose end was not heard: all are forgotten beyond this many."""
_MAP = "java.util.Map"
_OBJ = "java.lang.Object"
_EXECUTION_END = "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd"
_QUERY_EXECUTION = "org.apache.spark.sql.execution.QueryExecution"
_INCREMENTAL_EXECUTIONS = (
    "org.apache.spark.sql.execution.streaming.runtime.IncrementalExecution",  # Spark 4.1 on
    "org.apache.spark.sql.execution.streaming.IncrementalExecution",
)
"""A micro-batch's ``QueryExecution``, by Spark line."""


class SqlJobStore:
    """The JVM-side maps of one JVM (see the module's description)."""

    def __init__(self, classes: JvmClasses, kept: int = QUERIES_KEPT) -> None:
        concurrent = "java.util.concurrent."
        self.by_query = classes(concurrent + "ConcurrentHashMap")()
        """Query id -> ``StringBuffer``: the texts of its jobs' starts and ends, each followed by ``ITEM_SEP``."""
        self.order = classes(concurrent + "ArrayBlockingQueue")(kept)
        """The query ids of ``by_query``, oldest first (with those read since)."""
        self.buffer_of_job = classes(concurrent + "ConcurrentHashMap")()
        """Job id -> the buffer of its query, until the job ends."""
        self.query_of_execution = classes(concurrent + "ConcurrentHashMap")()
        """Execution id -> query id, until the execution ends."""

    def take_slowly(self, key: int | str) -> str | None:
        """The jobs' texts filed under a query's id (or a micro-batch's key, :func:`~spark_lineage.jvm.wire.
        micro_batch_key`), taken out with plain py4j calls (two round trips): for a query read without the
        JVM-side functions, and for a micro-batch."""
        buffer = self.by_query.remove(str(key))
        return None if buffer is None else str(buffer.toString())


_stores: dict[int, SqlJobStore] = {}
_stores_lock = threading.Lock()


def sql_job_store(gateway: Any, classes: JvmClasses) -> SqlJobStore:
    """The store of this gateway's JVM (made on first use: by the job listener and the first reader, which may
    ask at once from two threads, and must share it)."""
    with _stores_lock:
        found = _stores.get(id(gateway))
        if found is None:
            found = _stores[id(gateway)] = SqlJobStore(classes)
        return found


def job_texts(joined: str | None) -> list[str]:
    """The texts of a query's job starts and ends, as :meth:`SqlJobHandles.taking` answers them."""
    return [text for text in (joined or "").split(ITEM_SEP) if text]


class SqlJobHandles(HandleBuilder):
    """Composes what the job listener and the query reader do with a :class:`SqlJobStore`."""

    def filing_start(self, store: SqlJobStore, text: Any, query_id: Any, execution_id: Any, job_id: Any) -> Any:
        """``(job start) -> void``: file ``text(event)`` under the job's query: ``query_id(event)`` (its text,
        empty when Spark no longer held the query), else the query an earlier job of ``execution_id(event)``
        named; a job of no known query is dropped."""
        get, put = self._map_get, self._map_put
        # (query id, event) -> key: the query id, remembered for the execution; or the execution's
        remembered = self._void(
            self.mh.permuteArguments(
                self.mh.filterArguments(put(store.query_of_execution), 0, self._handles(self._as_object(execution_id))),
                self._method_type(self.OBJ, self.OBJ, self.OBJ),
                self._ints(1, 0),
            )
        )
        known = self.mh.foldArguments(
            self.mh.dropArguments(self.mh.identity(self.OBJ), 1, self._types(self.OBJ)), remembered
        )
        of_execution = self.mh.dropArguments(
            self.mh.filterArguments(get(store.query_of_execution), 0, self._handles(self._as_object(execution_id))),
            0,
            self._types(self.OBJ),
        )
        key = self.mh.foldArguments(
            self.mh.guardWithTest(self._method("java.lang.String", "isEmpty"), of_execution, known),
            self._as_object(query_id),
        )
        # (buffer, key, event): append the text, and remember the buffer for the job's end
        append = self._method("java.lang.StringBuffer", "append", "java.lang.String")
        append_text = self.mh.dropArguments(
            self._void(self.mh.filterArguments(append, 1, self._handles(self._as_string(text)))),
            1,
            self._types(self.OBJ),
        )
        append_end = self.mh.dropArguments(
            self._void(self.mh.insertArguments(append, 1, self._objects(ITEM_SEP))), 1, self._types(self.OBJ, self.OBJ)
        )
        for_the_end = self.mh.permuteArguments(
            self._void(self.mh.filterArguments(put(store.buffer_of_job), 0, self._handles(self._as_object(job_id)))),
            self._method_type(self.VOID, self.OBJ, self.OBJ, self.OBJ),
            self._ints(2, 0),
        )
        filed = self.mh.foldArguments(
            self._then(append_text, append_end, for_the_end),
            self.mh.dropArguments(self._buffer_for(store), 1, self._types(self.OBJ)),
        )
        file = self.mh.guardWithTest(
            self._method("java.util.Objects", "isNull", _OBJ),
            self.mh.empty(self._method_type(self.VOID, self.OBJ, self.OBJ)),
            filed,
        )
        return self._then(
            self._bounded(store.buffer_of_job),
            self._bounded(store.query_of_execution),
            self.mh.foldArguments(file, key),
        )

    def filing_end(self, store: SqlJobStore, text: Any, job_id: Any) -> Any:
        """``(job end) -> void``: add ``text(event)`` to the jobs of the query the job's start was filed under."""
        append = self._method("java.lang.StringBuffer", "append", "java.lang.String")
        # (buffer, event)
        appended = self._then(
            self._void(self.mh.filterArguments(append, 1, self._handles(self._as_string(text)))),
            self.mh.dropArguments(
                self._void(self.mh.insertArguments(append, 1, self._objects(ITEM_SEP))), 1, self._types(self.OBJ)
            ),
        )
        chosen = self.mh.guardWithTest(
            self._method("java.util.Objects", "isNull", _OBJ),
            self.mh.empty(self._method_type(self.VOID, self.OBJ, self.OBJ)),
            appended,
        )
        buffer = self.mh.filterArguments(
            self._map_remove(store.buffer_of_job), 0, self._handles(self._as_object(job_id))
        )
        return self.mh.foldArguments(chosen, buffer)

    def query_key(self) -> Any:
        """``(QueryExecution) -> String``: the key a query's jobs are filed under: its id, or for a micro-batch
        (an ``IncrementalExecution``, whose jobs no query listener hears: the streaming worker takes them when
        the batch's progress is reported) its streaming query run's id and batch id
        (:func:`~spark_lineage.jvm.wire.micro_batch_key`)."""
        its_id = self._string(self._method(_QUERY_EXECUTION, "id"), "long")
        batch = self._micro_batch_class()
        if batch is None:
            return its_id
        key = self._joined(
            self._string(self._method(batch, "runId"), "java.lang.Object"),
            self._string(self._method(batch, "currentBatchId"), "long"),
            separator=MICRO_BATCH_KEY_SEP,
        )
        return self.mh.guardWithTest(self._is(batch), key, its_id)

    def _micro_batch_class(self) -> str | None:
        """The name of this Spark's ``IncrementalExecution`` (looked up once)."""

        def find() -> str:
            for name in _INCREMENTAL_EXECUTIONS:
                try:
                    self._classes.java_class(name)
                except Exception:  # noqa: BLE001 - another Spark line's name
                    continue
                return name
            return ""

        return self._once("micro-batch class", find) or None

    def ending_execution(self, store: SqlJobStore) -> Any:
        """``(SparkListenerSQLExecutionEnd) -> void``: forget the execution's query; of an execution without a
        name, which no query listener hears, drop the query's jobs, or for a micro-batch mark its jobs complete
        (:attr:`~spark_lineage.jvm.wire.JobMarker.BATCH_END`)."""
        execution_id = self._text_of(self._method(_EXECUTION_END, "executionId"))
        forget = self._void(
            self.mh.filterArguments(self._map_remove(store.query_of_execution), 0, self._handles(execution_id))
        )
        qe = self._method(_EXECUTION_END, "qe")
        query_id = self._text_of(self._after(qe, self._method(_QUERY_EXECUTION, "id")))
        drop = self._void(self.mh.filterArguments(self._map_remove(store.by_query), 0, self._handles(query_id)))
        batch = self._micro_batch_class()
        if batch is not None:
            buffer = self._after(self._after(qe, self._as_object(self.query_key())), self._buffer_for(store))
            mark = self.mh.insertArguments(
                self._method("java.lang.StringBuffer", "append", "java.lang.String"),
                1,
                self._objects(JobMarker.BATCH_END.value + ITEM_SEP),
            )
            drop = self.mh.guardWithTest(self._after(qe, self._is(batch)), self._void(self._after(buffer, mark)), drop)
        unnamed = self._after(self._method(_EXECUTION_END, "executionName"), self._method("scala.Option", "isEmpty"))
        has_query = self._after(self._method(_EXECUTION_END, "qe"), self._method("java.util.Objects", "nonNull", _OBJ))
        nothing = self.mh.empty(self._method_type(self.VOID, self.OBJ))
        dropped = self.mh.guardWithTest(unnamed, self.mh.guardWithTest(has_query, drop, nothing), nothing)
        return self._then_one(forget, dropped)

    def taking(self, store: SqlJobStore) -> Any:
        """``(QueryExecution) -> Object``: the texts of the query's jobs, each followed by ``ITEM_SEP``, taken
        out of the store; ``null`` when it has none."""
        query_id = self._text_of(self._method(_QUERY_EXECUTION, "id"))
        buffer = self._after(query_id, self._map_remove(store.by_query))
        text = self.mh.guardWithTest(
            self._method("java.util.Objects", "isNull", _OBJ),
            self.mh.identity(self.OBJ),
            self._method(_OBJ, "toString").asType(self._method_type(self.OBJ, self.OBJ)),
        )
        return self.mh.filterReturnValue(buffer.asType(self._method_type(self.OBJ, self.OBJ)), text)

    # --- pieces ----------------------------------------------------------------------------------------

    def _buffer_for(self, store: SqlJobStore) -> Any:
        """``(key) -> Object``: the query's buffer, made (and admitted among the kept queries) when it has
        none yet."""
        # (buffer, key) -> buffer, once put in the map and the key admitted
        put = self.mh.permuteArguments(
            self._void(self._map_put(store.by_query)),
            self._method_type(self.VOID, self.OBJ, self.OBJ),
            self._ints(1, 0),
        )
        admit = self.mh.dropArguments(self._admitted(store), 0, self._types(self.OBJ))
        made = self.mh.foldArguments(
            self.mh.foldArguments(
                self.mh.foldArguments(
                    self.mh.dropArguments(self.mh.identity(self.OBJ), 1, self._types(self.OBJ)), admit
                ),
                put,
            ),
            self.lookup.findConstructor(
                self._classes.java_class("java.lang.StringBuffer"), self._method_type(self.VOID)
            ).asType(self._method_type(self.OBJ)),
        )
        # (found, key) -> found, or made(key)
        chosen = self.mh.guardWithTest(
            self._method("java.util.Objects", "isNull", _OBJ),
            self.mh.dropArguments(made, 0, self._types(self.OBJ)),
            self.mh.dropArguments(self.mh.identity(self.OBJ), 1, self._types(self.OBJ)),
        )
        return self.mh.foldArguments(chosen, self._map_get(store.by_query))

    def _admitted(self, store: SqlJobStore) -> Any:
        """``(key) -> void``: add the key to the kept queries' order; when it is full, the oldest query's jobs
        are dropped to make room."""
        queue = "java.util.Queue"
        offer = self.mh.insertArguments(self._method(queue, "offer", _OBJ), 0, self._objects(store.order))
        poll = self.mh.insertArguments(self._method(queue, "poll"), 0, self._objects(store.order))
        drop_oldest = self.mh.foldArguments(self._void(self._map_remove(store.by_query)), poll)
        make_room = self.mh.foldArguments(
            self._void(offer), self.mh.dropArguments(drop_oldest, 0, self._types(self.OBJ))
        )
        return self.mh.guardWithTest(offer, self.mh.empty(self._method_type(self.VOID, self.OBJ)), make_room)

    def _bounded(self, target: Any, kept: int = IN_FLIGHT_KEPT) -> Any:
        """``(event) -> void``: clear the map ``target`` when it holds more than ``kept`` entries (ends that
        never came)."""
        size = self.mh.insertArguments(self._method(_MAP, "size"), 0, self._objects(target))
        at_most = self._after(
            self.mh.filterReturnValue(
                size,
                self.mh.insertArguments(self._method("java.lang.Math", "max", "int", "int"), 1, self._objects(kept)),
            ).asType(self._method_type(self.OBJ)),
            self.mh.insertArguments(self._method("java.util.Objects", "equals", _OBJ, _OBJ), 1, self._objects(kept)),
        )
        clear = self.mh.insertArguments(self._method(_MAP, "clear"), 0, self._objects(target))
        return self.mh.dropArguments(
            self.mh.guardWithTest(at_most, self.mh.empty(self._method_type(self.VOID)), clear), 0, self._types(self.OBJ)
        )

    def _map_get(self, target: Any) -> Any:
        """``(key) -> Object``."""
        return self.mh.insertArguments(self._method(_MAP, "get", _OBJ), 0, self._objects(target))

    def _map_put(self, target: Any) -> Any:
        """``(key, value) -> Object``."""
        return self.mh.insertArguments(self._method(_MAP, "put", _OBJ, _OBJ), 0, self._objects(target))

    def _map_remove(self, target: Any) -> Any:
        """``(key) -> Object``."""
        return self.mh.insertArguments(self._method(_MAP, "remove", _OBJ), 0, self._objects(target))

    def _as_string(self, handle: Any) -> Any:
        return handle.asType(self._method_type(self.STR, self.OBJ))

    def _text_of(self, handle: Any) -> Any:
        """``(Object) -> Object``: ``String.valueOf`` of what ``handle`` answers (a query or execution id)."""
        return self._as_object(
            self._after(
                handle.asType(self._method_type(self.OBJ, self.OBJ)), self._method("java.lang.String", "valueOf", _OBJ)
            )
        )

    def _then_one(self, *steps: Any) -> Any:
        """Run ``(Object) -> void`` steps in order."""
        combined = steps[-1]
        for step in reversed(steps[:-1]):
            combined = self.mh.foldArguments(combined, step)
        return combined
