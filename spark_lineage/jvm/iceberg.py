"""Iceberg's own metrics, from inside the driver JVM: a ``MetricsReporter`` written in Python, added beside
the reporter each Iceberg catalog already has, and the reports it receives turned into Iceberg's JSON."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from spark_lineage.errors import JvmError
from spark_lineage.jvm.values import JvmClasses, message

log = logging.getLogger("spark_lineage")

_METRICS_REPORTER = "org.apache.iceberg.metrics.MetricsReporter"


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


class IcebergReporterInstaller:
    """Adds a reporter to Iceberg catalogs of one SparkSession, and puts their reporters back afterwards."""

    def __init__(self, jsession: Any, classes: JvmClasses) -> None:
        self._jsession = jsession
        self._classes = classes
        self._restores: list[_FieldRestore] = []

    def install(self, reporter: IcebergMetricsReporter, catalog_names: list[str], jsession: Any = None) -> list[str]:
        """Add ``reporter`` to the metrics reporter of each named Iceberg Spark catalog, keeping whatever reporter
        the catalog already had (``metrics-reporter-impl``) working beside it. Tables the catalog has already
        loaded and cached get it too. Returns the catalogs it was added to; the others are logged.

        Each session has catalogs of its own: ``jsession`` names another session than this installer's (a Spark
        Connect client's), whose catalogs go with it, so they are not put back by :meth:`uninstall` (the
        reporter stops reporting then)."""
        holder = self._classes("java.util.ArrayList")()
        holder.add(reporter)
        proxy = holder.get(0)
        combine = self._classes("org.apache.iceberg.metrics.MetricsReporters").combine
        restores = self._restores if jsession is None else []
        manager = (self._jsession if jsession is None else jsession).sessionState().catalogManager()
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
                self._wrap_field(
                    owner, field_name, lambda current: combine(current, proxy) if current else proxy, restores
                )
                for table in cached_tables:
                    self._wrap_field(
                        table, "reporter", lambda current: combine(current, proxy) if current else proxy, restores
                    )
                installed.append(name)
            except Exception as error:  # noqa: BLE001 - one odd catalog must not stop the others
                log.warning("spark_lineage: no Iceberg metrics from catalog %s: %s", name, message(error))
        return installed

    def uninstall(self, context_stopped: bool) -> None:
        """Put every reporter field changed by :meth:`install` back as it was."""
        restores, self._restores = self._restores, []
        if context_stopped:
            return
        for restore in reversed(restores):
            restore.field.set(restore.owner, restore.original)

    def report_json(self, pending: PendingReport) -> tuple[str, str]:
        """(``commit`` or ``scan``, the report in Iceberg's own JSON), in one call for the JSON."""
        if str(pending.report.getClass().getSimpleName()).endswith("CommitReport"):
            return "commit", str(self._classes("org.apache.iceberg.metrics.CommitReportParser").toJson(pending.report))
        return "scan", str(self._classes("org.apache.iceberg.metrics.ScanReportParser").toJson(pending.report))

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

    def _wrap_field(self, owner: Any, name: str, wrap: Callable[[Any], Any], restores: list[_FieldRestore]) -> None:
        field = self._declared_field(owner, name)
        original = field.get(owner)
        field.set(owner, wrap(original))
        restores.append(_FieldRestore(owner, field, original))

    def _call_declared(self, obj: Any, name: str) -> Any:
        cls = obj.getClass()
        while cls is not None:
            for method in cls.getDeclaredMethods():
                if str(method.getName()) == name and int(method.getParameterCount()) == 0:
                    method.setAccessible(True)
                    return method.invoke(obj, None)
            cls = cls.getSuperclass()
        return None
