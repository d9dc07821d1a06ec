"""The pyiceberg edge: the only module that reaches into pyiceberg.

pyiceberg (0.10 to 0.12) has no metrics reporter, listener or hook. A catalog subclass loaded through
``py-catalog-impl`` is its designed extension point, but it only covers catalogs loaded by configuration, and
``iceberg_facets.enable()`` promises every catalog in the process: ones created before the call, and ones
constructed directly. So this module wraps a few methods of pyiceberg's own classes, at the points every catalog
goes through, and restores them exactly on :meth:`Instrumentation.remove`:

- ``Transaction.commit_transaction`` (and overrides): one transaction committed; every write goes through it
  (append, overwrite, delete, upsert, add_files, dynamic_partition_overwrite, schema and property updates);
- ``Table._do_commit``: one attempt against the catalog (0.12 retries a ``CommitFailedException`` by calling it
  again). It is private, and the only place attempts can be counted;
- ``to_arrow`` / ``to_arrow_batch_reader`` of every scan class (``to_pandas``, ``to_duckdb``, ``to_polars`` and
  ``to_ray`` go through ``to_arrow``) and ``plan_files``, which they call: one materialized scan and its planning;
- ``Table.scan``: which catalog and identifier a table location belongs to (scans carry neither before 0.12);
- ``create_table`` and ``drop_table`` of every ``Catalog`` subclass, including classes defined later
  (through ``Catalog.__init_subclass__``): CREATE and DROP.

A wrapper only reads clocks and keeps references on the user's thread, then hands them to the :class:`Sink`;
it returns the original result, or lets the original exception through untouched. Turning references into
records (:func:`commit_record` and friends) happens on the worker thread.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from openlineage.client.generated.lifecycle_state_change_dataset import LifecycleStateChange

from iceberg_facets.records import CommitRecord, ScanRecord, SnapshotInfo, TableChangeRecord, TableInfo
from iceberg_facets.reports import combined_operation
from spark_lineage.lineage import SchemaField


class Sink(Protocol):
    """Where the edge hands what it captured; called on the user's thread, so it must only queue."""

    def committed(self, capture: CommitCapture) -> None: ...

    def scanned(self, capture: ScanCapture) -> None: ...

    def table_changed(self, capture: TableChangeCapture) -> None: ...


@dataclass
class CommitCapture:
    """References and clock readings from one ``commit_transaction`` call."""

    transaction: Any
    staged: Any
    """The transaction's staged updates (private ``_updates``): what a failed commit tried to add."""
    table: Any
    before: Any
    """The table's metadata before the commit; ``None`` for a table created by this transaction."""
    start_ms: int
    created: bool
    after: Any = None
    """The table's metadata as the commit left it, kept on the committing thread: by the time the worker
    reads the capture, a later commit may have replaced the table's metadata."""
    attempts: int = 0
    first_attempt_ns: int | None = None
    end_ns: int = 0
    end_ms: int = 0
    error: BaseException | None = None
    error_stack: str | None = None


@dataclass
class ScanCapture:
    """References and clock readings from one materialized scan."""

    scan: Any
    start_ms: int
    planning_ns: int = 0
    tasks: list[Any] | None = None
    end_ms: int = 0


@dataclass
class TableChangeCapture:
    table: Any
    lifecycle: LifecycleStateChange
    time_ms: int
    metadata: Any = None
    """The table's metadata at the change (a later commit may replace the table's before the worker runs)."""


