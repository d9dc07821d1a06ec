"""Lineage for pyiceberg in this process: the instrumentation, the worker thread that turns what it captures
into records, and the run blocks that group work into one run.

The user's thread only queues what the edge captured, tagged with the run block it happened in; the worker
turns captures into records, in the order they were queued, and hands them to the delivery
(:mod:`iceberg_facets.delivery`), which assembles runs and spools their events for sending.
"""

from __future__ import annotations

import atexit
import contextvars
import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Union

from openlineage.client import OpenLineageClient

from iceberg_facets import instrument
from iceberg_facets.delivery import (
    DeliveryMode,
    DeliverySettings,
    ItemDelivery,
    ProcessDelivery,
    ThreadDelivery,
    open_delivery,
)
from iceberg_facets.events import RunIdentity
from iceberg_facets.items import Committed, Item, RunEnded, RunStarted, Scanned, TableChanged
from spark_lineage.config import LineageConfig, ParentJob
from spark_lineage.delivery import undelivered
from spark_lineage.events import new_run_id
from spark_lineage.redaction import Redactor
from spark_lineage.worker import BoundedWorker, ErrorLog

log = logging.getLogger("iceberg_facets")


_current_run: contextvars.ContextVar[RunIdentity | None] = contextvars.ContextVar("iceberg_run", default=None)


@dataclass(frozen=True)
class _Captured:
    """What the edge captured, and the block it happened in."""

    capture: instrument.CommitCapture | instrument.ScanCapture | instrument.TableChangeCapture
    block: RunIdentity | None


@dataclass(frozen=True)
class _BlockLeft:
    """A block was left, with the exception it raised: formatted on the worker, not the user's thread."""

    identity: RunIdentity
    epoch_ms: int
    error: BaseException | None


class _FlushRequest:
    """A flush waiting for its turn on the worker, and its answer."""

    def __init__(self, timeout: float | None) -> None:
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.done = threading.Event()
        self.delivered = False

    def remaining(self) -> float | None:
        return _remaining(self.deadline)


