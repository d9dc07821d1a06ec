"""Lineage for pyiceberg in this process: the instrumentation, the worker thread that turns what it captures
into records, and the run blocks that group work into one run.

The user's thread only queues what the edge captured, tagged with the run block it happened in; the worker
turns captures into records, in the order they were queued, and hands them to the delivery
(:mod:`iceberg_facets.delivery`), which assembles runs and sends their events.
"""

from __future__ import annotations

import atexit
import contextvars
import logging
import pickle
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from openlineage.client import OpenLineageClient

from iceberg_facets import instrument
from iceberg_facets.delivery import Delivery, DeliverySettings, ProcessDelivery, RunAssembler, ThreadDelivery
from iceberg_facets.events import RunIdentity
from spark_lineage.config import LineageConfig, ParentJob
from spark_lineage.events import new_run_id
from spark_lineage.worker import BoundedWorker, ErrorLog

log = logging.getLogger("iceberg_facets")


_current_run: contextvars.ContextVar[RunIdentity | None] = contextvars.ContextVar("iceberg_run", default=None)


class _FlushRequest:
    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self.done = threading.Event()
        self.delivered = False


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

    def __init__(
        self, config: LineageConfig, client: OpenLineageClient | None, job_name: str, delivery: str = "process"
    ) -> None:
        """``client`` is used from a thread of this process; without one, events go through a helper process
        (``delivery="process"``) or a thread here (``"thread"``), with a client made from ``config``."""
        import pyiceberg

        self.config = config
        self.errors = ErrorLog("iceberg_facets")
        self.settings = DeliverySettings(config, job_name, str(pyiceberg.__version__))
        self.delivery: Delivery = self._start_delivery(client, delivery)
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

    def _start_delivery(self, client: OpenLineageClient | None, delivery: str) -> Delivery:
        if client is None and delivery == "process":
            try:
                return ProcessDelivery(self.settings)
            except (OSError, ValueError, TypeError) as error:  # no interpreter to start, or not allowed to
                log.warning("iceberg_facets: cannot start the delivery process (%r); delivering from a thread", error)
        return ThreadDelivery(RunAssembler(self.settings, client or self.config.create_client(), self.errors))

    # --- the Sink: called on the user's thread -------------------------------------------------------------

    def committed(self, capture: instrument.CommitCapture) -> None:
        self.worker.submit(("commit", capture, _current_run.get()))

    def scanned(self, capture: instrument.ScanCapture) -> None:
        self.worker.submit(("scan", capture, _current_run.get()))

    def table_changed(self, capture: instrument.TableChangeCapture) -> None:
        self.worker.submit(("change", capture, _current_run.get()))

    def start_run(self, identity: RunIdentity) -> None:
        self.worker.submit(("start", identity, _now_ms()))

    def end_run(self, identity: RunIdentity, error: BaseException | None) -> None:
        self.worker.submit(("end", identity, _now_ms(), error))

    # --- the worker: captures to records, records to the delivery ------------------------------------------

    def _process(self, item: tuple[Any, ...]) -> None:
        kind = item[0]
        if kind == "flush":
            request: _FlushRequest = item[1]
            request.delivered = self._deliver(lambda delivery: delivery.flush(request.timeout))
            request.done.set()
            return
        if kind == "end":
            identity, epoch_ms, error = item[1:4]
            message = stack = None
            if error is not None:
                message = f"{type(error).__name__}: {error}"
                stack = "".join(traceback.format_exception(type(error), error, error.__traceback__))
            out: tuple[Any, ...] = ("end", identity, epoch_ms, message, stack)
        elif kind == "start":
            out = item
        else:
            capture, block = item[1], item[2]
            if kind == "commit":
                record: Any = instrument.commit_record(capture)
            elif kind == "scan":
                record = instrument.scan_record(capture, self.instrumentation.tables_by_location)
            else:
                record = instrument.table_change_record(capture)
            out = (kind, record, block.run_id if block is not None else None)
        self._deliver(lambda delivery: delivery.send(out))

    def _deliver(self, action: Callable[[Delivery], Any]) -> Any:
        try:
            return action(self.delivery)
        except (OSError, EOFError, pickle.PicklingError) as error:
            if isinstance(self.delivery, ThreadDelivery):
                raise
            log.warning(
                "iceberg_facets: the delivery process stopped (%r); events it had not sent are lost, "
                "the next ones are delivered from a thread",
                error,
            )
            self.delivery = ThreadDelivery(RunAssembler(self.settings, self.config.create_client(), self.errors))
            return action(self.delivery)

    # --- lifecycle -----------------------------------------------------------------------------------------

    def flush(self, timeout: float | None) -> bool:
        """True once every event captured so far has been sent, within ``timeout`` seconds."""
        request = _FlushRequest(timeout)
        if not self.worker.submit(("flush", request)):
            return False
        return request.done.wait(timeout) and request.delivered

    def close(self, timeout: float | None) -> bool:
        """Stop capturing at once, then deliver what was captured within ``timeout`` seconds."""
        if self.closed:
            return True
        self.closed = True
        self.instrumentation.remove()
        deadline = None if timeout is None else time.monotonic() + timeout
        delivered = self.flush(timeout)
        remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        stopped = self.worker.close(remaining)
        remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        closed = self.delivery.close(remaining) if stopped else False
        if not (delivered and closed):
            log.warning("iceberg_facets: some lineage events were not delivered within %.1f s", timeout or 0.0)
        return delivered and closed


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


_lock = threading.Lock()
_active: IcebergLineage | None = None
_atexit_registered = False


def active() -> IcebergLineage | None:
    return _active


def start(
    config: LineageConfig, client: OpenLineageClient | None, job_name: str, delivery: str = "process"
) -> IcebergLineage:
    global _active, _atexit_registered
    with _lock:
        if _active is not None:
            return _active
        _active = IcebergLineage(config, client, job_name, delivery)
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
        self._entered: list[tuple[IcebergLineage, RunIdentity, contextvars.Token[RunIdentity | None]]] = []
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
                parent = ParentJob(runtime.config.namespace, enclosing.job_name, enclosing.run_id)
            identity = RunIdentity(new_run_id(_now_ms()), self.job_name, parent)
            token = _current_run.set(identity)
            self._entered.append((runtime, identity, token))
            self._run_id = identity.run_id
            runtime.start_run(identity)
        except Exception as error:  # noqa: BLE001 - lineage never breaks the user's block
            runtime.errors.report("starting a run", error)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        if not self._entered:
            return
        runtime, identity, token = self._entered.pop()
        try:
            _current_run.reset(token)
            runtime.end_run(identity, error)
        except Exception as failure:  # noqa: BLE001 - lineage never breaks the user's block
            runtime.errors.report("ending a run", failure)
