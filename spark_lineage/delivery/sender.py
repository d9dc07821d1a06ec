"""Sending what the spool holds, without ever holding up the job.

One :class:`Sender` thread per destination and process takes the spool's oldest events for its destination
(other processes' too: that is how the next ``enable()`` replays what an earlier process left), sends them in
order, and forgets each one the backend acknowledged. A failure keeps the event in the spool and pauses the
whole destination (a backoff per backend, not per event: a dead backend is found dead once, not once per
event). A request that timed out is sent again from the spool with a longer timeout, so a backend slower than
the timeout gets a second copy, not a flood of them. Delivery is at least once: an event the backend stored
but did not acknowledge before the process died is sent again by a replay.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from spark_lineage.delivery.payloads import from_payload
from spark_lineage.delivery.spool import Spool
from spark_lineage.worker import ErrorLog

log = logging.getLogger("spark_lineage")

BATCH = 50
IDLE_POLL_SECONDS = 5.0
"""How often an idle sender looks for events other processes spooled for its destination."""
MAX_BACKOFF_SECONDS = 30.0
MAX_TIMEOUT_FACTOR = 8
"""A timeout that keeps running out is doubled up to this many times the configured one."""


class Backoff:
    """When a destination may be tried again: at once while it answers, then after 1, 2, 4, ... seconds."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.failures = 0
        self.next_try = 0.0

    def failed(self) -> None:
        self.failures += 1
        self.next_try = self._clock() + min(2.0 ** (self.failures - 1), MAX_BACKOFF_SECONDS)

    def succeeded(self) -> None:
        self.failures = 0
        self.next_try = 0.0

    def wait_seconds(self) -> float:
        return max(self.next_try - self._clock(), 0.0)


class Sender:
    """Sends one destination's spooled events through ``transport`` from a daemon thread."""

    def __init__(
        self, spool: Spool, destination: str, transport: Any, errors: ErrorLog, name: str = "spark_lineage-sender"
    ) -> None:
        self.spool = spool
        self.destination = destination
        self.transport = transport
        self.sent = 0
        self._errors = errors
        self._owner = f"{os.getpid()}:{id(self)}"
        self._backoff = Backoff()
        self._base_timeout = getattr(transport, "timeout", None)
        self._wake = threading.Event()
        self._progress = threading.Condition()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def lease_seconds(self) -> float:
        """How long a leased event is ours: longer than one send can take."""
        timeout = getattr(self.transport, "timeout", None)
        return float(timeout) * 2 + 10 if isinstance(timeout, (int, float)) else 60.0

    def wake(self) -> None:
        """There is something new to send."""
        self._wake.set()

    def flush(self, timeout: float | None) -> bool:
        """Wait until nothing is left for this destination. False when ``timeout`` seconds were not enough
        (the backend is down or slow): what is left stays in the spool."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self.wake()
        with self._progress:
            while self.spool.pending(self.destination).count:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._progress.wait(min(remaining, 0.5) if remaining is not None else 0.5)
        return True

    def close(self, timeout: float | None) -> bool:
        """Flush within ``timeout``, then stop. Returns whether everything was delivered."""
        delivered = self.flush(timeout)
        self._stopping.set()
        self._wake.set()
        self._thread.join(0.2)
        return delivered

    def _run(self) -> None:
        while not self._stopping.is_set():
            pause = self._backoff.wait_seconds()
            if pause:
                self._stopping.wait(pause)
                continue
            batch = self.spool.lease(self.destination, self._owner, BATCH, self.lease_seconds)
            if not batch:
                self._wake.wait(IDLE_POLL_SECONDS)
                self._wake.clear()
                continue
            for index, item in enumerate(batch):
                if self._stopping.is_set():
                    self.spool.release([rest.id for rest in batch[index:]])
                    break
                try:
                    self.transport.emit(from_payload(item.payload))
                except Exception as error:  # noqa: BLE001 - kept in the spool, tried again after a pause
                    self.spool.release([rest.id for rest in batch[index:]], attempted=[item.id])
                    self._failed(error)
                    break
                self.spool.acknowledge(item.id)
                self.sent += 1
                self._backoff.succeeded()
                with self._progress:
                    self._progress.notify_all()

    def _failed(self, error: BaseException) -> None:
        self._backoff.failed()
        timed_out = "timeout" in type(error).__name__.lower() or "timed out" in str(error).lower()
        if timed_out and isinstance(self._base_timeout, (int, float)):
            current = float(getattr(self.transport, "timeout", self._base_timeout))
            self.transport.timeout = min(current * 2, self._base_timeout * MAX_TIMEOUT_FACTOR)
        self._errors.report(
            f"delivering to {self.destination}",
            message=(
                f"the lineage backend ({self.destination}) did not take an event ({_describe(error)}); "
                "events stay in the spool and are sent when it answers again"
            ),
        )
        with self._progress:
            self._progress.notify_all()


def _describe(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:200]}" if text else type(error).__name__
