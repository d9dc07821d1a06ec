"""From records to delivered events: the runs they make up, the events of those runs, and the durable spool
(:class:`spark_lineage.delivery.Delivery`) every event goes into before it is sent, in this process or in a
helper process of its own.

Building an event and spooling it take a few milliseconds of Python per commit. In a thread of the user's
process that time is taken from the job's own threads by the GIL, so by default a helper process
(``python -m iceberg_facets._helper``, :mod:`iceberg_facets.helper`) does it: the user's process only writes
each record down a pipe. The helper ends with the user's process, whichever way that ends, and never outlives
it by more than the shutdown timeout: what the backend has not taken by then stays in the spool, for the next
``enable()`` or ``spark-lineage replay``. A client passed to ``enable()`` is used where it is, from a
thread; so is everything if the helper cannot start or dies (what it had not read from the pipe yet is lost
with it, and a warning says so).
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import RunEvent, RunState

from iceberg_facets.events import IcebergEventBuilder, RunIdentity
from iceberg_facets.items import Close, Committed, Flush, Item, RunEnded, RunStarted, Scanned, TableChanged
from iceberg_facets.pipe import frame, write_all
from iceberg_facets.records import RunRecord
from spark_lineage.config import LineageConfig
from spark_lineage.delivery import Delivery, create_client
from spark_lineage.events import new_run_id
from spark_lineage.redaction import Redactor
from spark_lineage.worker import ErrorLog

log = logging.getLogger("iceberg_facets")

CLOSE_MARGIN_SECONDS = 2.0
"""How long past its close timeout the helper may take to exit (its own teardown) before it is killed."""


class DeliveryMode(str, Enum):
    """Where events are built, spooled and sent (``iceberg_facets.enable(delivery=...)``)."""

    PROCESS = "process"
    """In a helper process, so that their Python work never competes with the job's threads for the GIL."""
    THREAD = "thread"
    """In a thread of this process."""


@dataclass(frozen=True)
class DeliverySettings:
    """What the helper process needs to build and send events as this process would."""

    config: LineageConfig
    job_name: str
    pyiceberg_version: str


def open_delivery(
    config: LineageConfig, client: OpenLineageClient | None, redactor: Redactor, errors: ErrorLog
) -> Delivery:
    """The spooled delivery ``config`` describes, sending through ``client``'s transport (default: the client
    ``config`` describes). A spool that cannot be kept on disk (or breaks later) is replaced by one in memory, with
    a warning (:mod:`spark_lineage.delivery.failover`): lineage still flows while the process lives."""
    client = client or create_client(config, redactor)
    return Delivery.configured(
        config,
        client,
        errors,
        redactor,
        label="iceberg_facets",
        spool_setting="iceberg_facets.enable() option spool_dir",
    )


class RunAssembler:
    """Turns delivery items into events, in order, and hands each to ``submit``: a block's items into its
    one run, the others into runs of their own."""

    def __init__(self, settings: DeliverySettings, submit: Callable[[RunEvent], None]) -> None:
        self.builder = IcebergEventBuilder(settings.config, settings.job_name, settings.pyiceberg_version)
        self.submit = submit
        self.blocks: dict[str, RunRecord] = {}

    def handle(self, item: Item) -> None:
        builder = self.builder
        if isinstance(item, RunStarted):
            self.blocks[item.identity.run_id] = RunRecord()
            self.submit(builder.event(RunState.START, item.epoch_ms, item.identity, "JOB"))
        elif isinstance(item, RunEnded):
            record = self.blocks.pop(item.identity.run_id, RunRecord())
            state = RunState.FAIL if item.error is not None else RunState.COMPLETE
            self.submit(builder.block_event(state, item.epoch_ms, item.identity, record, item.error, item.stack))
        else:
            block = self.blocks.get(item.block_run_id) if item.block_run_id is not None else None
            if block is None:
                self.submit(self._own_run_event(item))
            elif isinstance(item, Committed):
                block.commits.append(item.record)
            elif isinstance(item, Scanned):
                block.scans.append(item.record)
            else:
                block.changes.append(item.record)

    def _own_run_event(self, item: Committed | Scanned | TableChanged) -> RunEvent:
        builder = self.builder
        if isinstance(item, Committed):
            record = item.record
            name = builder.standalone_job_name(builder.commit_action(record), record.table)
            return builder.commit_event(record, RunIdentity(new_run_id(record.start_ms), name))
        if isinstance(item, Scanned):
            scan = item.record
            name = builder.standalone_job_name("scan", scan.table)
            return builder.scan_event(scan, RunIdentity(new_run_id(scan.start_ms), name))
        change = item.record
        name = builder.standalone_job_name(f"{change.lifecycle.value.lower()}_table", change.table)
        return builder.table_change_event(change, RunIdentity(new_run_id(change.time_ms), name))


