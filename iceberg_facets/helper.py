"""The delivery helper process (``python -m iceberg_facets._helper <parent pid>``): reads its settings, then
delivery items, from its stdin; builds each item's events and spools them, and a sender thread sends them;
answers the parent's flushes on its stdout.

It lives as long as its parent: at ``Close``, at end of input, or once the parent is gone (even killed with
SIGKILL; see :mod:`iceberg_facets.pipe`), everything it read is in the spool already; it sends what it can
within the shutdown timeout, leaves the rest in the spool (one log line says how many events wait there and
how to replay them) and exits: 0 when everything was delivered, :data:`UNDELIVERED_EXIT` otherwise. Its log
lines reach the user's terminal only while the parent runs, never over the shell prompt after it
(:class:`ParentsTerminal`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import signal
import sys
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import IO

from iceberg_facets.delivery import DeliverySettings, RunAssembler, open_delivery
from iceberg_facets.items import Close, Flush
from iceberg_facets.pipe import FrameReader
from spark_lineage.delivery import Delivery, undelivered
from spark_lineage.logs import LOG_LEVEL_ENV
from spark_lineage.redaction import Redactor, protect_logs
from spark_lineage.worker import ErrorLog, one_line

HELPER_LOG = "iceberg_facets-helper.log"
"""The file in the spool directory the helper logs to once its parent is gone."""
UNDELIVERED_EXIT = 3
"""The exit status when events were left in the spool."""
_HELPER_NICENESS = 10


class FlushAnswerer:
    """Answers the parent's flushes from a thread of its own: waiting for the backend must never stop the
    helper from reading (and spooling) what the parent writes next."""

    def __init__(self, delivery: Delivery, answers: IO[str], errors: ErrorLog) -> None:
        self._delivery = delivery
        self._answers = answers
        self._errors = errors
        self._requests: queue.SimpleQueue[Flush] = queue.SimpleQueue()
        threading.Thread(target=self._run, name="iceberg_facets flush answers", daemon=True).start()

    def request(self, flush: Flush) -> None:
        self._requests.put(flush)

    def _run(self) -> None:
        while True:
            flush = self._requests.get()
            try:
                delivered = self._delivery.flush(flush.timeout)
            except Exception as error:  # noqa: BLE001 - a spool that cannot be read answers "not delivered"
                self._errors.report("waiting for delivery", error)
                delivered = False
            try:
                self._answers.write(f"{flush.number} {int(delivered)}\n")
                self._answers.flush()
            except (OSError, ValueError):  # the parent is gone: nobody waits for an answer
                return


class ParentsTerminal(logging.Handler):
    """Where the helper's log lines go: the stderr it shares with its parent while the parent runs (the user
    sees them before the shell prompt comes back: the parent waits for the helper at exit); once the parent is
    gone (killed, or it did not wait), a file next to the spool, never the terminal over the user's prompt."""

    def __init__(self, parent: int) -> None:
        super().__init__()
        self.parent = parent
        self.file: Path | None = None
        """Where lines go once the parent is gone; ``None``: nowhere (a spool in memory)."""
        self.parent_gone = False
        """Set when the parent's input ended without a ``Close``: it is gone, though until the system has
        adopted this process its parent pid may still name it (a dying process closes its pipes first)."""
        self.setFormatter(logging.Formatter("%(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
            if not self.parent_gone and os.getppid() == self.parent:  # an adopted helper's parent pid changes
                sys.stderr.write(line + "\n")
                sys.stderr.flush()
            elif self.file is not None:
                stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
                with self.file.open("a", encoding="utf-8") as out:
                    out.write(f"{stamp} [{os.getpid()}] {line}\n")
        except Exception:  # noqa: BLE001 - a line that cannot be written is not worth failing delivery for
            self.handleError(record)


def _log_to(handler: ParentsTerminal) -> None:
    """Every log line of the helper goes through ``handler``: WARNING and above (``$SPARK_LINEAGE_LOG_LEVEL``
    for more), in one line each; an exception nobody caught is one line too, its traceback at DEBUG."""
    root = logging.getLogger()
    root.addHandler(handler)
    level = logging.getLevelName((os.environ.get(LOG_LEVEL_ENV) or "WARNING").strip().upper())
    root.setLevel(level if isinstance(level, int) else logging.WARNING)
    log = logging.getLogger("iceberg_facets")

    def uncaught(kind: type[BaseException], error: BaseException, trace: TracebackType | None) -> None:
        log.warning("iceberg_facets: the delivery process failed: %s", one_line(error))
        log.debug("iceberg_facets: the delivery process failed", exc_info=(kind, error, trace))

    sys.excepthook = uncaught
    threading.excepthook = lambda hook: uncaught(hook.exc_type, hook.exc_value or hook.exc_type(), hook.exc_traceback)


def main() -> None:
    """Run the helper until its input ends; never returns."""
    if hasattr(signal, "SIGINT"):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(os, "nice"):
        os.nice(_HELPER_NICENESS)  # on a busy machine the job's own processes run first
    answers = _answer_channel()
    errors = ErrorLog("iceberg_facets")
    parent = int(sys.argv[1]) if len(sys.argv) > 1 else os.getppid()
    terminal = ParentsTerminal(parent)
    _log_to(terminal)
    items = iter(FrameReader(sys.stdin.fileno(), parent, errors))
    settings = next(items, None)
    if not isinstance(settings, DeliverySettings):
        os._exit(1)
    try:
        redactor = Redactor(settings.config.redaction_pattern)
        protect_logs(redactor)
        delivery = open_delivery(settings.config, None, redactor, errors)
    except Exception as error:  # noqa: BLE001 - the parent sees the pipe break and delivers from a thread
        errors.report("starting the delivery process", error)
        os._exit(1)
    if delivery.spool.path is not None:
        terminal.file = delivery.spool.path / HELPER_LOG
    assembler = RunAssembler(settings, delivery.submit)
    answerer = FlushAnswerer(delivery, answers, errors)
    timeout: float | None = settings.config.shutdown_timeout
    closed = False
    for item in items:
        if isinstance(item, Close):
            timeout = item.timeout
            closed = True
            break
        if isinstance(item, Flush):
            answerer.request(item)
            continue
        try:
            assembler.handle(item)
        except Exception as error:  # noqa: BLE001 - one bad item must not stop the others
            errors.report("building an event", error)
    terminal.parent_gone = not closed  # its input ended without a Close: the parent died
    try:
        delivered = delivery.close(timeout)
    except Exception as error:  # noqa: BLE001 - what was spooled stays spooled
        errors.report("closing the delivery", error)
        delivered = False
    errors.summarize(skip=undelivered)
    for stream in (sys.stderr, answers):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    # Skip the interpreter's teardown: it would wait for the sender thread, which the close has given up on.
    os._exit(0 if delivered else UNDELIVERED_EXIT)


def _answer_channel() -> IO[str]:
    """The pipe to the parent for flush answers, kept apart from stdout: whatever this process prints (a
    console transport, a library's ``print``) goes to stderr, not into the answers."""
    channel = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return channel
