"""Spark-specific reads: a finished query's plans, its executed plan and metrics, why it failed, and the
catalog lookups some probes need (a table by name, a V2 table, the plan behind a cached relation).

:meth:`QueryReader.capture` turns a ``QueryExecution`` into a :class:`~spark_lineage.plan.CapturedQuery` in
two JVM calls (:mod:`spark_lineage.jvm.capture`), whatever the number of the plan's nodes and datasets:

1. the header: which plan could be had, its root (whether the query is reported is decided on it) and the
   query's id;
2. the body: the plan whole, expressions included (:mod:`spark_lineage.jvm.catalyst_tree`; a plan larger than
   the budget is read as its shape only), the values handlers probe of its nodes, read by JVM-side probers
   (:mod:`spark_lineage.jvm.probes`), the executed plan's root (which names the job), a write's SQL metrics
   (its output statistics), the SQL text, and why it failed.

What the JVM side leaves to Python is read the Python way, a round trip or more per value, as every value was
before: the probes that need the catalog or a nested plan (only for plans that hold such nodes), the classes
met for the first time (once each), and any part that threw (so that the error reads as it always did).

It decides nothing about what the plan means.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from spark_lineage.errors import DecodeError, JvmError
from spark_lineage.jvm.capture import (
    FAILED,
    BodyField,
    BodyOptions,
    CaptureFunctions,
    Failed,
    Field,
    HeaderField,
    TooLong,
)
from spark_lineage.jvm.catalyst_tree import (
    FULL,
    MAX_TEXT_CHARS,
    SHAPE,
    CatalystTreeReader,
    TreeDetail,
    TreeRead,
    decode_plan,
)
from spark_lineage.jvm.listener import read_query_jobs
from spark_lineage.jvm.probes import JvmProbes, ProbeEvaluator, ProbeLookup
from spark_lineage.jvm.rdd import RddGraphReader
from spark_lineage.jvm.sql_jobs import sql_job_store
from spark_lineage.jvm.values import JvmClasses, message, parse_map, parse_metrics, safe
from spark_lineage.jvm.wire import ITEM_SEP
from spark_lineage.plan import CapturedNode, CapturedQuery, CatalystNode, QueryOrigin, simple_class_name

log = logging.getLogger(__name__)


@dataclass
class PendingQuery:
    """What the listener callback hands to the worker: references only, nothing read from the JVM yet."""

    func_name: str
    query_execution: Any
    end_ms: int
    duration_ns: int | None = None
    exception: Any = None
    plans: tuple[str, ...] = ("optimizedPlan", "analyzed", "logical")
    origin: QueryOrigin | None = None
    """For a query heard on the listener bus: the session that ran it (``None``: the listened session's)."""
    """The plans to read, the first one that can be had: a micro-batch is read as analyzed, where its sink is
    still the root (the optimizer removes a V1 sink's node)."""


@dataclass(frozen=True)
class CaptureRules:
    """What the analysis wants read, as plain functions of class names: the edge asks, never decides."""

    probes_for: ProbeLookup
    is_reported: Callable[[str, str], bool]
    """``(root class, funcName)``: whether a query is worth reading at all."""
    wants_metrics: Callable[[str], bool]
    """``root class``: whether the execution's SQL metrics (rows, bytes, files written) are wanted."""
    detail: TreeDetail = FULL
    """How much of the plan to read: its expressions too (column lineage needs them), or only its shape."""
    max_plan_chars: int = 2_000_000
    """A plan whose text is longer is read as its shape only, and the query says so."""
    logical_plan_json: bool = False
    """Read the plan as Spark's JSON too (``toJSON``, one call), for the ``spark.logicalPlan`` run facet."""


def read_session_conf(jsession: Any) -> dict[str, str]:
    """Every conf a session sees: its SQLConf holds every SparkConf entry and the runtime ``spark.conf.set``
    values, and one ``mkString`` brings them all across."""
    return parse_map(str(jsession.sessionState().conf().getAllConfs().mkString(ITEM_SEP)))


class QueryReader:
    """Reads finished queries of one SparkSession."""

    def __init__(self, jsession: Any, gateway: Any, classes: JvmClasses, probes_for: ProbeLookup) -> None:
        self._jsession = jsession
        self._session_key: str | None = None
        self._classes = classes
        self._functions: CaptureFunctions | None = None
        self._jvm_probes: JvmProbes | None = None
        self._jobs = sql_job_store(gateway, classes)
        try:
            self._functions = CaptureFunctions(gateway, classes, self._jobs)
            self._jvm_probes = JvmProbes(self._functions, classes, probes_for)
        except Exception:
            log.debug("spark_lineage: queries are read without JVM-side functions", exc_info=True)
            self._functions = self._jvm_probes = None
        self._trees = CatalystTreeReader(gateway, classes, self._functions)
        self._probes = ProbeEvaluator(classes, probes_for)
        if self._jvm_probes is not None:
            self._probes.on_capture = self._jvm_probes.met
        self._probes.add_resolver("table", self._lookup_table)
        self._probes.add_resolver("v2table", self._load_v2_table)
        self._probes.add_resolver("tree", self._nested_tree)
        self._probes.add_resolver("cached_plan", self._cached_plan)
        self._probes.add_resolver("qualified_path", self._qualified_path)
        self._probes.add_resolver("rdd_graph", RddGraphReader(classes).read)
        self._session_catalog: Any = None
        self._active_on: int | None = None
        self._rules: CaptureRules | None = None
        self._errors: list[str] = []
        self._last_options: dict[tuple[str, ...], BodyOptions] = {}
        """The body options of the last query read, by its plan accessors: the next one's guess."""

    def use_session(self, jsession: Callable[[], Any], key: str) -> None:
        """Read the next queries through the session ``key`` names (``jsession()`` gives it, asked only when the
        session changes): catalog lookups and the active session are per session."""
        if key == self._session_key:
            return
        self._jsession = jsession()
        self._session_key = key
        self._session_catalog = None
        self._active_on = None

    def session_conf(self) -> dict[str, str]:
        """Every conf the session the last query was read through sees: SparkConf entries and runtime settings."""
        if self._functions is not None:
            try:
                return parse_map(self._functions.session_conf(self._jsession))
            except Exception:  # read the Python way, which reports what went wrong
                log.debug("spark_lineage: a session's confs could not be read in one call", exc_info=True)
        return read_session_conf(self._jsession)

    def capture(self, pending: PendingQuery, rules: CaptureRules) -> CapturedQuery | None:
        """Read what the analysis needs about one finished query. ``None`` when ``rules`` say the query is not
        reported (decided after a single look at the plan's root)."""
        query = CapturedQuery(func_name=pending.func_name, start_ms=pending.end_ms, end_ms=pending.end_ms, tree=None)
        if pending.duration_ns is not None:
            query.start_ms = pending.end_ms - pending.duration_ns // 1_000_000
        functions, probes = self._functions, self._jvm_probes
        if functions is None or probes is None:
            return self._capture_slowly(pending, rules, query)
        qe = pending.query_execution
        # The body's options are those of the last query read with the same plan accessors, most of the time:
        # guessed, the body and the header are read in one call, and the body again only when the guess was wrong.
        guess = self._last_options.get(pending.plans)
        read: list[Field] | None = None
        try:
            both = None
            if guess is not None:
                try:
                    both = functions.body_and_header(qe, pending.exception, guess, pending.plans)
                except Exception as error:  # noqa: BLE001 - asked for one by one, each failure then said on its own
                    log.debug("spark_lineage: a query's body and header, read at once, are read apart: %s", error)
            if both is None:
                header = functions.header(qe, pending.plans)
            else:
                read, header = both
        except Exception:
            log.debug("spark_lineage: a query's header could not be read", exc_info=True)
            return self._capture_slowly(pending, rules, query)
        found = header[HeaderField.PLAN]
        if not isinstance(found, int):  # no plan could be had: the Python way reports why
            return self._capture_slowly(pending, rules, query)
        accessor = pending.plans[found]
        # The plans asked for first threw: read them again for their errors.
        self._logical_plan(qe, query, pending.plans[:found])
        root_name = str(header[HeaderField.ROOT_NAME])
        if not rules.is_reported(root_name, pending.func_name):
            return None
        query_id = header[HeaderField.QUERY_ID]
        query.query_id = (
            _guard(query, "query id", lambda: int(qe.id())) if isinstance(query_id, Failed) else _int(query_id)
        )
        jobs = header[HeaderField.JOBS]
        query.jobs = read_query_jobs(jobs if isinstance(jobs, str) else None, query.query_id)
        detail = rules.detail.effective()
        options = BodyOptions(
            accessor=accessor,
            detail=detail,
            max_chars=rules.max_plan_chars if detail.expressions else MAX_TEXT_CHARS,
            metrics=rules.wants_metrics(simple_class_name(str(header[HeaderField.ROOT_CLASS]))),
            logical_plan=rules.logical_plan_json,
        )
        self._last_options[pending.plans] = options
        try:
            body = read if read is not None and options == guess else functions.body(qe, pending.exception, options)
        except Exception:  # read the Python way (the header took the query's jobs out: kept)
            log.debug("spark_lineage: a query's body could not be read", exc_info=True)
            fresh = CapturedQuery(pending.func_name, query.start_ms, query.end_ms, tree=None, jobs=query.jobs)
            return self._capture_slowly(pending, rules, fresh)

        def plan() -> Any:
            return getattr(qe, accessor)()

        if pending.exception is not None:
            self._read_failure(pending, qe, query, body)
        self._rules, self._errors = rules, query.capture_errors
        try:
            query.tree = self._read_tree_from(body, plan, rules, query.capture_errors)
        finally:
            self._rules, self._errors = None, []
            probes.register_met()
        root_class = query.tree.simple_name if query.tree is not None else root_name
        wants_metrics = rules.wants_metrics(root_class)
        executed, metrics = body[BodyField.EXECUTED_NODE], body[BodyField.METRICS]
        if wants_metrics != options.metrics or isinstance(executed, Failed) or isinstance(metrics, Failed):
            self._read_execution(qe, query, wants_metrics)
        else:
            query.executed_node = str(executed)
            if wants_metrics:
                query.metrics = parse_metrics(str(metrics))
        if rules.logical_plan_json:
            logical_plan = body[BodyField.LOGICAL_PLAN]
            query.logical_plan = (
                _guard(query, "logical plan JSON", lambda: str(plan().toJSON()))
                if isinstance(logical_plan, Failed)
                else _text(logical_plan)
            )
        sql = body[BodyField.SQL]
        if isinstance(sql, Failed):
            query.sql = _guard(query, "sql text", lambda: self._sql_text(qe, plan()))
        else:
            texts = sql if isinstance(sql, list) else [sql]
            query.sql = next((str(text) for text in texts if text is not None), None)
        return query

    def _read_tree_from(
        self, body: list[Field], plan: Callable[[], Any], rules: CaptureRules, errors: list[str]
    ) -> CatalystNode | None:
        """The plan as the body holds it, its nodes probed; what the JVM side could not read is read the Python
        way (``plan()`` gives the plan)."""
        text = body[BodyField.TREE]
        if isinstance(text, TooLong):
            error = JvmError(
                f"the plan is {text.length} characters of text, more than the {rules.max_plan_chars} allowed"
            )
            errors.append(f"column lineage: the plan could not be read whole ({message(error)})")
            return self._read_tree(plan(), replace(rules, detail=SHAPE), errors)
        if not isinstance(text, str):
            return self._read_tree(plan(), rules, errors)
        assert self._jvm_probes is not None and self._functions is not None
        nodes = self._functions.nodes_holder.getAndSet(None) if body[BodyField.MISSED] else None
        try:
            tree, plan_nodes = decode_plan(text, self._trees.field_names)
            if not isinstance(tree, CatalystNode):
                raise DecodeError(f"expected a tree node, read {type(tree).__name__}")
            left = self._jvm_probes.read(str(body[BodyField.PROBES]), plan_nodes)
        except DecodeError:
            log.debug("spark_lineage: a plan's text could not be read", exc_info=True)
            return self._read_tree(plan(), rules, errors)
        if left:
            if nodes is None:  # nothing kept to probe them with (a handler's probes changed since)
                return self._read_tree(plan(), rules, errors)
            self._probe_nodes(TreeRead(tree, nodes), left)
        return tree

    def _capture_slowly(self, pending: PendingQuery, rules: CaptureRules, query: CapturedQuery) -> CapturedQuery | None:
        """:meth:`capture` the Python way, a round trip or more per value: where the header could not be read
        (no plan could be had, or no JVM-side function made)."""
        qe = pending.query_execution
        plan = self._logical_plan(qe, query, pending.plans)
        # A logical plan's node name is its class's simple name: one call decides whether to read more.
        root_name = str(plan.nodeName()) if plan is not None else None
        if root_name is not None and not rules.is_reported(root_name, pending.func_name):
            return None
        # What the query's Spark jobs were filed under (jvm.sql_jobs).
        query.query_id = _guard(query, "query id", lambda: int(qe.id()))
        query_id = query.query_id
        if query_id is not None and not query.jobs:
            query.jobs = read_query_jobs(safe(lambda: self._jobs.take_slowly(query_id)), query_id)
        if pending.exception is not None:
            self._read_failure(pending, qe, query)
        if plan is not None and root_name is not None:
            self._rules, self._errors = rules, query.capture_errors
            try:
                query.tree = self._read_tree(plan, rules, query.capture_errors)
            finally:
                self._rules, self._errors = None, []
            root_class = query.tree.simple_name if query.tree is not None else root_name
            self._read_execution(qe, query, rules.wants_metrics(root_class))
            if rules.logical_plan_json:
                query.logical_plan = _guard(query, "logical plan JSON", lambda: str(plan.toJSON()))
        query.sql = _guard(query, "sql text", lambda: self._sql_text(qe, plan))
        return query

    def _sql_text(self, qe: Any, plan: Any) -> str | None:
        """The SQL text the query was parsed from. Spark keeps it in the origin of the nodes its parser made:
        the root's, usually (the optimized root keeps it). Where an analyzer rule replaced the root (a CTAS,
        and the write it runs, on Spark 4.2 and later), the parsed query below it still has it; deeper nodes
        are not searched, which would cost round trips on every DataFrame query, whose nodes have none."""
        logical = qe.logical()
        root = plan if plan is not None else logical
        text = self._probes.option(root.origin().sqlText())
        if text is None:
            children = logical.children()
            for index in range(children.size()):
                text = self._probes.option(children.apply(index).origin().sqlText())
                if text is not None:
                    break
        return None if text is None else str(text)

    # --- plans ---------------------------------------------------------------------------------------------

    def _logical_plan(self, qe: Any, query: CapturedQuery, accessors: tuple[str, ...]) -> Any:
        for accessor in accessors:
            try:
                return getattr(qe, accessor)()
            except Exception as error:  # noqa: BLE001 - a failed query's lazy plans can re-throw
                query.capture_errors.append(f"{accessor}: {message(error)}")
        return None

    def _read_tree(self, plan: Any, rules: CaptureRules, errors: list[str]) -> CatalystNode | None:
        """The plan, whole if it fits the budget, else its shape (datasets without column lineage)."""
        read: TreeRead | None = None
        if rules.detail.expressions:
            try:
                read = self._trees.read(plan, max_chars=rules.max_plan_chars, detail=rules.detail)
            except Exception as error:  # noqa: BLE001 - fall back to the plan's shape
                errors.append(f"column lineage: the plan could not be read whole ({message(error)})")
        if read is None:
            try:
                read = self._trees.read(plan, detail=SHAPE)
            except Exception as error:  # noqa: BLE001 - the query is still reported, without datasets
                errors.append(f"plan: {message(error)}")
                return None
        self._probe_nodes(read, read.tree.plan_nodes())
        return read.tree

    def _probe_nodes(self, read: TreeRead, nodes: Iterable[CatalystNode]) -> None:
        """Probe the Python way each of ``nodes`` (plan nodes of ``read``) whose class's handler asks for more than
        the tree holds."""
        for node in nodes:
            if self._probes.wants(node.simple_name):
                try:
                    node.probed = self._probes.capture(read.jvm_node(node), node.class_name, node)
                except Exception as error:  # noqa: BLE001 - the node is reported without its probes
                    node.probed = CapturedNode(node.class_name, errors={"node": message(error)}, tree=node)

    def _nested_tree(self, obj: Any) -> CatalystNode | None:
        """A plan that is not part of the query's tree (a physical plan kept by a cache), read the same way."""
        rules = self._rules
        if rules is None:
            return None
        return self._read_tree(obj, rules, self._errors)

    def _cached_plan(self, relation: Any) -> CatalystNode | None:
        """The logical plan a cached relation (``InMemoryRelation``) holds the data of.

        Spark keeps no link from the relation to it, only to the physical plan. The cache manager's entry
        whose cached representation shares the relation's builder has the analyzed plan (what
        openlineage-spark reads); once the cache is dropped (we read after the query ran, and ``unpersist()``
        may come first), the physical plan's link to the optimized logical plan it was planned from serves;
        failing both, the physical plan itself."""
        builder = relation.cacheBuilder()
        system = self._classes("java.lang.System")
        wanted = int(system.identityHashCode(builder))
        manager = self._jsession.sharedState().cacheManager()
        field = manager.getClass().getDeclaredField("cachedData")
        field.setAccessible(True)
        entries = field.get(manager)
        for index in range(int(entries.size())):
            entry = entries.apply(index)
            if int(system.identityHashCode(entry.cachedRepresentation().cacheBuilder())) == wanted:
                return self._nested_tree(entry.plan())
        physical = builder.cachedPlan()
        node = physical
        for _ in range(3):  # whole-stage codegen and input adapters wrap the planned node
            logical = self._probes.option(node.logicalLink())
            if logical is not None:
                return self._nested_tree(logical)
            if int(node.children().size()) != 1:
                break
            node = node.children().apply(0)
        return self._nested_tree(physical)

    def _qualified_path(self, path: Any) -> str:
        """A Hadoop path (or its text) qualified as Spark would write to it: with the default file system's
        scheme and the working directory."""
        if isinstance(path, str):
            path = self._classes("org.apache.hadoop.fs.Path")(path)
        conf = self._jsession.sessionState().newHadoopConf()
        return str(path.getFileSystem(conf).makeQualified(path).toString())

    # --- catalog lookups -----------------------------------------------------------------------------------

    def _lookup_table(self, value: Any) -> CapturedNode:
        """A session-catalog table, from the ``CatalogTable`` a command carries, or else from its name.

        The plan's own ``CatalogTable`` is preferred: we read after the query ran, and by then later statements
        may have changed the catalog. A name is looked up in the catalog; a table that no longer exists yields
        the location the catalog would give it by default.
        """
        catalog = self._catalog()
        if not isinstance(value, str) and str(value.getClass().getName()).endswith(".CatalogTable"):
            node = self._probes.capture(value, "CatalogTable")
            info = node.get("info", {})
            if "Database" not in info or "Location" not in info:
                identifier = catalog.qualifyIdentifier(value.identifier())
                node.props["database"] = self._probes.option(identifier.database())
                node.props["table"] = str(identifier.table())
                node.props["defaultLocation"] = safe(lambda: str(catalog.defaultTablePath(identifier).toString()))
            return node
        if isinstance(value, str):
            value = self._jsession.sessionState().sqlParser().parseTableIdentifier(value)
        identifier = catalog.qualifyIdentifier(value)
        node = CapturedNode(class_name="CatalogTable")
        node.props["database"] = self._probes.option(identifier.database())
        node.props["table"] = str(identifier.table())
        # A later statement may drop or rename the table between the two calls (a remote metastore makes that
        # window wide): then it is gone, as if the first call had said so.
        table = safe(lambda: catalog.getTableMetadata(identifier)) if catalog.tableExists(identifier) else None
        node.props["exists"] = table is not None
        if table is not None:
            node.props.update(self._probes.capture(table, "CatalogTable").props)
        else:
            node.props["defaultLocation"] = safe(lambda: str(catalog.defaultTablePath(identifier).toString()))
        return node

    def _load_v2_table(self, resolved_identifier: Any) -> CapturedNode | None:
        """The table a V2 command named (a ``ResolvedIdentifier``), loaded from its catalog now; ``None`` when it
        no longer exists."""
        self._activate_session()
        catalog = resolved_identifier.catalog()
        try:
            table = catalog.loadTable(resolved_identifier.identifier())
        except Exception:  # noqa: BLE001 - dropped or replaced since: the analysis falls back to defaults
            return None
        return self._probes.capture(table)

    def _activate_session(self) -> None:
        """Make the query's session the active one of the JVM thread we call from, as it is on the thread that ran
        the query: catalogs may look tables up through it (without one, Delta 4's catalog loads a catalog table
        as a bare path)."""
        thread = threading.get_ident()
        if self._active_on != thread:
            self._classes("org.apache.spark.sql.SparkSession").setActiveSession(self._jsession)
            self._active_on = thread

    def _catalog(self) -> Any:
        if self._session_catalog is None:
            self._session_catalog = self._jsession.sessionState().catalog()
        return self._session_catalog

    # --- execution -----------------------------------------------------------------------------------------

    def _read_failure(
        self, pending: PendingQuery, qe: Any, query: CapturedQuery, body: list[Field] | None = None
    ) -> None:
        """Why the query failed, and when it started; from the ``body`` where it holds them."""
        exception = pending.exception

        def read(field: BodyField, what: str, read: Callable[[], str]) -> str | None:
            value = FAILED if body is None else body[field]
            return _guard(query, what, read) if isinstance(value, Failed) else _text(value)

        query.error = read(BodyField.ERROR, "error message", lambda: str(exception.toString())) or "query failed"
        query.error_stack = read(
            BodyField.ERROR_STACK,
            "error stack trace",
            lambda: str(self._classes("org.apache.commons.lang3.exception.ExceptionUtils").getStackTrace(exception)),
        )
        # A failed execution reports no duration: its planning phases say when it started.
        phases = read(BodyField.PHASES, "planning phases", lambda: str(qe.tracker().phases().mkString(ITEM_SEP)))
        starts = [int(m) for m in re.findall(r"PhaseSummary\((\d+),", phases or "")]
        if starts:
            query.start_ms = min(*starts, query.end_ms)

    def _read_execution(self, qe: Any, query: CapturedQuery, wants_metrics: bool) -> None:
        def read() -> None:
            executed = qe.executedPlan()
            name = str(executed.nodeName())
            if name.startswith("WholeStageCodegen"):
                executed = executed.child()
                name = str(executed.nodeName())
            query.executed_node = name
            if wants_metrics:
                # Adaptive execution wraps the write: its final plan (Spark 4 adds a result stage around it)
                # holds the command and its metrics.
                if name.startswith("AdaptiveSparkPlan"):
                    executed = executed.executedPlan()
                    if str(executed.nodeName()).startswith("ResultQueryStage"):
                        executed = executed.plan()
                query.metrics = parse_metrics(str(executed.metrics().mkString(ITEM_SEP)))

        _guard(query, "executed plan", read)


def _text(value: Field) -> str | None:
    return None if value is None else str(value)


def _int(value: Field) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _guard(query: CapturedQuery, what: str, read: Callable[[], Any]) -> Any:
    try:
        return read()
    except Exception as error:  # noqa: BLE001 - reported as an extraction error, never raised
        query.capture_errors.append(f"{what}: {message(error)}")
        return None
