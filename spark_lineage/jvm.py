"""The py4j edge: the only module that talks to the JVM.

It registers the query listener, adds the Iceberg metrics reporter to Iceberg catalogs (and takes it out
again), and turns a finished query's ``QueryExecution`` into a :class:`~spark_lineage.plan.CapturedQuery` of
plain Python values. It does not know what any plan node means:
handlers declare, as :class:`~spark_lineage.plan.Probe` chains, which values they need from which node
classes, and this module evaluates those chains with as few round trips as it can:

- only the plan's root and leaves are visited (``collectLeaves`` walks the tree inside the JVM);
- collections and maps are joined JVM-side with ``mkString`` and cross in one call;
- Scala ``Option`` is unwrapped with ``orNull`` in one call;
- chains that share a prefix share its calls.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from spark_lineage.plan import (
    CapturedNode,
    CapturedPlan,
    CapturedQuery,
    Probe,
    SessionInfo,
    simple_class_name,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# Separators for values joined JVM-side: ASCII unit/record separators never occur in paths or table names.
_ITEM_SEP = "\x1e"
_KV_SEP = " -> "
_METRIC_VALUE = re.compile(r"value: (-?\d+)\)\s*$")
_QUERY_LISTENER = "org.apache.spark.sql.util.QueryExecutionListener"
_METRICS_REPORTER = "org.apache.iceberg.metrics.MetricsReporter"

ProbeLookup = Callable[[str], Mapping[str, Probe]]
"""Given a node's simple class name, the probes its handler wants (empty when none)."""


@dataclass
class PendingQuery:
    """What the listener callback hands to the worker: references only, nothing read from the JVM yet."""

    func_name: str
    query_execution: Any
    end_ms: int
    duration_ns: int | None = None
    exception: Any = None


class JvmError(RuntimeError):
    """Something could not be read from the JVM; the message says what."""


class QueryListener:
    """A ``QueryExecutionListener`` implemented in Python. Spark calls it on its listener-bus thread; it only
    hands a :class:`PendingQuery` to ``sink`` and returns, and never lets an exception escape into Spark."""

    def __init__(self, sink: Callable[[PendingQuery], object], name: str) -> None:
        self._sink = sink
        self._name = name
        self.calls = 0
        """How many queries Spark has reported to this listener."""

    def onSuccess(self, funcName: str, qe: Any, durationNs: int) -> None:
        self.calls += 1
        try:
            self._sink(PendingQuery(funcName, qe, int(time.time() * 1000), duration_ns=int(durationNs)))
        except BaseException:
            log.debug("spark_lineage listener could not queue a query", exc_info=True)

    def onFailure(self, funcName: str, qe: Any, exception: Any) -> None:
        self.calls += 1
        try:
            self._sink(PendingQuery(funcName, qe, int(time.time() * 1000), exception=exception))
        except BaseException:
            log.debug("spark_lineage listener could not queue a failed query", exc_info=True)

    # py4j proxies need these to behave in Java collections (ListenerManager keeps a list of listeners).
    def equals(self, other: Any) -> bool:
        return other is self

    def hashCode(self) -> int:
        return id(self) & 0x7FFFFFFF

    def toString(self) -> str:
        return self._name

    class Java:
        implements = [_QUERY_LISTENER]


@dataclass
class PendingReport:
    """An Iceberg ``MetricsReport`` as the reporter received it: a reference, read later by the worker."""

    report: Any


class IcebergMetricsReporter:
    """An Iceberg ``MetricsReporter`` implemented in Python. Iceberg calls it on the thread that committed or
    planned a scan; it only hands the report to ``sink`` and returns, and never raises into Iceberg."""

    def __init__(self, sink: Callable[[PendingReport], object]) -> None:
        self._sink = sink
        self.active = True

    def report(self, report: Any) -> None:
        if not self.active:
            return
        try:
            self._sink(PendingReport(report))
        except BaseException:
            log.debug("spark_lineage could not queue an Iceberg report", exc_info=True)

    def initialize(self, properties: Any) -> None:
        pass

    def close(self) -> None:
        pass

    def equals(self, other: Any) -> bool:
        return other is self

    def hashCode(self) -> int:
        return id(self) & 0x7FFFFFFF

    def toString(self) -> str:
        return "spark_lineage Iceberg metrics reporter"

    class Java:
        implements = [_METRICS_REPORTER]


