"""Sending what the spool holds, without ever holding up the job.

One :class:`Sender` thread per destination and process takes the spool's oldest events for its destination
(other processes' too: that is how the next ``enable()`` replays what an earlier process left), sends them in
order, and forgets each one the backend acknowledged. A failure keeps the event in the spool and pauses the
whole destination (a backoff per backend, not per event: a dead backend is found dead once, not once per
event). An event is sent again only from the spool, never by a second layer of retries. Each attempt of an
event waits twice as long as the one before (up to 8 times the configured timeout; attempts are counted in
the spool, so a replay in another process goes on from there), and a timeout that ran out makes the sender
wait that much longer for the events after it too: a backend slower than the timeout gets one second copy,
not a copy of every event, nor a flood of them.

Delivery is at least once: an event the backend stored but did not acknowledge (it answered after the
timeout, or the process died before the answer) is sent again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from spark_lineage import logs
from spark_lineage.delivery.failover import FailoverSpool
from spark_lineage.delivery.payloads import from_payload
from spark_lineage.delivery.spool import InFlight, Spool, lease_owner
from spark_lineage.worker import ErrorLog, problem, timed_out, yield_cpu_to_the_job

log = logging.getLogger("spark_lineage")

BATCH = 50
IDLE_POLL_SECONDS = 5.0
"""How often an idle sender looks for events other processes spooled for its destination."""
MAX_TIMEOUT_DOUBLINGS = 3
"""An event's timeout doubles with each attempt, up to 2**3 = 8 times the configured one."""


