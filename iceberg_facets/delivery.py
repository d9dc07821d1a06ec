"""From records to delivered events: the runs they make up, the events of those runs, and the client that sends
them, in this process or in a helper process of its own.

Building an event and sending it over HTTP take a few milliseconds of Python per commit. In a thread of the
user's process that time is taken from the job's own threads by the GIL, so by default a helper process
(``python -m iceberg_facets._helper``) does it: the user's process only writes each record down a pipe. A
client passed to ``enable()`` is used where it is, from a thread; so is everything if the helper cannot start
or dies (what it had not sent yet is lost with it, and a warning says so).
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from typing import IO, Any, Protocol

from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import RunEvent, RunState

from iceberg_facets.events import IcebergEventBuilder, RunIdentity
from iceberg_facets.records import RunRecord
from spark_lineage.config import LineageConfig
from spark_lineage.events import new_run_id
from spark_lineage.worker import ErrorLog

log = logging.getLogger("iceberg_facets")
_HELPER_NICENESS = 10


@dataclass(frozen=True)
class DeliverySettings:
    """What the helper process needs to build and send events as this process would."""

    config: LineageConfig
    job_name: str
    pyiceberg_version: str


class RunAssembler:
    """Turns delivery items into events and emits them. Items, in order:

    - ``("start", RunIdentity, epoch_ms)`` and ``("end", RunIdentity, epoch_ms, error, stack)`` for a block;
    - ``("commit" | "scan" | "change", record, block_run_id | None)`` for what was done, in a block or not.
    """

    def __init__(self, settings: DeliverySettings, client: OpenLineageClient, errors: ErrorLog) -> None:
        self.builder = IcebergEventBuilder(settings.config, settings.job_name, settings.pyiceberg_version)
        self.client = client
        self.errors = errors
        self.blocks: dict[str, RunRecord] = {}

    def handle(self, item: tuple[Any, ...]) -> None:
        kind, builder = item[0], self.builder
        if kind == "start":
            identity, epoch_ms = item[1], item[2]
            self.blocks[identity.run_id] = RunRecord()
            self.emit(builder.event(RunState.START, epoch_ms, identity, "JOB"))
        elif kind == "end":
            identity, epoch_ms, error, stack = item[1:5]
            record = self.blocks.pop(identity.run_id, RunRecord())
            state = RunState.FAIL if error is not None else RunState.COMPLETE
            self.emit(builder.block_event(state, epoch_ms, identity, record, error, stack))
        else:
            record, block_run_id = item[1], item[2]
            block = self.blocks.get(block_run_id) if block_run_id is not None else None
            if block is not None:
                getattr(block, {"commit": "commits", "scan": "scans", "change": "changes"}[kind]).append(record)
            elif kind == "commit":
                name = builder.standalone_job_name(builder.commit_action(record), record.table)
                self.emit(builder.commit_event(record, RunIdentity(new_run_id(record.start_ms), name)))
            elif kind == "scan":
                name = builder.standalone_job_name("scan", record.table)
                self.emit(builder.scan_event(record, RunIdentity(new_run_id(record.start_ms), name)))
            else:
                name = builder.standalone_job_name(f"{record.lifecycle.lower()}_table", record.table)
                self.emit(builder.table_change_event(record, RunIdentity(new_run_id(record.time_ms), name)))

    def emit(self, event: RunEvent) -> None:
        try:
            self.client.emit(event)
        except Exception as error:  # noqa: BLE001 - a failing backend is logged, never raised
            self.errors.report("emitting an event", error)


class Delivery(Protocol):
    """Where the worker thread hands delivery items; all methods are called from that thread only."""

    def send(self, item: tuple[Any, ...]) -> None: ...

    def flush(self, timeout: float | None) -> bool: ...

    def close(self, timeout: float | None) -> bool: ...


class ThreadDelivery:
    """Builds and sends events on the calling (worker) thread."""

    def __init__(self, assembler: RunAssembler) -> None:
        self.assembler = assembler

    def send(self, item: tuple[Any, ...]) -> None:
        self.assembler.handle(item)

    def flush(self, timeout: float | None) -> bool:
        return True

    def close(self, timeout: float | None) -> bool:
        return True


class ProcessDelivery:
    """Writes delivery items to a helper process that builds and sends the events."""

    def __init__(self, settings: DeliverySettings) -> None:
        options: dict[str, Any] = {}
        if os.name == "posix":
            options["start_new_session"] = True  # a Ctrl-C meant for the job must not stop delivery
        # The helper imports what this process imports, even from paths added at run time (notebooks, vendoring).
        search_path = os.pathsep.join(entry for entry in sys.path if entry)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "iceberg_facets._helper"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": search_path},
            **options,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self._pipe: IO[bytes] = self.process.stdin
        self._acks: IO[bytes] = self.process.stdout
        self._flushes = 0
        self._acked = 0
        self._acked_changed = threading.Condition()
        threading.Thread(target=self._read_acks, name="iceberg_facets delivery acks", daemon=True).start()
        self._write(settings)

    def send(self, item: tuple[Any, ...]) -> None:
        self._write(item)

    def flush(self, timeout: float | None) -> bool:
        """True once the helper has sent everything written so far, within ``timeout`` seconds."""
        self._flushes += 1
        self._write(("flush", self._flushes))
        with self._acked_changed:
            return self._acked_changed.wait_for(lambda: self._acked >= self._flushes or not self.alive, timeout) and (
                self._acked >= self._flushes
            )

    def close(self, timeout: float | None) -> bool:
        try:
            self._write(("close",))
            self._pipe.close()
            self.process.wait(timeout)
            return self.process.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            return False

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def _write(self, item: object) -> None:
        pickle.dump(item, self._pipe, protocol=pickle.HIGHEST_PROTOCOL)
        self._pipe.flush()

    def _read_acks(self) -> None:
        for line in self._acks:
            with self._acked_changed:
                self._acked = int(line)
                self._acked_changed.notify_all()
        with self._acked_changed:
            self._acked_changed.notify_all()


def main() -> None:
    """The helper process: read settings, then delivery items, from stdin until ``close`` or end of input."""
    if hasattr(signal, "SIGINT"):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(os, "nice"):
        os.nice(_HELPER_NICENESS)  # on a busy machine the job's own processes run first
    source, acks = sys.stdin.buffer, sys.stdout
    settings: DeliverySettings = pickle.load(source)
    assembler = RunAssembler(settings, settings.config.create_client(), ErrorLog("iceberg_facets"))
    while True:
        try:
            item = pickle.load(source)
        except EOFError:
            break
        if item[0] == "close":
            break
        if item[0] == "flush":
            acks.write(f"{item[1]}\n")
            acks.flush()
            continue
        try:
            assembler.handle(item)
        except Exception as error:  # noqa: BLE001 - one bad item must not stop the others
            assembler.errors.report("building an event", error)
    assembler.client.close(timeout=-1)
    acks.flush()
    os._exit(0)  # everything is sent and closed: skip the interpreter's teardown, which the job would wait for
