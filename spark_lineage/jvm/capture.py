"""A finished query read in two JVM calls, whatever the size of its plan.

:class:`CaptureFunctions` composes, once per reader (one per thread), JVM-side functions out of method handles
(:mod:`spark_lineage.jvm.method_handles`) that read a ``QueryExecution`` and answer one text each:

1. the *header* (:class:`HeaderField`): which of the plans asked for could be had, its root's class and node
   name (whether the query is reported is decided on those, in Python), the query's id, and its Spark jobs,
   which the job listener kept in the JVM (:mod:`spark_lineage.jvm.sql_jobs`);
2. the *body* (:class:`BodyField`), for a query that is reported: the plan whole (:mod:`spark_lineage.jvm.
   catalyst_tree`), what the probers wrote of its nodes (:mod:`spark_lineage.jvm.probes`), the executed plan's
   root and SQL metrics, the SQL text, the failure, and the plan's JSON when asked for.

Each part is read on its own: one that throws is written as :attr:`~spark_lineage.jvm.wire.CaptureTag.FAILED`,
and the reader (:mod:`spark_lineage.jvm.spark`) reads it again the Python way, which reports the error as it
always did. The answer crosses whole when the JVM sends it without waiting
(:func:`~spark_lineage.jvm.values.answers_at_once`), else in pieces, as the tree reader's do.

The text of both is a sequence of values, one per field, in the order of the field enums, each a token of
:class:`~spark_lineage.jvm.wire.CaptureTag`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Any, Union

from spark_lineage.errors import DecodeError
from spark_lineage.jvm.catalyst_tree import CHUNK_CHARS, MAX_TEXT_CHARS, TextReader, TreeDetail, read_scalar
from spark_lineage.jvm.probes import ProbeCompiler
from spark_lineage.jvm.sql_jobs import SqlJobHandles, SqlJobStore
from spark_lineage.jvm.values import JvmClasses, answers_at_once, call
from spark_lineage.jvm.wire import ITEM_SEP, CaptureTag

_QUERY_EXECUTION = "org.apache.spark.sql.execution.QueryExecution"
_TREE_NODE = "org.apache.spark.sql.catalyst.trees.TreeNode"


class HeaderField(IntEnum):
    """What the header holds, in order."""

    PLAN = 0
    """The index of the first plan accessor that answered (``N``: none did)."""
    ROOT_CLASS = 1
    """The plan root's class name."""
    ROOT_NAME = 2
    """The plan root's ``nodeName``."""
    QUERY_ID = 3
    """``QueryExecution.id``."""
    JOBS = 4
    """The texts of the query's Spark jobs' starts and ends (:mod:`~spark_lineage.jvm.sql_jobs`), taken out of
    the JVM whether the query is reported or not (``N``: none)."""


class BodyField(IntEnum):
    """What the body holds, in order."""

    TREE = 0
    """The plan's text (:mod:`~spark_lineage.jvm.catalyst_tree`), or ``L<n>;`` when it is too long."""
    PROBES = 1
    """What the probers wrote of the plan's nodes, in the order its text opens them."""
    EXECUTED_NODE = 2
    """The executed plan's root ``nodeName`` (below whole-stage codegen)."""
    METRICS = 3
    """The SQL metrics of the node that wrote (``N``: not asked for), joined."""
    SQL = 4
    """The plan root's SQL text, or else the list of those of the parsed plan's children."""
    ERROR = 5
    """The failure's ``toString`` (``N``: the query succeeded)."""
    ERROR_STACK = 6
    PHASES = 7
    """The planning phases, joined (for a failed query's start)."""
    LOGICAL_PLAN = 8
    """The plan as Spark's JSON (``N``: not asked for)."""
    MISSED = 9
    """Whether a prober left something to Python: the plan's nodes are kept for it (:meth:`CaptureFunctions.
    plan_nodes`)."""


class Failed(Enum):
    """A part that threw, or an empty part."""

    FAILED = "failed"


FAILED = Failed.FAILED


@dataclass(frozen=True)
class TooLong:
    """A plan whose text is longer than allowed, and its length."""

    length: int


Field = Union[None, str, int, float, bool, Failed, TooLong, list["Field"]]