class Backoff:
    """When a destination may be tried again: at once while it answers, then after ``first``, twice that,
    four times that, ... up to ``most`` seconds."""

    def __init__(self, first: float = 0.5, most: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.first = first
        self.most = most
        self._clock = clock
        self.failures = 0
        self.next_try = 0.0

    def failed(self) -> None:
        self.failures += 1
        self.next_try = self._clock() + min(self.first * 2.0 ** (self.failures - 1), self.most)

    def succeeded(self) -> None:
        self.failures = 0
        self.next_try = 0.0

    def wait_seconds(self) -> float:
        return max(self.next_try - self._clock(), 0.0)


class Sender:
    """Sends one destination's spooled events through ``transport`` from a daemon thread."""

    def __init__(
        self,
        spool: Spool | FailoverSpool,
        destination: str,
        transport: Any,
        errors: ErrorLog,
        name: str = "spark_lineage-sender",
        backoff: Backoff | None = None,
    ) -> None:
        self.spool = spool
        self.destination = destination
        self.transport = transport
        self.sent = 0
        self.problem: str | None = None
        """Why the last send failed, in a few words (``connection refused``); ``None`` once one succeeded."""
        self._errors = errors
        self._owner = lease_owner(id(self))
        self._in_flight: InFlight | None = None
        self._backoff = backoff or Backoff()
        self._base_timeout = getattr(transport, "timeout", None)
        self._slow_backend_doublings = 0
        """How many times the timeout had to double for this backend to answer in time."""
        self._wake = threading.Event()
        self._progress = threading.Condition()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def lease_seconds(self) -> float:
        """How long a leased event is ours: longer than one send can take."""
        if isinstance(self._base_timeout, (int, float)):
            return float(self._base_timeout * 2**MAX_TIMEOUT_DOUBLINGS + 10)
        return 60.0

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
        """Flush within ``timeout``, then stop. Returns whether everything was delivered. The events this
        sender leased go back to the spool at once, except one still in the middle of its send: that one
        stays leased until its request's timeout, so that no other sender (a replay, the next ``enable()``)
        sends a copy while the backend may still be taking it. Once this process has ended, a replay sends
        it at once (at least once)."""
        delivered = self.flush(timeout)
        self._stopping.set()
        self._wake.set()
        self._thread.join(0.2)
        self.spool.release_owned(self._owner, self._in_flight)
        return delivered

    def _run(self) -> None:
        yield_cpu_to_the_job()
        while not self._stopping.is_set():
            pause = self._backoff.wait_seconds()
            if pause:
                self._stopping.wait(pause)
                continue
            try:
                self._send_a_batch()
            except Exception as error:  # noqa: BLE001 - the spool failed (locked, disk full): try again later
                self._failed(error)

    def _send_a_batch(self) -> None:
        # Cleared before looking, so that a wake() while the batch is leased or sent is not lost.
        self._wake.clear()
        batch = self.spool.lease(self.destination, self._owner, BATCH, self.lease_seconds)
        if not batch:
            self._wake.wait(IDLE_POLL_SECONDS)
            return
        for index, item in enumerate(batch):
            if self._stopping.is_set():
                self.spool.release([rest.id for rest in batch[index:]], self._owner)
                break
            doublings = min(max(item.attempts, self._slow_backend_doublings), MAX_TIMEOUT_DOUBLINGS)
            send_seconds = self.lease_seconds
            if isinstance(self._base_timeout, (int, float)):
                self.transport.timeout = self._base_timeout * 2**doublings
                # The timeout bounds connecting and then waiting for the answer, each on its own.
                send_seconds = 2 * self.transport.timeout + 1
            self._in_flight = InFlight(item.id, time.time() + send_seconds)
            try:
                with logs.sending(self._errors, self.destination):
                    self.transport.emit(from_payload(item.payload))
            except Exception as error:  # noqa: BLE001 - kept in the spool, tried again after a pause
                self._in_flight = None
                self.spool.release([rest.id for rest in batch[index:]], self._owner, attempted=[item.id])
                if timed_out(error):
                    self._slow_backend_doublings = min(doublings + 1, MAX_TIMEOUT_DOUBLINGS)
                self._failed(error)
                break
            # Forgotten before it stops counting as in flight: a close() in between must not hand it back.
            self.spool.acknowledge(item.id)
            self._in_flight = None
            self.sent += 1
            self.problem = None
            self._backoff.succeeded()
            with self._progress:
                self._progress.notify_all()

    def _failed(self, error: BaseException) -> None:
        self._backoff.failed()
        self.problem = problem(error)
        # One kind per destination and problem: a backend that is down is said once, not once per event; one
        # that comes back and then fails differently (an HTTP 500 after connection refused) is said again.
        self._errors.report(
            f"{UNDELIVERED_KIND}{self.destination}: {self.problem}",
            error,
            message=f"{self._waiting()}not delivered to {self.destination} ({self.problem}); " + kept(self.spool),
        )
        with self._progress:
            self._progress.notify_all()

    def _waiting(self) -> str:
        """``"<n> lineage events "``: how many events wait for this destination now (a failure is at most one every few
        seconds, once the backoff has grown, so counting them costs nothing to speak of)."""
        try:
            return lineage_events(self.spool.pending(self.destination).count) + " "
        except Exception:  # noqa: BLE001 - the spool itself may be what failed
            return "lineage events "


UNDELIVERED_KIND = "delivering to "
"""How every failed send's :class:`ErrorLog` kind starts (then the destination and the problem)."""


def undelivered(kind: str) -> bool:
    """Whether an :class:`ErrorLog` kind is a failed send, which the delivery's closing line sums up itself."""
    return kind.startswith(UNDELIVERED_KIND)


def lineage_events(count: int) -> str:
    """``1 lineage event``, ``2 lineage events``."""
    return f"{count} lineage event{'' if count == 1 else 's'}"


def kept(spool: Spool | FailoverSpool) -> str:
    """Where undelivered events wait, and how to send them by hand."""
    if spool.path is None:
        why = spool.problem if isinstance(spool, FailoverSpool) else None
        why = why or "python.spool.disabled=true"
        return f"they are kept in memory ({why}) and sent when the backend answers again"
    return (
        f"they wait in the spool at {spool.path} and are sent when the backend answers again, "
        f"or with: spark-lineage replay --spool {spool.path}"
    )
