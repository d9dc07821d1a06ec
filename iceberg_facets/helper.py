"""The delivery helper process (``python -m iceberg_facets._helper <parent pid>``): reads its settings, then
delivery items, from its stdin; builds each item's events and spools them, and a sender thread sends them;
answers the parent's flushes on its stdout.

It lives as long as its parent: at ``Close``, at end of input, or once the parent is gone (even killed with
SIGKILL; see :mod:`iceberg_facets.pipe`), everything it read is in the spool already; it sends what it can
within the shutdown timeout, leaves the rest in the spool (one log line says how many events wait there and
how to replay them) and exits: 0 when everything was delivered, :data:`UNDELIVERED_EXIT` otherwise.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import sys
import threading
from typing import IO

from iceberg_facets.delivery import DeliverySettings, RunAssembler, open_delivery
from iceberg_facets.items import Close, Flush
from iceberg_facets.pipe import FrameReader
from spark_lineage.delivery import Delivery
from spark_lineage.redaction import Redactor, protect_logs
from spark_lineage.worker import ErrorLog

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


def main() -> None:
    """Run the helper until its input ends; never returns."""
    if hasattr(signal, "SIGINT"):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(os, "nice"):
        os.nice(_HELPER_NICENESS)  # on a busy machine the job's own processes run first
    answers = _answer_channel()
    errors = ErrorLog("iceberg_facets")
    parent = int(sys.argv[1]) if len(sys.argv) > 1 else os.getppid()
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
    assembler = RunAssembler(settings, delivery.submit)
    answerer = FlushAnswerer(delivery, answers, errors)
    timeout: float | None = settings.config.shutdown_timeout
    for item in items:
        if isinstance(item, Close):
            timeout = item.timeout
            break
        if isinstance(item, Flush):
            answerer.request(item)
            continue
        try:
            assembler.handle(item)
        except Exception as error:  # noqa: BLE001 - one bad item must not stop the others
            errors.report("building an event", error)
    try:
        delivered = delivery.close(timeout)
    except Exception as error:  # noqa: BLE001 - what was spooled stays spooled
        errors.report("closing the delivery", error)
        delivered = False
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