@dataclass
class _FieldRestore:
    owner: Any
    field: Any
    original: Any


class JvmBridge:
    """All JVM access for one SparkSession."""

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark
        self._jsession = spark._jsparkSession
        self._sc = spark.sparkContext
        self._gateway = self._sc._gateway
        self._jvm: Any = self._sc._jvm
        self._listener_handle: Any = None
        self._option_evidence: Any = None
        self._session_catalog: Any = None
        self._iceberg_restores: list[_FieldRestore] = []

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
            user=_safe(lambda: str(jsc.sparkUser())),
            deploy_mode=conf.get("spark.submit.deployMode", "client"),
            driver_host=conf.get("spark.driver.host"),
            ui_url=_safe(lambda: self._option(jsc.uiWebUrl())),
            session_id=self.session_key,
            conf=conf,
        )

    def session_conf(self) -> dict[str, str]:
        """Every conf the session sees: SparkConf entries and runtime settings."""
        # The session's SQLConf already holds every SparkConf entry plus runtime `spark.conf.set` values,
        # so one mkString brings all of it across.
        joined = self._jsession.sessionState().conf().getAllConfs().mkString(_ITEM_SEP)
        return _parse_map(str(joined))

    def is_stopped(self) -> bool:
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
        holder = self._jvm.java.util.ArrayList()
        holder.add(listener)
        handle = holder.get(0)
        self._jsession.listenerManager().register(handle)
        self._listener_handle = handle

    def unregister_listener(self) -> None:
        handle, self._listener_handle = self._listener_handle, None
        if handle is not None and not self.is_stopped():
            self._jsession.listenerManager().unregister(handle)

    # --- Iceberg metrics reporter -----------------------------------------------------------------------------

    def install_iceberg_reporter(self, reporter: IcebergMetricsReporter, catalog_names: list[str]) -> list[str]:
        """Add ``reporter`` to the metrics reporter of each named Iceberg Spark catalog, keeping whatever reporter
        the catalog already had (``metrics-reporter-impl``) working beside it. Tables the catalog has already
        loaded and cached get it too. Returns the catalogs it was added to; the others are logged."""
        holder = self._jvm.java.util.ArrayList()
        holder.add(reporter)
        proxy = holder.get(0)
        combine = self._jvm.org.apache.iceberg.metrics.MetricsReporters.combine
        manager = self._jsession.sessionState().catalogManager()
        installed = []
        for name in catalog_names:
            try:
                iceberg_catalog = manager.catalog(name).icebergCatalog()
                cached_tables = []
                if str(iceberg_catalog.getClass().getSimpleName()) == "CachingCatalog":
                    cache = self._field_value(iceberg_catalog, "tableCache")
                    cached_tables = list(cache.asMap().values())
                    iceberg_catalog = self._field_value(iceberg_catalog, "catalog")
                if str(iceberg_catalog.getClass().getSimpleName()) == "RESTCatalog":
                    owner, field_name = self._field_value(iceberg_catalog, "sessionCatalog"), "reporter"
                else:
                    owner, field_name = iceberg_catalog, "metricsReporter"
                    self._call_declared(owner, "metricsReporter")  # loads metrics-reporter-impl if not yet
                self._wrap_field(owner, field_name, lambda current: combine(current, proxy) if current else proxy)
                for table in cached_tables:
                    self._wrap_field(table, "reporter", lambda current: combine(current, proxy) if current else proxy)
                installed.append(name)
            except Exception as error:  # noqa: BLE001 - one odd catalog must not stop the others
                log.warning("spark_lineage: no Iceberg metrics from catalog %s: %s", name, _message(error))
        return installed

    def uninstall_iceberg_reporter(self) -> None:
        """Put every reporter field changed by :meth:`install_iceberg_reporter` back as it was."""
        restores, self._iceberg_restores = self._iceberg_restores, []
        if self.is_stopped():
            return
        for restore in reversed(restores):
            restore.field.set(restore.owner, restore.original)

    def iceberg_report_json(self, pending: PendingReport) -> tuple[str, str]:
        """(``commit`` or ``scan``, the report in Iceberg's own JSON), in one call for the JSON."""
        metrics = self._jvm.org.apache.iceberg.metrics
        if str(pending.report.getClass().getSimpleName()).endswith("CommitReport"):
            return "commit", str(metrics.CommitReportParser.toJson(pending.report))
        return "scan", str(metrics.ScanReportParser.toJson(pending.report))

    def _declared_field(self, obj: Any, name: str) -> Any:
        cls = obj.getClass()
        while cls is not None:
            for field in cls.getDeclaredFields():
                if str(field.getName()) == name:
                    field.setAccessible(True)
                    return field
            cls = cls.getSuperclass()
        raise JvmError(f"{obj.getClass().getName()} has no field {name}")

    def _field_value(self, obj: Any, name: str) -> Any:
        return self._declared_field(obj, name).get(obj)

    def _wrap_field(self, owner: Any, name: str, wrap: Callable[[Any], Any]) -> None:
        field = self._declared_field(owner, name)
        original = field.get(owner)
        field.set(owner, wrap(original))
        self._iceberg_restores.append(_FieldRestore(owner, field, original))

    def _call_declared(self, obj: Any, name: str) -> Any:
        cls = obj.getClass()
        while cls is not None:
            for method in cls.getDeclaredMethods():
                if str(method.getName()) == name and int(method.getParameterCount()) == 0:
                    method.setAccessible(True)
                    return method.invoke(obj, None)
            cls = cls.getSuperclass()
        return None

    # --- capture -------------------------------------------------------------------------------------------

    def capture(
        self,
        pending: PendingQuery,
        probes_for: ProbeLookup,
        wanted: Callable[[str, str], bool],
        wants_metrics: Callable[[str], bool],
    ) -> CapturedQuery | None:
        """Read what the analysis needs about one finished query. Returns ``None`` when ``wanted(root class,
        funcName)`` says the query is not reported (after a single look at the plan's root)."""
        qe = pending.query_execution
        query = CapturedQuery(
            func_name=pending.func_name,
            start_ms=pending.end_ms,
            end_ms=pending.end_ms,
            plan=None,
        )
        if pending.duration_ns is not None:
            query.start_ms = pending.end_ms - pending.duration_ns // 1_000_000
        plan = self._logical_plan(qe, query)
        root_class = self._class_name(plan) if plan is not None else None
        if root_class is not None and not wanted(simple_class_name(root_class), pending.func_name):
            return None
        if pending.exception is not None:
            self._read_failure(pending, qe, query)
        if plan is not None and root_class is not None:
            query.plan = self._capture_plan(plan, root_class, probes_for, query.capture_errors)
            self._read_execution(qe, query, wants_metrics(simple_class_name(root_class)))
        # Spark keeps the SQL text a plan was parsed from in its root's origin (the optimized root keeps it).
        query.sql = self._guard(
            query, "sql text", lambda: self._option((plan if plan is not None else qe.logical()).origin().sqlText())
        )
        return query

    def _logical_plan(self, qe: Any, query: CapturedQuery) -> Any:
        for accessor in ("optimizedPlan", "analyzed", "logical"):
            try:
                return getattr(qe, accessor)()
            except Exception as error:  # noqa: BLE001 - a failed query's lazy plans can re-throw
                query.capture_errors.append(f"{accessor}: {_message(error)}")
        return None

    def _read_failure(self, pending: PendingQuery, qe: Any, query: CapturedQuery) -> None:
        exception = pending.exception
        query.error = self._guard(query, "error message", lambda: str(exception.toString())) or "query failed"
        query.error_stack = self._guard(
            query,
            "error stack trace",
            lambda: str(self._jvm.org.apache.commons.lang3.exception.ExceptionUtils.getStackTrace(exception)),
        )
        # A failed execution reports no duration: its planning phases say when it started.
        phases = self._guard(query, "planning phases", lambda: str(qe.tracker().phases().mkString(_ITEM_SEP)))
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
                query.metrics = _parse_metrics(str(executed.metrics().mkString(_ITEM_SEP)))

        self._guard(query, "executed plan", read)

    def _capture_plan(self, plan: Any, root_class: str, probes_for: ProbeLookup, errors: list[str]) -> CapturedPlan:
        root = self._capture_node(plan, root_class, probes_for, errors)
        leaves_seq = plan.collectLeaves()
        count = int(leaves_seq.length())
        leaves: list[CapturedNode] = []
        for index in range(count):
            leaf = leaves_seq.apply(index)
            class_name = self._class_name(leaf)
            if count == 1 and class_name == root_class:
                break  # a plan that is a single node (a leaf command): the root is all there is
            leaves.append(self._capture_node(leaf, class_name, probes_for, errors))
        return CapturedPlan(root=root, leaves=leaves)

    def _capture_node(
        self, obj: Any, class_name: str | None, probes_for: ProbeLookup, errors: list[str]
    ) -> CapturedNode:
        class_name = class_name or self._class_name(obj)
        node = CapturedNode(class_name=class_name)
        probes = probes_for(simple_class_name(class_name))
        cache: dict[tuple[str, ...], Any] = {(): obj}
        for name, spec in probes.items():
            try:
                node.props[name] = self._evaluate(obj, spec, cache, probes_for, errors)
            except Exception as error:  # noqa: BLE001 - one missing value must not lose the query
                node.errors[name] = _message(error)
        return node

    def _evaluate(
        self,
        obj: Any,
        spec: Probe,
        cache: dict[tuple[str, ...], Any],
        probes_for: ProbeLookup,
        errors: list[str],
    ) -> Any:
        value = obj
        for depth in range(1, len(spec.path) + 1):
            prefix = spec.path[:depth]
            if prefix in cache:
                value = cache[prefix]
                continue
            step = spec.path[depth - 1]
            if step == "?":
                value = self._option(value)
            elif step.endswith(")"):  # a one-string-argument call, e.g. get(format)
                name, argument = step[:-1].split("(", 1)
                value = getattr(value, name)(argument)
            else:
                value = getattr(value, step)()
            cache[prefix] = value
            if value is None:
                return None
        return self._convert(value, spec, probes_for, errors)

    def _convert(self, value: Any, spec: Probe, probes_for: ProbeLookup, errors: list[str]) -> Any:
        if value is None:
            return None
        kind = spec.kind
        if kind == "value":
            return value if isinstance(value, (str, int, float, bool)) else str(value.toString())
        if kind == "strings":
            joined = str(value.mkString(_ITEM_SEP))
            return joined.split(_ITEM_SEP) if joined else []
        if kind == "map":
            return _parse_map(str(value.mkString(_ITEM_SEP)))
        if kind == "metrics":
            return _parse_metrics(str(value.mkString(_ITEM_SEP)))
        if kind == "node":
            return self._capture_node(value, None, probes_for, errors)
        if kind == "plan":
            return self._capture_plan(value, self._class_name(value), probes_for, errors)
        if kind == "table":
            return self._lookup_table(value, probes_for, errors)
        if kind == "v2table":
            return self._load_v2_table(value, probes_for, errors)
        raise JvmError(f"unknown probe kind {kind!r}")

    def _lookup_table(self, value: Any, probes_for: ProbeLookup, errors: list[str]) -> CapturedNode:
        """A session-catalog table, from the ``CatalogTable`` a command carries, or else from its name.

        The plan's own ``CatalogTable`` is preferred: we read after the query ran, and by then later statements
        may have changed the catalog. A name is looked up in the catalog; a table that no longer exists yields
        the location the catalog would give it by default.
        """
        catalog = self._catalog()
        if not isinstance(value, str) and self._class_name(value).endswith(".CatalogTable"):
            node = self._capture_node(value, "CatalogTable", probes_for, errors)
            info = node.get("info", {})
            if "Database" not in info or "Location" not in info:
                identifier = catalog.qualifyIdentifier(value.identifier())
                node.props["database"] = self._option(identifier.database())
                node.props["table"] = str(identifier.table())
                node.props["defaultLocation"] = _safe(lambda: str(catalog.defaultTablePath(identifier).toString()))
            return node
        if isinstance(value, str):
            value = self._jsession.sessionState().sqlParser().parseTableIdentifier(value)
        identifier = catalog.qualifyIdentifier(value)
        node = CapturedNode(class_name="CatalogTable")
        node.props["database"] = self._option(identifier.database())
        node.props["table"] = str(identifier.table())
        exists = bool(catalog.tableExists(identifier))
        node.props["exists"] = exists
        if exists:
            table = catalog.getTableMetadata(identifier)
            node.props.update(self._capture_node(table, "CatalogTable", probes_for, errors).props)
        else:
            node.props["defaultLocation"] = _safe(lambda: str(catalog.defaultTablePath(identifier).toString()))
        return node

    def _load_v2_table(self, resolved_identifier: Any, probes_for: ProbeLookup, errors: list[str]) -> Any:
        """The table a V2 command named (a ``ResolvedIdentifier``), loaded from its catalog now; ``None`` when it
        no longer exists."""
        catalog = resolved_identifier.catalog()
        try:
            table = catalog.loadTable(resolved_identifier.identifier())
        except Exception:  # noqa: BLE001 - dropped or replaced since: the analysis falls back to defaults
            return None
        return self._capture_node(table, None, probes_for, errors)

    # --- helpers -------------------------------------------------------------------------------------------

    def _class_name(self, obj: Any) -> str:
        return str(obj.getClass().getName())

    def _option(self, option: Any) -> Any:
        if option is None or isinstance(option, (str, int, float, bool)):
            return option
        if self._option_evidence is None:
            self._option_evidence = getattr(self._jvm.scala.Predef, "$conforms")()
        return option.orNull(self._option_evidence)

    def _catalog(self) -> Any:
        if self._session_catalog is None:
            self._session_catalog = self._jsession.sessionState().catalog()
        return self._session_catalog

    @staticmethod
    def _guard(query: CapturedQuery, what: str, read: Callable[[], Any]) -> Any:
        try:
            return read()
        except Exception as error:  # noqa: BLE001 - reported as an extraction error, never raised
            query.capture_errors.append(f"{what}: {_message(error)}")
            return None


def _parse_map(joined: str) -> dict[str, str]:
    result: dict[str, str] = {}
    if not joined:
        return result
    for item in joined.split(_ITEM_SEP):
        key, sep, value = item.partition(_KV_SEP)
        if sep:
            result[key] = value
    return result


def _parse_metrics(joined: str) -> dict[str, int]:
    metrics: dict[str, int] = {}
    for key, value in _parse_map(joined).items():
        match = _METRIC_VALUE.search(value)
        if match:
            metrics[key] = int(match.group(1))
    return metrics


def _message(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0][:500] if text else type(error).__name__


def _safe(read: Callable[[], Any]) -> Any:
    try:
        return read()
    except Exception:  # noqa: BLE001 - optional facts
        return None
