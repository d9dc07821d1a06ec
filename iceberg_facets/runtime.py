"""Lineage for pyiceberg in this process: the instrumentation, the worker thread that builds and sends events,
and the run blocks that group work into one run.

The user's thread only queues what the edge captured, tagged with the run block it happened in; the worker
turns captures into records and events in the order they were queued, so a block's scans and commits are all
in its record by the time its end is processed.
"""

from __future__ import annotations

import atexit
import contextvars
import logging
import os
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import RunEvent, RunState

from iceberg_facets import instrument
from iceberg_facets.events import IcebergEventBuilder, RunIdentity
from iceberg_facets.records import RunRecord
from spark_lineage.config import LineageConfig, ParentJob
from spark_lineage.events import new_run_id
from spark_lineage.worker import BoundedWorker, ErrorLog

log = logging.getLogger("iceberg_facets")


@dataclass
class RunScope:
    """One ``run()`` block: who it is, and what was done in it (filled in on the worker thread)."""

    identity: RunIdentity
    record: RunRecord = field(default_factory=RunRecord)


_current_run: contextvars.ContextVar[RunScope | None] = contextvars.ContextVar("iceberg_run", default=None)


def default_job_name() -> str:
    """The running script's name (``etl`` for ``python etl.py``, ``pkg.job`` for ``python -m pkg.job``), or
    ``python`` in an interactive session."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and getattr(spec, "name", None) and spec.name != "__main__":
        return str(spec.name).removesuffix(".__main__")
    script = sys.argv[0] if sys.argv and sys.argv[0] not in ("", "-c", "-") else ""
    return Path(script).stem or "python"


class IcebergLineage:
    """Lineage for every pyiceberg catalog in the process, from ``enable()`` to ``disable()``."""

    def __init__(self, config: LineageConfig, client: OpenLineageClient, job_name: str) -> None:
        import pyiceberg

        self.config = config
        self.client = client
        self.errors = ErrorLog("iceberg_facets")
        self.builder = IcebergEventBuilder(config, job_name, str(pyiceberg.__version__))
        self.worker: BoundedWorker[tuple[Any, ...]] = BoundedWorker(
            "iceberg_facets lineage",
            self._process,
            config.queue_size,
            self.errors,
            full_hint="Raise iceberg_facets.enable(queue_size=...) or check the backend.",
        )
        self.instrumentation = instrument.Instrumentation(self)
        self.instrumentation.install()
        self.closed = False

    # --- the Sink: called on the user's thread -------------------------------------------------------------

    def committed(self, capture: instrument.CommitCapture) -> None:
        self.worker.submit(("commit", capture, _current_run.get()))

    def scanned(self, capture: instrument.ScanCapture) -> None:
        self.worker.submit(("scan", capture, _current_run.get()))

    def table_changed(self, capture: instrument.TableChangeCapture) -> None:
        self.worker.submit(("change", capture, _current_run.get()))

    def start_run(self, scope: RunScope) -> None:
        self.worker.submit(("start", scope, _now_ms()))

    def end_run(self, scope: RunScope, error: BaseException | None) -> None:
        self.worker.submit(("end", scope, _now_ms(), error))

    # --- the worker ----------------------------------------------------------------------------------------

    def _process(self, item: tuple[Any, ...]) -> None:
        kind = item[0]
        if kind == "start":
            scope, epoch_ms = item[1], item[2]
            self._emit([self.builder.event(RunState.START, epoch_ms, scope.identity, "JOB")])
        elif kind == "end":
            scope, epoch_ms, error = item[1], item[2], item[3]
            state, message, stack = RunState.COMPLETE, None, None
            if error is not None:
                state, message = RunState.FAIL, f"{type(error).__name__}: {error}"
                stack = "".join(traceback.format_exception(type(error), error, error.__traceback__))
            self._emit([self.builder.block_events(state, epoch_ms, scope.identity, scope.record, message, stack)])
        else:
            self._process_capture(kind, item[1], item[2])

    def _process_capture(self, kind: str, capture: Any, scope: RunScope | None) -> None:
        builder = self.builder
        if kind == "commit":
            commit = instrument.commit_record(capture)
            if scope is not None:
                scope.record.commits.append(commit)
                return
            name = builder.standalone_job_name(builder.commit_action(commit), commit.table)
            self._emit(builder.commit_events(commit, RunIdentity(new_run_id(commit.start_ms), name)))
        elif kind == "scan":
            scan = instrument.scan_record(capture, self.instrumentation.tables_by_location)
            if scope is not None:
                scope.record.scans.append(scan)
                return
            name = builder.standalone_job_name("scan", scan.table)
            self._emit(builder.scan_events(scan, RunIdentity(new_run_id(scan.start_ms), name)))
        elif kind == "change":
            change = instrument.table_change_record(capture)
            if scope is not None:
                scope.record.changes.append(change)
                return
            name = builder.standalone_job_name(f"{change.lifecycle.lower()}_table", change.table)
            self._emit(builder.table_change_events(change, RunIdentity(new_run_id(change.time_ms), name)))

    def _emit(self, events: list[RunEvent]) -> None:
        for event in events:
            try:
                self.client.emit(event)
            except Exception as error:  # noqa: BLE001 - a failing backend is logged, never raised
                self.errors.report("emitting an event", error)

    # --- lifecycle -----------------------------------------------------------------------------------------

    def flush(self, timeout: float | None) -> bool:
        return self.worker.flush(timeout)

    def close(self, timeout: float | None) -> bool:
        """Stop capturing at once, then deliver what was captured within ``timeout`` seconds."""
        if self.closed:
            return True
        self.closed = True
        self.instrumentation.remove()
        flushed = self.worker.close(timeout)
        if not flushed:
            log.warning(
                "iceberg_facets: %d lineage events were not delivered within %.1f s of shutdown",
                self.worker.dropped,
                timeout or 0.0,
            )
        return flushed


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


_lock = threading.Lock()
_active: IcebergLineage | None = None
_atexit_registered = False


def active() -> IcebergLineage | None:
    return _active


def start(config: LineageConfig, client: OpenLineageClient, job_name: str) -> IcebergLineage:
    global _active, _atexit_registered
    with _lock:
        if _active is not None:
            return _active
        _active = IcebergLineage(config, client, job_name)
        if not _atexit_registered:
            atexit.register(_at_exit)
            _atexit_registered = True
        return _active


def stop(runtime: IcebergLineage, timeout: float | None) -> bool:
    global _active
    with _lock:
        if _active is runtime:
            _active = None
    return runtime.close(runtime.config.shutdown_timeout if timeout is None else timeout)


def _at_exit() -> None:
    runtime = _active
    if runtime is not None:
        stop(runtime, None)


class LineageRun:
    """``with iceberg_facets.run("job"):``: the block's scans and commits are one run (see
    :func:`iceberg_facets.run`)."""

    def __init__(self, job_name: str) -> None:
        if not isinstance(job_name, str) or not job_name.strip():
            raise ValueError(f"iceberg_facets.run() needs a job name (a non-empty string), got {job_name!r}")
        self.job_name = job_name
        self._entered: list[tuple[IcebergLineage, RunScope, contextvars.Token[RunScope | None]]] = []
        self._run_id: str | None = None

    @property
    def run_id(self) -> str | None:
        """The id of the run this block is (or was, once it has ended); ``None`` when lineage is off."""
        return self._run_id

    def __enter__(self) -> LineageRun:
        runtime = _active
        if runtime is None:
            return self
        try:
            enclosing = _current_run.get()
            parent = None
            if enclosing is not None:
                parent = ParentJob(runtime.config.namespace, enclosing.identity.job_name, enclosing.identity.run_id)
            scope = RunScope(RunIdentity(new_run_id(_now_ms()), self.job_name, parent))
            token = _current_run.set(scope)
            self._entered.append((runtime, scope, token))
            self._run_id = scope.identity.run_id
            runtime.start_run(scope)
        except Exception as error:  # noqa: BLE001 - lineage never breaks the user's block
            runtime.errors.report("starting a run", error)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        if not self._entered:
            return
        runtime, scope, token = self._entered.pop()
        try:
            _current_run.reset(token)
            runtime.end_run(scope, error)
        except Exception as failure:  # noqa: BLE001 - lineage never breaks the user's block
            runtime.errors.report("ending a run", failure)


def disabled_by_environment() -> bool:
    return os.environ.get("OPENLINEAGE_DISABLED", "").strip().lower() == "true"