class ItemDelivery(Protocol):
    """Where the worker thread hands delivery items; ``send`` and ``flush`` are called from that thread only."""

    def send(self, item: Item) -> None: ...

    def flush(self, timeout: float | None) -> bool: ...

    def close(self, timeout: float | None) -> bool: ...


class ThreadDelivery:
    """Builds and spools events on the calling (worker) thread; the spool's sender thread sends them."""

    def __init__(self, settings: DeliverySettings, delivery: Delivery) -> None:
        self.delivery = delivery
        self.assembler = RunAssembler(settings, delivery.submit)

    def send(self, item: Item) -> None:
        self.assembler.handle(item)

    def flush(self, timeout: float | None) -> bool:
        return self.delivery.flush(timeout)

    def close(self, timeout: float | None) -> bool:
        return self.delivery.close(timeout)


class ProcessDelivery:
    """Writes delivery items to a helper process that builds, spools and sends the events."""

    def __init__(self, settings: DeliverySettings) -> None:
        options: dict[str, object] = {}
        if os.name == "posix":
            options["start_new_session"] = True  # a Ctrl-C meant for the job must not stop delivery
        # The helper imports what this process imports, even from paths added at run time (notebooks, vendoring).
        search_path = os.pathsep.join(entry for entry in sys.path if entry)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "iceberg_facets._helper", str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": search_path},
            **options,  # type: ignore[call-overload]
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        # Written with os.write, never through the buffered file: close() must not wait for a lock inside it.
        self._fd = self.process.stdin.fileno()
        self._write_lock = threading.Lock()
        self._closed = False
        self._flushes = 0
        self._answered = (0, False)
        self._answers = threading.Condition()
        threading.Thread(target=self._read_answers, name="iceberg_facets delivery acks", daemon=True).start()
        try:
            self._write(settings)
        except BaseException:
            self.process.kill()  # it would wait for settings until this process ends
            raise

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def send(self, item: Item) -> None:
        self._write(item)

    def flush(self, timeout: float | None) -> bool:
        """True once the helper has sent everything written so far, within ``timeout`` seconds."""
        self._flushes += 1
        number = self._flushes
        self._write(Flush(number, timeout))
        with self._answers:
            self._answers.wait_for(lambda: self._answered[0] >= number or not self.alive, timeout)
            return self._answered == (number, True)

    def close(self, timeout: float | None) -> bool:
        """Tell the helper to send what it can within ``timeout`` seconds and exit, and wait for it; kill it
        if it has not exited :data:`CLOSE_MARGIN_SECONDS` after that. True if it delivered everything. Never
        raises, and never waits longer, whatever state the helper is in."""
        limit = None if timeout is None else timeout + CLOSE_MARGIN_SECONDS
        deadline = None if limit is None else time.monotonic() + limit
        try:
            # The worker thread may still be writing (it missed the deadline): never interleave with it.
            if self._write_lock.acquire(timeout=-1 if limit is None else limit):
                try:
                    if self._writable(deadline):
                        write_all(self._fd, frame(Close(timeout)))
                    self._closed = True
                    self.process.stdin.close()
                finally:
                    self._write_lock.release()
            self.process.wait(None if deadline is None else max(deadline - time.monotonic(), 0.0))
        except (OSError, ValueError, subprocess.TimeoutExpired):
            with contextlib.suppress(OSError):
                self.process.kill()  # what it read is in the spool already; only its last log line is lost
                self.process.wait()
            return False
        return bool(self.process.returncode == 0)

    def _write(self, item: object) -> None:
        data = frame(item)
        with self._write_lock:
            if self._closed:
                raise BrokenPipeError("the delivery process was closed")
            write_all(self._fd, data)

    def _writable(self, deadline: float | None) -> bool:
        """Whether the pipe takes a small write before ``deadline``: a helper that stopped reading must not hold
        up the close."""
        if os.name != "posix":
            return True
        remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        return bool(select.select([], [self._fd], [], remaining)[1])

    def _read_answers(self) -> None:
        """Answers to flushes, one line each: ``<number> <1 if everything was delivered, else 0>``."""
        for line in self.process.stdout:
            number, _, delivered = line.decode(errors="replace").partition(" ")
            if number.strip().isdigit():
                with self._answers:
                    self._answered = (int(number), delivered.strip() == "1")
                    self._answers.notify_all()
        with self._answers:
            self._answers.notify_all()