_active_commit: contextvars.ContextVar[CommitCapture | None] = contextvars.ContextVar("iceberg_commit", default=None)
_active_scan: contextvars.ContextVar[ScanCapture | None] = contextvars.ContextVar("iceberg_scan", default=None)
_in_catalog_call: contextvars.ContextVar[bool] = contextvars.ContextVar("iceberg_catalog_call", default=False)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class Instrumentation:
    """The wrappers installed in pyiceberg's classes, and what they replaced."""

    sink: Sink
    _replaced: list[tuple[type, str, Any]] = field(default_factory=list)
    _catalog_base: type | None = None
    tables_by_location: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    """Table location -> (catalog, identifier), for scans that do not carry them."""

    def install(self) -> None:
        from pyiceberg.catalog import Catalog
        from pyiceberg.table import Table, TableScan, Transaction

        scan_root: type = getattr(sys.modules["pyiceberg.table"], "BaseScan", TableScan)
        for cls in _with_subclasses(Transaction):
            self._wrap(cls, "commit_transaction", self._commit_transaction)
        for cls in _with_subclasses(Table):
            self._wrap(cls, "_do_commit", _do_commit)
            self._wrap(cls, "scan", self._table_scan)
        for cls in _with_subclasses(scan_root):
            self._wrap(cls, "to_arrow", self._materialize)
            self._wrap(cls, "to_arrow_batch_reader", self._materialize)
            self._wrap(cls, "plan_files", _plan_files)
        for cls in _with_subclasses(Catalog):
            self.instrument_catalog_class(cls)
        self._catalog_base = Catalog
        instrumentation = self

        def init_subclass(subclass: Any, /, **kwargs: Any) -> None:
            super(Catalog, subclass).__init_subclass__(**kwargs)  # type: ignore[misc]
            instrumentation.instrument_catalog_class(subclass)

        self._replaced.append((Catalog, "__init_subclass__", Catalog.__dict__.get("__init_subclass__")))
        setattr(Catalog, "__init_subclass__", classmethod(init_subclass))  # noqa: B010 - mypy rejects assigning it

    def remove(self) -> None:
        """Put every replaced attribute back (or delete the ones that were inherited)."""
        for cls, name, original in reversed(self._replaced):
            if original is None:
                if name in cls.__dict__:
                    delattr(cls, name)
            else:
                setattr(cls, name, original)
        self._replaced.clear()

    def instrument_catalog_class(self, cls: type) -> None:
        self._wrap(cls, "create_table", self._create_table)
        self._wrap(cls, "drop_table", self._drop_table)

    def _wrap(self, cls: type, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
        original = cls.__dict__.get(name)
        if original is None or not inspect.isfunction(original) or getattr(original, "__isabstractmethod__", False):
            return
        wrapper = functools.wraps(original)(make(original))
        self._replaced.append((cls, name, original))
        setattr(cls, name, wrapper)

    # --- wrappers: each runs on the user's thread; everything in them is cheap and cannot raise ------------

    def _commit_transaction(self, original: Callable[..., Any]) -> Callable[..., Any]:
        sink = self.sink

        def commit_transaction(transaction: Any, *args: Any, **kwargs: Any) -> Any:
            active = _active_commit.get()
            if active is not None and active.transaction is transaction:  # an override calling its parent's
                return original(transaction, *args, **kwargs)
            # Transaction keeps its table private (``_table``); it is the only way to the metadata before.
            table = getattr(transaction, "_table", None)
            created = isinstance(transaction, sys.modules["pyiceberg.table"].CreateTableTransaction)
            capture = CommitCapture(
                staged=getattr(transaction, "_updates", ()),
                transaction=transaction,
                table=table,
                before=None if created else getattr(table, "metadata", None),
                start_ms=_now_ms(),
                created=created,
            )
            token = _active_commit.set(capture)
            try:
                result = original(transaction, *args, **kwargs)
            except BaseException as error:
                _finish(capture, error)
                if capture.attempts:
                    _deliver(sink.committed, capture)
                raise
            finally:
                _active_commit.reset(token)
            _finish(capture, None)
            if capture.attempts:  # nothing staged means nothing was sent to the catalog: no commit to report
                _deliver(sink.committed, capture)
            return result

        return commit_transaction

    def _materialize(self, original: Callable[..., Any]) -> Callable[..., Any]:
        sink = self.sink

        def materialize(scan: Any, *args: Any, **kwargs: Any) -> Any:
            if _active_scan.get() is not None or _called_by_pyiceberg_for_itself(scan):
                return original(scan, *args, **kwargs)
            capture = ScanCapture(scan=scan, start_ms=_now_ms())
            token = _active_scan.set(capture)
            try:
                result = original(scan, *args, **kwargs)
            finally:
                _active_scan.reset(token)
            capture.end_ms = _now_ms()
            if capture.tasks is not None:
                _deliver(sink.scanned, capture)
            return result

        return materialize

    def _table_scan(self, original: Callable[..., Any]) -> Callable[..., Any]:
        tables = self.tables_by_location

        def scan(table: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(table, *args, **kwargs)
            with contextlib.suppress(Exception):  # undescribed, its scans are named by location alone
                tables[table.metadata.location] = (table.catalog, table.name())
            return result

        return scan

    def _create_table(self, original: Callable[..., Any]) -> Callable[..., Any]:
        sink = self.sink

        def create_table(catalog: Any, *args: Any, **kwargs: Any) -> Any:
            if _in_catalog_call.get():
                return original(catalog, *args, **kwargs)
            token = _in_catalog_call.set(True)
            try:
                table = original(catalog, *args, **kwargs)
            finally:
                _in_catalog_call.reset(token)
            _deliver(sink.table_changed, _table_change(table, LifecycleStateChange.CREATE))
            return table

        return create_table

    def _drop_table(self, original: Callable[..., Any]) -> Callable[..., Any]:
        sink = self.sink

        def drop_table(catalog: Any, identifier: Any, *args: Any, **kwargs: Any) -> Any:
            if _in_catalog_call.get():
                return original(catalog, identifier, *args, **kwargs)
            token = _in_catalog_call.set(True)
            try:
                # Once dropped, the table's location is gone from the catalog: read it first.
                try:
                    table = catalog.load_table(identifier)
                except Exception:  # noqa: BLE001 - the drop itself will say what is wrong
                    table = None
                result = original(catalog, identifier, *args, **kwargs)
            finally:
                _in_catalog_call.reset(token)
            if table is not None:
                _deliver(sink.table_changed, _table_change(table, LifecycleStateChange.DROP))
            return result

        return drop_table


def _do_commit(original: Callable[..., Any]) -> Callable[..., Any]:
    def do_commit(table: Any, *args: Any, **kwargs: Any) -> Any:
        capture = _active_commit.get()
        if capture is not None:
            capture.attempts += 1
            if capture.first_attempt_ns is None:
                capture.first_attempt_ns = time.perf_counter_ns()
        return original(table, *args, **kwargs)

    return do_commit


def _plan_files(original: Callable[..., Any]) -> Callable[..., Any]:
    def plan_files(scan: Any, *args: Any, **kwargs: Any) -> Any:
        capture = _active_scan.get()
        if capture is None or capture.tasks is not None:
            return original(scan, *args, **kwargs)
        started = time.perf_counter_ns()
        tasks = original(scan, *args, **kwargs)
        if not isinstance(tasks, list):  # planning is done once it is listed; the readers list it anyway
            tasks = list(tasks)
        capture.planning_ns = time.perf_counter_ns() - started
        capture.tasks = tasks
        return tasks

    return plan_files


def _finish(capture: CommitCapture, error: BaseException | None) -> None:
    capture.end_ns = time.perf_counter_ns()
    capture.end_ms = _now_ms()
    capture.after = getattr(capture.table, "metadata", None)  # a reference: metadata objects are never changed
    if error is not None:
        capture.error = error
        capture.error_stack = "".join(traceback.format_exception(type(error), error, error.__traceback__))


def _table_change(table: Any, lifecycle: LifecycleStateChange) -> TableChangeCapture:
    return TableChangeCapture(table, lifecycle, _now_ms(), getattr(table, "metadata", None))


def _deliver(handler: Callable[[Any], None], capture: Any) -> None:
    with contextlib.suppress(Exception):  # lineage must never fail the user's write or read
        handler(capture)


def _called_by_pyiceberg_for_itself(scan: Any) -> bool:
    """A scan pyiceberg materializes inside its own operation (upsert reads the rows it will match) is part of
    that write, not a read the user asked for; ``to_pandas`` and friends on the same scan are the user's."""
    caller = sys._getframe(2)
    module = caller.f_globals.get("__name__", "")
    return module.startswith("pyiceberg.") and caller.f_locals.get("self") is not scan


def _with_subclasses(cls: type) -> Iterator[type]:
    seen: set[type] = set()
    pending = [cls]
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        yield current
        pending.extend(current.__subclasses__())


# --- turning references into records: on the worker thread --------------------------------------------------


_NAMING_PROPERTIES = ("type", "uri", "warehouse")
"""The catalog properties naming needs; the others (credentials among them) never leave the edge."""
_MAX_CACHED_SCHEMAS = 256
_spark_schemas: dict[tuple[Any, Any], list[SchemaField]] = {}


def table_info(catalog: Any, identifier: Any, metadata: Any) -> TableInfo:
    """A table's identity and description from its catalog, identifier and metadata."""
    names = (identifier,) if isinstance(identifier, str) else tuple(identifier)
    properties = getattr(metadata, "properties", {}) or {}
    catalog_properties = getattr(catalog, "properties", {}) or {}
    snapshot = metadata.current_snapshot()
    return TableInfo(
        catalog_name=str(getattr(catalog, "name", "") or ""),
        catalog_class=type(catalog).__name__ if catalog is not None else "",
        catalog_properties={k: str(catalog_properties[k]) for k in _NAMING_PROPERTIES if k in catalog_properties},
        identifier=".".join(str(n) for n in names),
        location=str(metadata.location),
        schema=_cached_spark_schema(metadata),
        file_format=str(properties.get("write.format.default", "parquet")),
        current_snapshot_id=snapshot.snapshot_id if snapshot is not None else None,
    )


def _cached_spark_schema(metadata: Any) -> list[SchemaField]:
    key = (metadata.table_uuid, metadata.current_schema_id)
    schema = _spark_schemas.get(key)
    if schema is None:
        if len(_spark_schemas) >= _MAX_CACHED_SCHEMAS:
            _spark_schemas.clear()
        from iceberg_facets.visitors import spark_schema

        schema = _spark_schemas[key] = spark_schema(metadata.schema())
    return schema


def _table_info_of(table: Any, metadata: Any) -> TableInfo:
    return table_info(table.catalog, table.name(), metadata if metadata is not None else table.metadata)


def commit_record(capture: CommitCapture) -> CommitRecord:
    """What a commit did: the snapshots it added (those in the metadata it left that were not before)."""
    table = capture.table
    after = capture.after if capture.after is not None else table.metadata
    before_ids = {s.snapshot_id for s in capture.before.snapshots} if capture.before is not None else set()
    added = [] if capture.error is not None else [s for s in after.snapshots if s.snapshot_id not in before_ids]
    added.sort(key=lambda s: (s.sequence_number or 0, s.timestamp_ms))
    first = capture.first_attempt_ns or capture.end_ns
    attempted = []
    if capture.error is not None:  # what it tried to add names the job, as its success would have
        from pyiceberg.table.update import AddSnapshotUpdate

        attempted = [u.snapshot for u in capture.staged or () if isinstance(u, AddSnapshotUpdate)]
    schema_changed = (
        capture.error is None
        and not added
        and capture.before is not None
        and (
            after.current_schema_id != capture.before.current_schema_id or after.properties != capture.before.properties
        )
    )
    return CommitRecord(
        table=_table_info_of(table, after),
        snapshots=[_snapshot_info(s) for s in added],
        attempts=capture.attempts,
        duration_ms=(capture.end_ns - first) // 1_000_000,
        start_ms=capture.start_ms,
        end_ms=capture.end_ms,
        created=capture.created,
        error=None if capture.error is None else f"{type(capture.error).__name__}: {capture.error}",
        error_stack=capture.error_stack,
        schema_changed=schema_changed,
        attempted_operation=combined_operation([_snapshot_info(s) for s in attempted]),
    )


def _snapshot_info(snapshot: Any) -> SnapshotInfo:
    summary = snapshot.summary
    operation = getattr(summary, "operation", None)
    return SnapshotInfo(
        snapshot_id=snapshot.snapshot_id,
        sequence_number=snapshot.sequence_number,
        operation=getattr(operation, "value", None if operation is None else str(operation)),
        summary=dict(summary.additional_properties) if summary is not None else {},
    )


def scan_record(capture: ScanCapture, tables_by_location: dict[str, tuple[Any, Any]]) -> ScanRecord:
    """What a scan planned: its snapshot, filter and projection, and the files it kept."""
    from iceberg_facets.visitors import expression_json

    scan = capture.scan
    metadata = scan.table_metadata
    catalog, identifier = getattr(scan, "catalog", None), getattr(scan, "table_identifier", None)
    if catalog is None or identifier is None:
        catalog, identifier = tables_by_location.get(metadata.location, (None, ()))
    snapshot = scan.snapshot()
    tasks = capture.tasks or []
    total = snapshot.summary.additional_properties.get("total-data-files") if snapshot and snapshot.summary else None
    projection = scan.projection()
    return ScanRecord(
        table=table_info(catalog, identifier or (), metadata),
        snapshot_id=snapshot.snapshot_id if snapshot is not None else None,
        schema_id=projection.schema_id,
        filter=expression_json(scan.row_filter),
        projected_field_names=list(projection.column_names),
        planning_ns=capture.planning_ns,
        result_data_files=len(tasks),
        result_delete_files=sum(len(getattr(t, "delete_files", ())) for t in tasks),
        total_data_files=int(total) if total is not None else None,
        total_file_size_bytes=sum(int(getattr(t.file, "file_size_in_bytes", 0) or 0) for t in tasks),
        start_ms=capture.start_ms,
        end_ms=capture.end_ms,
    )


def table_change_record(capture: TableChangeCapture) -> TableChangeRecord:
    return TableChangeRecord(
        table=_table_info_of(capture.table, capture.metadata), lifecycle=capture.lifecycle, time_ms=capture.time_ms
    )