_WorkItem = Union[_Captured, RunStarted, _BlockLeft, _FlushRequest]


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
        self,
        config: LineageConfig,
        client: OpenLineageClient | None,
        job_name: str,
        delivery: DeliveryMode = DeliveryMode.PROCESS,
        redactor: Redactor | None = None,
    ) -> None:
        """``client`` sends from a thread of this process; without one, events go through a helper process
        (``delivery="process"``) or a thread here (``"thread"``), with a client made from ``config``. Either
        way every event is spooled before it is sent (:mod:`spark_lineage.delivery`), without the secrets
        ``redactor`` knows."""
        import pyiceberg

        self.config = config
        self.errors = ErrorLog("iceberg_facets")
        self.redactor = redactor or Redactor(config.redaction_pattern)
        self.settings = DeliverySettings(config, job_name, str(pyiceberg.__version__))
        self.delivery: ItemDelivery = self._start_delivery(client, delivery)
        self.worker: BoundedWorker[_WorkItem] = BoundedWorker(
            "iceberg_facets lineage",
            self._process,
            config.queue_size,
            self.errors,
            full_hint="Raise iceberg_facets.enable(queue_size=...) or check the backend.",
        )
        self.instrumentation = instrument.Instrumentation(self)
        self.instrumentation.install()
        self.closed = False

    def _start_delivery(self, client: OpenLineageClient | None, delivery: DeliveryMode) -> ItemDelivery:
        if client is None and delivery is DeliveryMode.PROCESS:
            try:
                return ProcessDelivery(self.settings)
            except Exception as error:  # noqa: BLE001 - no interpreter to start, or not allowed to: use a thread
                log.warning("iceberg_facets: cannot start the delivery process (%r); delivering from a thread", error)
        return self._thread_delivery(client)

    def _thread_delivery(self, client: OpenLineageClient | None) -> ThreadDelivery:
        return ThreadDelivery(self.settings, open_delivery(self.config, client, self.redactor, self.errors))

    # --- the Sink: called on the user's thread -------------------------------------------------------------

    def committed(self, capture: instrument.CommitCapture) -> None:
        self.worker.submit(_Captured(capture, _current_run.get()))

    def scanned(self, capture: instrument.ScanCapture) -> None:
        self.worker.submit(_Captured(capture, _current_run.get()))

    def table_changed(self, capture: instrument.TableChangeCapture) -> None:
        self.worker.submit(_Captured(capture, _current_run.get()))

    def start_run(self, identity: RunIdentity) -> None:
        self.worker.submit(RunStarted(identity, _now_ms()))

    def end_run(self, identity: RunIdentity, error: BaseException | None) -> None:
        self.worker.submit(_BlockLeft(identity, _now_ms(), error))

    # --- the worker: captures to records, records to the delivery ------------------------------------------

    def _process(self, work: _WorkItem) -> None:
        if isinstance(work, _FlushRequest):
            try:
                work.delivered = self._deliver(lambda delivery: delivery.flush(work.remaining()))
            finally:
                work.done.set()
            return
        item = self._item(work)
        self._deliver(lambda delivery: delivery.send(item))

    def _item(self, work: _Captured | RunStarted | _BlockLeft) -> Item:
        """The delivery item a piece of work stands for; records are made here, off the user's thread."""
        if isinstance(work, RunStarted):
            return work
        if isinstance(work, _BlockLeft):
            error = work.error
            if error is None:
                return RunEnded(work.identity, work.epoch_ms)
            stack = "".join(traceback.format_exception(type(error), error, error.__traceback__))
            return RunEnded(work.identity, work.epoch_ms, f"{type(error).__name__}: {error}", stack)
        capture, block = work.capture, work.block.run_id if work.block is not None else None
        if isinstance(capture, instrument.CommitCapture):
            return Committed(instrument.commit_record(capture), block)
        if isinstance(capture, instrument.ScanCapture):
            return Scanned(instrument.scan_record(capture, self.instrumentation.tables_by_location), block)
        return TableChanged(instrument.table_change_record(capture), block)

    def _deliver(self, action: Callable[[ItemDelivery], Any]) -> Any:
        try:
            return action(self.delivery)
        except OSError as error:  # the pipe to the helper broke: it is gone
            if not isinstance(self.delivery, ProcessDelivery):
                raise
            log.warning(
                "iceberg_facets: the delivery process stopped (%r); what it had not read yet is lost (what it "
                "had read is in the spool), the next events are delivered from a thread",
                error,
            )
            self.delivery = self._thread_delivery(None)
            return action(self.delivery)

    # --- lifecycle -----------------------------------------------------------------------------------------

    def flush(self, timeout: float | None) -> bool:
        """True once every event captured so far has been sent, within ``timeout`` seconds."""
        request = _FlushRequest(timeout)
        if not self.worker.submit(request):
            return False
        return request.done.wait(timeout) and request.delivered

    def close(self, timeout: float | None) -> bool:
        """Stop capturing at once, then deliver what was captured within ``timeout`` seconds: what the backend
        has not taken by then stays in the spool (the delivery logs one line saying how to replay it). A Ctrl-C
        while what waits is made into events, on this thread, ends that (what is left is counted in a warning),
        and is raised once lineage has closed, but not at the process's exit (see
        :meth:`~spark_lineage.worker.BoundedWorker.raise_interrupt`)."""
        if self.closed:
            return True
        self.closed = True
        self.instrumentation.remove()
        deadline = None if timeout is None else time.monotonic() + timeout
        dropped = self.worker.dropped
        # Every capture becomes an event in the delivery's hands (spooled, or in the helper's pipe) first.
        handed_over = self.worker.close(_remaining(deadline))
        try:
            delivered = self.delivery.close(_remaining(deadline))
        except Exception as error:  # noqa: BLE001 - closing never fails the caller (often atexit)
            self.errors.report("closing the delivery", error)
            delivered = False
        if not handed_over:
            interrupted = self.worker.interrupted is not None
            log.warning(
                "iceberg_facets: %d captured operations were not yet made into lineage events %s; they are lost%s",
                self.worker.dropped - dropped,
                "when a KeyboardInterrupt ended the closing" if interrupted else f"after {timeout or 0.0:.1f} s",
                "" if interrupted else " (raise shutdown_timeout)",
            )
        self.errors.summarize(skip=undelivered)
        self.worker.raise_interrupt()
        return handed_over and delivered


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(deadline - time.monotonic(), 0.0)


_lock = threading.Lock()
_active: IcebergLineage | None = None
_atexit_registered = False


def active() -> IcebergLineage | None:
    return _active


def start(
    config: LineageConfig,
    client: OpenLineageClient | None,
    job_name: str,
    delivery: DeliveryMode = DeliveryMode.PROCESS,
    redactor: Redactor | None = None,
) -> IcebergLineage:
    global _active, _atexit_registered
    with _lock:
        if _active is not None:
            return _active
        _active = IcebergLineage(config, client, job_name, delivery, redactor)
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
    """Deliver what was captured, within the shutdown timeout: the process waits no longer than that (plus
    the helper's few seconds to exit), whatever state the backend is in."""
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