@dataclass(frozen=True)
class BodyOptions:
    """What a body function reads, besides what every body holds."""

    accessor: str
    """The plan to read (``optimizedPlan``, ``analyzed``, ``logical``): the one the header found."""
    detail: TreeDetail
    """How much of the plan the body's tree holds."""
    max_chars: int
    metrics: bool
    logical_plan: bool


class CaptureFunctions(ProbeCompiler, SqlJobHandles):
    """The JVM-side functions a reader reads queries with, each composed on first use."""

    def __init__(self, gateway: Any, classes: JvmClasses, jobs: SqlJobStore) -> None:
        super().__init__(gateway, classes)
        self._jobs = jobs
        self.whole = answers_at_once(gateway, classes)
        """Whether answers cross whole (else in pieces of :data:`CHUNK_CHARS`)."""
        self.text_holder, self.nodes_holder = self.holders()
        """The rest of an answer that crosses in pieces; the plan nodes of the last body, in the order its text
        opens them, when a prober missed (the tree reader's too: one thread reads at a time)."""
        self._headers: dict[tuple[str, ...], Any] = {}
        self._bodies: dict[BodyOptions, Any] = {}
        self._bodies_and_headers: dict[tuple[BodyOptions, tuple[str, ...]], tuple[Any, Any, Any]] = {}
        """Each function of a body and a header, with the body's and the header's function it calls."""
        self._session_conf: Any = None

    # --- the calls ------------------------------------------------------------------------------------

    def header(self, query_execution: Any, accessors: tuple[str, ...]) -> list[Field]:
        function = self._header_function(accessors)
        return self._fields(call(function, "apply", query_execution, None), len(HeaderField))

    def body(self, query_execution: Any, exception: Any, options: BodyOptions) -> list[Field]:
        """The body's fields (the probers are those :class:`~spark_lineage.jvm.probes.JvmProbes` set up)."""
        function = self._body_function(options)
        return self._fields(call(function, "apply", query_execution, exception), len(BodyField))

    def _header_function(self, accessors: tuple[str, ...]) -> Any:
        function = self._headers.get(accessors)
        if function is None:
            function = self._headers[accessors] = self._answer(self._header_steps(accessors))
        return function

    def _body_function(self, options: BodyOptions) -> Any:
        function = self._bodies.get(options)
        if function is None:
            function = self._bodies[options] = self._answer(self._body_steps(options))
        return function

    def body_and_header(
        self, query_execution: Any, exception: Any, options: BodyOptions, accessors: tuple[str, ...]
    ) -> tuple[list[Field], list[Field]] | None:
        """The body's fields, read with ``options`` (guessed: those of the last query), and then the header's, in
        one call; ``None`` where answers cross in pieces (they cannot be joined). The call runs the body's
        function and then the header's, the same functions :meth:`body` and :meth:`header` call (the JIT
        compiles each once): when the body fails, the header has taken nothing out of the JVM yet (it takes the
        query's jobs), and the two can be asked for one after the other."""
        if not self.whole:
            return None
        body = self._body_function(options)
        header = self._header_function(accessors)
        key = (options, accessors)
        known = self._bodies_and_headers.get(key)
        if known is None or known[0] is not body or known[1] is not header:
            known = self._bodies_and_headers[key] = (body, header, self._one_after_the_other(body, header))
        fields = self._fields(call(known[2], "apply", query_execution, exception), len(BodyField) + len(HeaderField))
        return fields[: len(BodyField)], fields[len(BodyField) :]

    def _one_after_the_other(self, first: Any, then: Any) -> Any:
        """A ``BiFunction`` answering ``first``'s answer and then ``then``'s (texts), with the same arguments."""
        bi_function = self._classes.java_class("java.util.function.BiFunction")
        apply = self.lookup.findVirtual(bi_function, "apply", self._method_type(self.OBJ, self.OBJ, self.OBJ))
        concat = self.lookup.findVirtual(self.STR, "concat", self._method_type(self.STR, self.STR))
        joined = concat.asType(self._method_type(self.OBJ, self.OBJ, self.OBJ))
        # (first's text, value, exception) -> joined, then (value, exception, value, exception) -> joined: the
        # outer filter (first's) runs before the inner one.
        joined = self.mh.collectArguments(joined, 1, apply.bindTo(then))
        joined = self.mh.collectArguments(joined, 0, apply.bindTo(first))
        both = self.mh.permuteArguments(joined, self._method_type(self.OBJ, self.OBJ, self.OBJ), self._ints(0, 1, 0, 1))
        return self._classes("java.lang.invoke.MethodHandleProxies").asInterfaceInstance(bi_function, both)

    def session_conf(self, session: Any) -> str:
        """Every conf ``session`` sees (its SQLConf's ``getAllConfs``: every SparkConf entry and the runtime
        ``spark.conf.set`` values), joined with ``mkString(ITEM_SEP)``: in one call, where asking py4j step by step
        takes four. A Spark Connect query's identity reads its session's this way."""
        if self._session_conf is None:
            read = self._after(
                self._after(
                    self._after(self._dynamic("sessionState"), self._dynamic("conf")), self._dynamic("getAllConfs")
                ),
                self._dynamic("mkString", ITEM_SEP),
            ).asType(self._method_type(self.OBJ, self.OBJ))
            function = self._classes.java_class("java.util.function.Function")
            self._session_conf = self._classes("java.lang.invoke.MethodHandleProxies").asInterfaceInstance(
                function, read
            )
        return str(call(self._session_conf, "apply", session))

    def _fields(self, first: Any, count: int) -> list[Field]:
        text = str(first)
        if not self.whole and len(text) == CHUNK_CHARS:
            builder = self.text_holder.getAndSet(None)
            length = int(builder.length())
            text += "".join(
                str(builder.substring(start, min(start + CHUNK_CHARS, length)))
                for start in range(CHUNK_CHARS, length, CHUNK_CHARS)
            )
        reader = _FieldReader(text)
        fields = [reader.value() for _ in range(count)]
        reader.end()
        return fields

    # --- composition -----------------------------------------------------------------------------------
    # Steps take (query execution, exception, out): the exception is null for a query that succeeded.

    def _answer(self, steps: Any) -> Any:
        """A ``BiFunction`` from the query execution and the exception to the text ``steps`` write: all of it,
        or its first piece (the rest is kept in :attr:`text_holder`)."""
        new_builder = self.lookup.findConstructor(self.SB, self._method_type(self.VOID))
        # (out, qe, exception): run the steps, then answer
        run = self.mh.permuteArguments(
            steps, self._method_type(self.VOID, self.SB, self.OBJ, self.OBJ), self._ints(1, 2, 0)
        )
        if self.whole:
            result = self._method("java.lang.Object", "toString").asType(self._method_type(self.OBJ, self.SB))
        else:
            keep = self._void(
                self.mh.insertArguments(
                    self._method("java.util.concurrent.atomic.AtomicReference", "set", "java.lang.Object"),
                    0,
                    self._objects(self.text_holder),
                )
            ).asType(self._method_type(self.VOID, self.SB))
            length = self.lookup.findVirtual(self.SB, "length", self._method_type(self.INT))
            end = self._after(
                length,
                self.mh.insertArguments(
                    self._method("java.lang.Math", "min", "int", "int"), 1, self._objects(CHUNK_CHARS)
                ),
            )
            substring = self.lookup.findVirtual(self.SB, "substring", self._method_type(self.STR, self.INT, self.INT))
            first = self.mh.foldArguments(
                self.mh.permuteArguments(
                    self.mh.insertArguments(substring, 1, self._objects(0)),
                    self._method_type(self.STR, self.INT, self.SB),
                    self._ints(1, 0),
                ),
                end,
            )
            result = self.mh.foldArguments(first, keep).asType(self._method_type(self.OBJ, self.SB))
        answer = self.mh.foldArguments(
            self.mh.dropArguments(result, 1, self._types(self.OBJ, self.OBJ)), run
        )  # (out, qe, exception) -> Object
        function = self.mh.foldArguments(answer, new_builder)
        proxies = self._classes("java.lang.invoke.MethodHandleProxies")
        return proxies.asInterfaceInstance(self._classes.java_class("java.util.function.BiFunction"), function)

    def _on_query(self, step: Any) -> Any:
        """A ``(value, out)`` step run on the query execution."""
        return self.mh.dropArguments(step, 1, self._types(self.OBJ))

    def _on_exception(self, step: Any) -> Any:
        """A ``(value, out)`` step run on the exception (``N`` when there is none)."""
        return self.mh.dropArguments(self._or_none(step), 0, self._types(self.OBJ))

    def _or_none(self, step: Any) -> Any:
        return self.mh.guardWithTest(self._is_null(), self._write(CaptureTag.NONE.value), step)

    def _failing(self, step: Any) -> Any:
        """``step``, or ``F`` should it throw."""
        return self._rolled_back(step, self._write(CaptureTag.FAILED.value))

    def _of(self, read: Any, writer: Any) -> Any:
        """``(value, out)``: ``writer(read(value), out)``."""
        return self.mh.filterArguments(writer, 0, self._handles(read.asType(self._method_type(self.OBJ, self.OBJ))))

    def _accessor(self, name: str) -> Any:
        return self._method(_QUERY_EXECUTION, name)

    def _header_steps(self, accessors: tuple[str, ...]) -> Any:
        node_name = self._method(_TREE_NODE, "nodeName")
        chain = self._then(*[self._write(CaptureTag.NONE.value)] * 3)
        for index in reversed(range(len(accessors))):
            found = self._then(
                self._write(f"{CaptureTag.NUMBER.value}{index};"),
                self._of(self.full_class_name(), self.string()),
                self._of(node_name, self.string()),
            )
            chain = self._rolled_back(self._of(self._accessor(accessors[index]), found), chain)
        query_id = self._failing(self._of(self._method(_QUERY_EXECUTION, "id"), self.scalar()))
        jobs = self._failing(self._of(self.taking(self._jobs), self._or_none(self.string())))
        return self._on_query(self._then(chain, query_id, jobs))

    def _body_steps(self, options: BodyOptions) -> Any:
        """The body's steps, each composed once and shared by the bodies that differ in other options."""
        plan = self._accessor(options.accessor)
        query_steps = [
            self._once("start", self._start),
            self._once(
                ("tree", options.accessor, options.detail, options.max_chars),
                lambda: self._failing(self._of(plan, self._tree(options.detail, options.max_chars))),
            ),
            self._once("probed", self._probed),
            *self._once(("executed", options.metrics), lambda: self._executed(options.metrics)),
            self._once(("sql", options.accessor), lambda: self._failing(self._sql(plan))),
        ]
        if options.logical_plan:
            logical_plan = self._once(
                ("logical plan", options.accessor),
                lambda: self._failing(self._of(self._after(plan, self._method(_TREE_NODE, "toJSON")), self.string())),
            )
        else:
            logical_plan = self._write(CaptureTag.NONE.value)
        return self._then(
            *[self._on_query(step) for step in query_steps],
            *self._once("failure", self._failure),
            self._on_query(logical_plan),
            self._on_query(self._once("missed", self._kept_nodes)),
        )

    def _start(self) -> Any:
        """``(value, out)``: a new list for the plan's nodes; no prober missed yet."""
        return self._then(
            self._set(
                self.nodes_holder,
                self.lookup.findConstructor(
                    self._classes.java_class("java.util.ArrayList"), self._method_type(self.VOID)
                ),
            ),
            self._void_step(
                self.mh.insertArguments(
                    self._method("java.util.concurrent.atomic.AtomicBoolean", "set", "boolean"),
                    0,
                    self._objects(self._missed, False),
                )
            ),
        )

    def _failure(self) -> list[Any]:
        """``(query execution, exception, out)`` steps: the failure's text, its stack trace, and the planning
        phases (``N`` each for a query that succeeded)."""
        stack_trace = self._method(
            "org.apache.commons.lang3.exception.ExceptionUtils", "getStackTrace", "java.lang.Throwable"
        )
        phases = self._failing(
            self._of(
                self._after(
                    self._after(self._method(_QUERY_EXECUTION, "tracker"), self._dynamic("phases")),
                    self._dynamic("mkString", ITEM_SEP),
                ),
                self.string(),
            )
        )
        # the phases are read of the query execution, for a failed query only
        phases_if_failed = self.mh.guardWithTest(
            self.mh.dropArguments(self._is_null(), 0, self._types(self.OBJ)),
            self.mh.dropArguments(self._write(CaptureTag.NONE.value), 1, self._types(self.OBJ)),
            self._on_query(phases),
        )
        return [
            self._on_exception(self._failing(self.string())),
            self._on_exception(self._failing(self._of(stack_trace, self.string()))),
            phases_if_failed,
        ]

    def _kept_nodes(self) -> Any:
        """``(value, out)``: whether a prober missed; when none did, the plan's nodes are let go."""
        missed = self.mh.insertArguments(
            self._method("java.util.concurrent.atomic.AtomicBoolean", "get"), 0, self._objects(self._missed)
        )
        flag = self._of(
            self.mh.dropArguments(missed.asType(self._method_type(self.OBJ)), 0, self._types(self.OBJ)), self.scalar()
        )
        let_go = self.mh.guardWithTest(
            self.mh.dropArguments(missed, 0, self._types(self.OBJ, self.SB)),
            self.mh.empty(self._method_type(self.VOID, self.OBJ, self.SB)),
            self._set(self.nodes_holder, self.mh.constant(self.OBJ, None)),
        )
        return self._then(flag, let_go)

    def _probed(self) -> Any:
        """``(value, out)``: what the probers write of each plan node the walk met, in the order it met them,
        once the whole plan is written (as the probes were always read: Delta's commands make new
        expression ids for their output at each call, which a probe reading their schema would shift)."""
        nodes = self.mh.dropArguments(
            self.mh.insertArguments(
                self._method("java.util.concurrent.atomic.AtomicReference", "get"), 0, self._objects(self.nodes_holder)
            ),
            0,
            self._types(self.OBJ),
        )
        each = self._for_each(
            self._after(nodes, self._method("java.util.List", "iterator")), self.dispatch(), "java.util.Iterator"
        )
        # (probes text, value, out): probe each node into the text, then write the text
        into_text = self.mh.permuteArguments(
            each, self._method_type(self.VOID, self.SB, self.OBJ, self.SB), self._ints(1, 0)
        )
        written = self.mh.dropArguments(self.string(), 1, self._types(self.OBJ)).asType(
            self._method_type(self.VOID, self.SB, self.OBJ, self.SB)
        )
        new_builder = self.lookup.findConstructor(self.SB, self._method_type(self.VOID))
        return self.mh.foldArguments(self._then(into_text, written), new_builder)

    def _set(self, holder: Any, value_of: Any) -> Any:
        """``(value, out)``: put what ``value_of()`` makes into the ``holder`` reference."""
        put = self.mh.insertArguments(
            self._method("java.util.concurrent.atomic.AtomicReference", "set", "java.lang.Object"),
            0,
            self._objects(holder),
        )
        return self._void_step(self.mh.foldArguments(put, value_of.asType(self._method_type(self.OBJ))))

    def _void_step(self, handle: Any) -> Any:
        """A ``()`` handle as a ``(value, out)`` step."""
        return self.mh.dropArguments(self._void(handle), 0, self._types(self.OBJ, self.SB))

    def _tree(self, detail: TreeDetail, max_chars: int) -> Any:
        """``(plan, out)``: the plan's text, walked into a builder of its own, or ``L<n>;`` when it is longer
        than ``max_chars`` (the walk itself stops at :data:`MAX_TEXT_CHARS`, as the tree reader's)."""
        walk = self.walk(MAX_TEXT_CHARS, self.nodes_holder, detail)
        length = self.lookup.findVirtual(self.SB, "length", self._method_type(self.INT))
        # length <= max_chars: max(length, max_chars) == max_chars
        fits = self._after(
            self._after(
                length,
                self.mh.insertArguments(
                    self._method("java.lang.Math", "max", "int", "int"), 1, self._objects(max_chars)
                ),
            ).asType(self._method_type(self.OBJ, self.SB)),
            self.mh.insertArguments(
                self._method("java.util.Objects", "equals", "java.lang.Object", "java.lang.Object"),
                1,
                self._objects(max_chars),
            ),
        )
        too_long = self._then(
            self._write(CaptureTag.TOO_LONG.value),
            self._write_text_of(self._text(length.asType(self._method_type(self.INT, self.OBJ)))),
        )
        emit = self.mh.guardWithTest(fits.asType(self._method_type(self.BOOL, self.OBJ)), self.string(), too_long)
        # (text, plan, out): walk the plan into text, then emit text to out
        walked = self.mh.permuteArguments(
            walk, self._method_type(self.VOID, self.SB, self.OBJ, self.SB), self._ints(1, 0)
        )
        emitted = self.mh.dropArguments(
            emit.asType(self._method_type(self.VOID, self.SB, self.SB)), 1, self._types(self.OBJ)
        )
        new_builder = self.lookup.findConstructor(self.SB, self._method_type(self.VOID))
        return self.mh.foldArguments(self._then(walked, emitted), new_builder)

    def _executed(self, metrics: bool) -> list[Any]:
        """The executed plan's root (below whole-stage codegen) and, with ``metrics``, the SQL metrics of the
        node that wrote (below adaptive execution and Spark 4's result stage), as the reader always read them."""
        node_name = self._method(_TREE_NODE, "nodeName")

        def below(prefix: str, child: str) -> Any:
            """``(Object)Object``: the plan's ``child`` when its node name starts with ``prefix``."""
            starts = self._after(
                node_name,
                self.mh.insertArguments(
                    self._method("java.lang.String", "startsWith", "java.lang.String"), 1, self._objects(prefix)
                ),
            )
            return self.mh.guardWithTest(starts, self._dynamic(child), self.mh.identity(self.OBJ))

        executed = self._after(self._method(_QUERY_EXECUTION, "executedPlan"), below("WholeStageCodegen", "child"))
        steps = [self._failing(self._of(self._after(executed, node_name), self.string()))]
        if metrics:
            written = self._after(
                self._after(executed, below("AdaptiveSparkPlan", "executedPlan")), below("ResultQueryStage", "plan")
            )
            joined = self._after(self._after(written, self._dynamic("metrics")), self._dynamic("mkString", ITEM_SEP))
            steps.append(self._failing(self._of(joined, self.string())))
        else:
            steps.append(self._write(CaptureTag.NONE.value))
        return steps

    def _sql(self, plan: Any) -> Any:
        """``(query execution, out)``: the SQL text of the plan's root when its origin has one, else ``[`` that of
        each child of the parsed plan ``]`` (the query below a command an analyzer rule put in the root's
        place), as the reader always looked for it."""
        sql_text = self._after(self._method(_TREE_NODE, "origin"), self._dynamic("sqlText"))
        option = self.mh.guardWithTest(
            self._method("scala.Option", "isDefined"),
            self._of(self._method("scala.Option", "get"), self.string()),
            self._write(CaptureTag.NONE.value),
        )
        root_text = self._after(plan, sql_text)
        children = self._after(
            self._after(self._method(_QUERY_EXECUTION, "logical"), self._method(_TREE_NODE, "children")),
            self._method("scala.collection.Seq", "iterator"),
        )
        each_child = self._then(
            self._write(CaptureTag.LIST.value),
            self._for_each(children, self._of(sql_text, option)),
            self._write(CaptureTag.LIST_END.value),
        )
        has_root_text = self._after(root_text, self._method("scala.Option", "isDefined"))
        return self.mh.guardWithTest(has_root_text, self._of(root_text, option), each_child)


class _FieldReader(TextReader):
    """Reads the values of a header or a body."""

    def value(self) -> Field:
        tag = self._take(1)
        if tag == CaptureTag.STRING.value:
            return self._string()
        if tag == CaptureTag.NUMBER.value:
            return read_scalar(self._token())
        if tag == CaptureTag.NONE.value:
            return None
        if tag == CaptureTag.FAILED.value:
            return FAILED
        if tag == CaptureTag.TOO_LONG.value:
            return TooLong(int(self._token()))
        if tag == CaptureTag.LIST.value:
            items: list[Field] = []
            while self._peek() != CaptureTag.LIST_END.value:
                items.append(self.value())
            self.position += 1
            return items
        raise DecodeError(f"unknown tag {tag!r} at {self.position - 1}")
