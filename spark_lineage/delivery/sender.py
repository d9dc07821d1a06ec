"""Sending what the spool holds, without ever holding up the job.

One :class:`Sender` per destination and process takes the spool's oldest events for its destination (other
processes' too: that is how the next ``enable()`` replays what an earlier process left), sends them, and forgets
each one the backend acknowledged. It sends through one or more *lanes*, each a thread with one request in flight
(``python.delivery.concurrency`` of them for an HTTP backend, see :func:`lane_transports`): a backend that takes
seconds per request does not cap delivery at one event per request time. Each run's events still go in spool
order, and the application run's START first and its end last: a lane leases only events whose earlier events
are sent or in its own batch (:meth:`Spool.lease`). A lane waiting for work gets the events spooled for it
already leased, in memory (:meth:`Sender.offer`, :meth:`Sender.hand`): the spool leases them as it stores them,
when nothing of the destination is before them.

A failure keeps the event in the spool and pauses the whole destination (a backoff per backend, not per event or
lane: a dead backend is found dead once, not once per event or per lane, and said once). After a failure, one
lane alone tries again; the others join once a request succeeded (and so at start: one request finds out
whether the backend answers, not several). An event is sent again only from the spool, never by a second layer
of retries. Each attempt of an event waits twice as long as the one before (up to 8 times the configured
timeout; attempts are counted in the spool, so a replay in another process goes on from there), and a timeout
that ran out makes the sender wait that much longer for the events after it too: a backend slower than the
timeout gets one second copy, not a copy of every event, nor a flood of them.

Delivery is at least once: an event the backend stored but did not acknowledge (it answered after the
timeout, or the process died before the answer) is sent again. Otherwise it is exactly once, between the lanes
and processes sharing a spool, however long a batch takes: a lane begins a send only while its lease outlasts
that send, renewing it when it would not (:meth:`Sender._begin_send`), and sends nothing another sender took over
(only a lane stalled longer than its lease, a stopped process, can find that). What a batch delivered is
forgotten in one transaction: when a send fails, when the sender closes, or once the first of them waited
:data:`ACKNOWLEDGE_SECONDS` in a batch still going; until then a delivered event stays leased to its lane (renewed
with the rest), so only a process that died meanwhile leaves it to be sent again (by the next sender: at most a
batch of copies, never a loss). When the batch ends, what it delivered is forgotten in the spool's next write
(:meth:`~spark_lineage.delivery.spool.Spool.forget_later`: the next events spooled, as a rule, so an action's
events cost one transaction, not two), or by the lane itself after :data:`ACKNOWLEDGE_SECONDS` if none came;
this process's readers of the spool take them as gone meanwhile, and other processes as leased.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from openlineage.client.transport.http import HttpTransport

from spark_lineage import costs, logs
from spark_lineage.costs import Stage
from spark_lineage.delivery.failover import FailoverSpool
from spark_lineage.delivery.spool import Handoff, InFlight, Spool, SpooledEvent, lease_owner
from spark_lineage.delivery.transports import SpooledEmit, spooled_emitter
from spark_lineage.transports.client_internals import forget_http_session
from spark_lineage.worker import ErrorLog, problem, timed_out, yield_cpu_to_the_job

log = logging.getLogger("spark_lineage")

BATCH = 50
IDLE_POLL_SECONDS = 5.0
"""How often an idle sender looks for events other processes spooled for its destination."""
MAX_TIMEOUT_DOUBLINGS = 3
"""An event's timeout doubles with each attempt, up to 2**3 = 8 times the configured one."""
JOIN_SECONDS = 0.2
"""How long :meth:`Sender.close` waits for its lanes' threads, in all."""
ACKNOWLEDGE_SECONDS = 1.0
"""The longest a delivered event waits to be forgotten with the rest of its batch (a slow backend's batch), or,
once its batch ended, with the spool's next write (a lane that finds none meanwhile forgets it itself)."""
LEASE_SLACK_SECONDS = 10.0
"""What a lane's lease must still have left when a send has surely ended: time to forget the event, or renew the
lease, after it (the spool may be busy with another process's transaction meanwhile)."""


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


def lane_transports(transport: Any, concurrency: int) -> list[Any]:
    """The transport of each lane: ``concurrency`` lanes for openlineage-python's HTTP transport, one otherwise.

    An HTTP lane is a shallow copy of ``transport``: the same settings (url, auth, headers, compression, its
    retries already left to the spool), with a requests Session of its own (made on first use, on the lane's
    thread: a Session is not safe to share between threads) and a ``timeout`` of its own, which the sender sets
    per attempt. No lane changes what another uses. An HTTP transport given a Session by its user
    (``HttpConfig.session``) keeps one lane: that Session cannot be shared, nor copied without losing what the
    user set in it.

    Every other transport gets one lane, as its sends cannot usefully or safely overlap: a Kafka producer
    already sends asynchronously and in batches, and each ``emit`` waits for the broker to acknowledge it; a
    file transport appends lines, which would interleave; the console prints; composite and transform
    transports wrap any of these; and a custom transport's thread safety is unknown."""
    if concurrency <= 1 or type(transport) is not HttpTransport or getattr(transport.config, "session", None):
        return [transport]
    lanes = []
    for _ in range(concurrency):
        lane = copy.copy(transport)
        forget_http_session(lane)
        lanes.append(lane)
    return lanes


@dataclass
class Lane:
    """One thread of a sender, with one request in flight at a time."""

    index: int
    owner: str
    """Its own lease owner: the spool keeps each run in order between lanes as between processes."""
    transport: Any
    own_transport: bool
    """Whether ``transport`` is the lane's own copy (closed with the lane), or the caller's."""
    emit: SpooledEmit
    """Sends a spooled event's JSON through ``transport`` (as it is, where the transport sends text)."""
    wake: threading.Event = field(default_factory=threading.Event)
    in_flight: InFlight | None = None
    """The event this lane is sending right now, and until when that send can go on."""
    leased_until: float = 0.0
    """``time.time()`` until which the lane's batch is surely leased to it (the spool may say a little later)."""
    delivered: list[int] = field(default_factory=list)
    """Events the backend took that are not forgotten yet (see :meth:`Sender._forget`)."""
    delivered_since: float = 0.0
    """``time.monotonic()`` when the first of them was delivered."""
    blocked: bool = False
    """The lane's last lease took nothing while events nobody holds waited (behind events another sender holds,
    which it may have delivered and not forgotten yet): it looks again after :data:`ACKNOWLEDGE_SECONDS`, not
    the idle poll's."""
    handed: list[tuple[list[SpooledEvent], float]] = field(default_factory=list)
    """Batches the spool leased to the lane as they were spooled (:meth:`Sender.hand`), each with the
    ``time.time()`` until which it is surely leased: sent before the lane leases anything, or given back."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    """Guards ``in_flight`` and ``delivered``, between the lane and :meth:`Sender.close`: every event the lane
    holds is in flight, delivered, or neither, never on its way from one to the other."""
    thread: threading.Thread | None = None


class Sender:
    """Sends one destination's spooled events through ``transport`` from daemon threads: up to
    ``concurrency`` requests in flight (see :func:`lane_transports`). ``stop_on`` names failures that will not
    heal (``spark-lineage replay``'s HTTP 401, 404...): the first one stops the sender, kept in ``halted_by``."""

    def __init__(
        self,
        spool: Spool | FailoverSpool,
        destination: str,
        transport: Any,
        errors: ErrorLog,
        name: str = "spark_lineage-sender",
        backoff: Backoff | None = None,
        *,
        concurrency: int = 1,
        stop_on: Callable[[BaseException], bool] | None = None,
        yield_cpu: bool = True,
        linger: float = 0.0,
    ) -> None:
        """``yield_cpu``: the lanes yield the CPU to the job (:func:`~spark_lineage.worker.yield_cpu_to_the_job`),
        where the job runs in this process. ``linger``: how many seconds a lane woken for new events waits for
        more before it leases them, so that what is spooled meanwhile goes in the same batch (a flush or a stop
        ends the wait); :meth:`offer` then hands no lane events as they are spooled."""
        self.spool = spool
        self.destination = destination
        self.transport = transport
        self.sent = 0
        self.problem: str | None = None
        """Why the last send failed, in a few words (``connection refused``); ``None`` once one succeeded."""
        self.halted_by: BaseException | None = None
        """The failure ``stop_on`` said will not heal, which stopped this sender."""
        self._errors = errors
        self._stop_on = stop_on
        self._yield_cpu = yield_cpu
        self._backoff = backoff or Backoff()
        self._base_timeout = getattr(transport, "timeout", None)
        self._slow_backend_doublings = 0
        """How many times the timeout had to double for this backend to answer in time."""
        self._lock = threading.Lock()
        """Guards the state the lanes share: the backoff, the counts, who may send, who waits for work."""
        self._epoch = 0
        """Counts failures that paused the destination: a send that started before the last one and fails too
        found nothing new (it is not reported, nor does it pause the destination longer)."""
        self._sending_lanes = 0
        self._open_lanes = 1
        """How many lanes may hold a batch at once: one at start and after a failure, all after a success."""
        self._idle: list[Lane] = []
        self._unclaimed_wake = False
        """A wake() no idle lane took: the next lane that finds nothing looks once more."""
        self._progress = threading.Condition()
        self._stopping = threading.Event()
        self._linger = linger
        self._hurry = threading.Event()
        """Set while a flush waits, and once the sender stops: a lane lingers no more."""
        self._hurrying = 0
        """How many flushes wait (under ``_lock``)."""
        self._running_lanes = 0
        self._after_stop: Callable[[], object] | None = None
        transports = lane_transports(transport, concurrency)
        self._lanes = [
            Lane(index, lease_owner(f"{id(self)}-{index}"), lane, lane is not transport, spooled_emitter(lane))
            for index, lane in enumerate(transports)
        ]
        self._running_lanes = len(self._lanes)
        self._by_owner = {lane.owner: lane for lane in self._lanes}
        for lane in self._lanes:
            suffix = f"-{lane.index}" if len(self._lanes) > 1 else ""
            lane.thread = threading.Thread(target=self._run, args=(lane,), name=name + suffix, daemon=True)
            lane.thread.start()

    @property
    def concurrency(self) -> int:
        """How many requests this sender may have in flight at once."""
        return len(self._lanes)

    @property
    def lease_seconds(self) -> float:
        """How long a batch is leased for, and renewed for while a lane sends it (:meth:`_begin_send`): longer
        than one send can take at the configured timeout."""
        if isinstance(self._base_timeout, (int, float)):
            return float(self._base_timeout * 2**MAX_TIMEOUT_DOUBLINGS + LEASE_SLACK_SECONDS)
        return 60.0

    def wake(self) -> None:
        """There is something new to send."""
        with self._lock:
            self._wake_one()

    def offer(self) -> Handoff | None:
        """A lease for events about to be spooled (:meth:`Spool.put_all`), for the lane :meth:`wake` would wake:
        an idle one, while the destination is not paused. Then :meth:`hand` what was leased. ``None`` when no
        lane waits for work: spool them, and :meth:`wake`. Always ``None`` for a lingering sender: its lanes read
        back what came while they waited, in one lease."""
        if self._linger:
            return None
        with self._lock:
            if (
                not self._idle
                or self._unclaimed_wake
                or self._sending_lanes >= self._open_lanes
                or self._stopping.is_set()
                or self._backoff.wait_seconds()
            ):
                return None
            return Handoff(self._idle[0].owner, self.lease_seconds, BATCH, one_run=len(self._lanes) > 1)

    def hand(self, handoff: Handoff, leased: list[SpooledEvent], asked: float) -> None:
        """Give the events the spool leased at ``handoff`` to its lane, which sends them before it leases anything
        (busy now, it does so next), or with none leased, :meth:`wake`. ``asked``: ``time.time()`` before the
        spool was asked, which the lease outlasts by its seconds."""
        with self._lock:
            if not leased:
                self._wake_one()
                return
            lane = self._by_owner[handoff.owner]
            lane.handed.append((leased, asked + handoff.seconds))
            if lane in self._idle:
                self._idle.remove(lane)
                lane.wake.set()

    def flush(self, timeout: float | None, *, past_refusals: bool = True) -> bool:
        """Wait until nothing is left for this destination. False when ``timeout`` seconds were not enough
        (the backend is down or slow), or the sender was halted: what is left stays in the spool. Without
        ``past_refusals``, also False as soon as the backend failed and the next try waits for its backoff
        (what is left is safe in the spool: nothing is gained by waiting for a backend that refuses)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:  # the lanes stop lingering while a flush waits
            self._hurrying += 1
            self._hurry.set()
        try:
            self.wake()
            with self._progress:
                while self.spool.pending(self.destination).count:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if self.halted_by is not None or (remaining is not None and remaining <= 0):
                        return False
                    if not past_refusals and self._backoff.failures and self._backoff.wait_seconds() > 0:
                        return False
                    wait = 0.5 if past_refusals else 0.05
                    self._progress.wait(min(remaining, wait) if remaining is not None else wait)
            return True
        finally:
            with self._lock:
                self._hurrying -= 1
                if not self._hurrying and not self._stopping.is_set():
                    self._hurry.clear()

    def close(self, timeout: float | None, *, past_refusals: bool = True) -> bool:
        """Flush within ``timeout``, then stop. Returns whether everything was delivered. The events this
        sender leased go back to the spool at once, except those still in the middle of their send: each stays
        leased until its request's timeout, so that no other sender (a replay, the next ``enable()``) sends a
        copy while the backend may still be taking it. Once this process has ended, a replay sends them at
        once (at least once). ``past_refusals``: see :meth:`flush`."""
        delivered = self.flush(timeout, past_refusals=past_refusals)
        self._stop()
        deadline = time.monotonic() + JOIN_SECONDS
        for lane in self._lanes:
            if lane.thread is not None:
                lane.thread.join(max(deadline - time.monotonic(), 0.0))
        for lane in self._lanes:
            with self._lock:
                lane.handed = []  # leased to the lane in the spool: given back with the rest
            with lane.lock:  # what the lane delivered is forgotten, what it sends stays leased, the rest goes back
                self._forget(lane)
                self.spool.release_owned(lane.owner, lane.in_flight)
        return delivered

    def after_stop(self, action: Callable[[], object]) -> None:
        """Run ``action`` once every lane has stopped (now, if they have): a send still under way at
        :meth:`close` may yet release or forget its event, so the spool is closed after it, not before."""
        with self._lock:
            if self._running_lanes:
                self._after_stop = action
                return
        action()

    def _stop(self) -> None:
        self._stopping.set()
        self._hurry.set()
        for lane in self._lanes:
            lane.wake.set()
        with self._progress:
            self._progress.notify_all()

    # --- the lanes -------------------------------------------------------------------------------------

    def _run(self, lane: Lane) -> None:
        if self._yield_cpu:
            yield_cpu_to_the_job()
        try:
            while not self._stopping.is_set():
                pause = self._backoff.wait_seconds()
                if pause:
                    self._give_back_handed(lane)
                    self._stopping.wait(pause)
                    continue
                with self._lock:
                    may_send = self._sending_lanes < self._open_lanes
                    self._sending_lanes += may_send
                    epoch = self._epoch
                found = False
                if may_send:
                    try:
                        found = self._lease_and_send(lane, epoch)
                    except Exception as error:  # noqa: BLE001 - the spool failed (locked, disk full): try later
                        found = True
                        self._failed(error, epoch)
                    finally:
                        with self._lock:
                            self._sending_lanes -= 1
                else:
                    self._give_back_handed(lane)
                if not found and self._wait_for_work(lane) and self._linger:
                    self._hurry.wait(self._linger)  # woken for new events: what comes meanwhile goes in one batch
        finally:
            if lane.own_transport:
                lane.transport.close()
            with self._lock:
                self._running_lanes -= 1
                action = self._after_stop if not self._running_lanes else None
            if action is not None:
                action()

    def _lease_and_send(self, lane: Lane, epoch: int) -> bool:
        """Lease a batch and send it. Whether to look for more at once: not when there was nothing to lease, nor
        after delivering a whole batch smaller than :data:`BATCH` when nothing else waited that nobody held (what
        came meanwhile left a :meth:`wake`); with several lanes, a batch is one run's events, and when other
        events wait, another lane is woken for them."""
        alone = len(self._lanes) == 1
        with self._lock:
            handed, lane.handed = lane.handed[:1], lane.handed[1:]
        if handed:  # leased as it was spooled: nothing of the destination was before it then
            batch, lane.leased_until = handed[0]
            more, lane.blocked = bool(lane.handed), False
        else:
            seconds = self.lease_seconds
            with costs.stage(Stage.LEASE):
                lane.leased_until = time.time() + seconds  # before the spool's clock reading: never later than it
                batch = self.spool.lease(self.destination, lane.owner, BATCH, seconds, one_run=not alone)
                more = bool(batch) and not alone and self.spool.waiting(self.destination)
                lane.blocked = not batch and self.spool.waiting(self.destination)
        if not batch:
            return False
        if more:
            with self._lock:
                self._wake_one()
        delivered = self._send(lane, batch, epoch)
        if delivered and not more and not alone:
            # What was spooled meanwhile may have waited behind this batch (an application run's end, which goes
            # after every earlier event): a lane woken for it then found nothing, so this one looks again.
            more = self.spool.waiting(self.destination)
        return more or not delivered or len(batch) >= BATCH

    def _send(self, lane: Lane, batch: list[SpooledEvent], epoch: int) -> bool:
        """Send a batch in order; whether all of it was delivered (not on a failed send, a stop, nor a lease another
        sender took over)."""
        try:
            with costs.stage(Stage.SEND):  # once a batch: entering a stage reads the thread's CPU clock twice
                return self._send_each(lane, batch, epoch)
        finally:
            lane.emit.batch_ended()
            self._forget_delivered(lane, later=True)

    def _send_each(self, lane: Lane, batch: list[SpooledEvent], epoch: int) -> bool:
        """:meth:`_send`'s loop over the batch."""
        for index, item in enumerate(batch):
            doublings = min(max(item.attempts, self._slow_backend_doublings), MAX_TIMEOUT_DOUBLINGS)
            if not self._begin_send(lane, batch[index:], doublings):  # what is still the lane's goes back
                self.spool.release([rest.id for rest in batch[index:]], lane.owner)
                return False
            error = self._send_one(lane, item, doublings)
            if error is not None:  # kept in the spool, tried again after a pause
                self._forget_delivered(lane)
                self.spool.release([rest.id for rest in batch[index:]], lane.owner, attempted=[item.id])
                self._failed(error, epoch)
                return False
            self._succeeded(epoch)
            if time.monotonic() - lane.delivered_since >= ACKNOWLEDGE_SECONDS:
                self._forget_delivered(lane)
        return True

    def _begin_send(self, lane: Lane, rest: list[SpooledEvent], doublings: int) -> bool:
        """Make the first of ``rest`` (what is left of the lane's batch) the lane's send in flight, with its timeout;
        ``False`` when it must not be sent: the sender stops, or the lane's lease ran out and another sender took
        some of ``rest`` (after a stall longer than the lease: a process stopped, a clock set forward).

        A send begins only while the lane's lease outlasts it by :data:`LEASE_SLACK_SECONDS`, and by half the
        lease at least: when less is left, the lane renews its lease on ``rest`` and on what it delivered and has
        not forgotten yet, in one transaction. So however long a batch takes (a slow backend, a loaded machine),
        no event of it is leased by another sender while this lane may still send it or has sent it without
        forgetting it yet; a batch that goes at the usual pace never renews."""
        send_seconds = None
        if isinstance(self._base_timeout, (int, float)):
            lane.transport.timeout = self._base_timeout * 2**doublings
            # The timeout bounds connecting and then waiting for the answer, each on its own.
            send_seconds = 2 * lane.transport.timeout + 1
        needed = max(self.lease_seconds / 2, (send_seconds or 0.0) + LEASE_SLACK_SECONDS)
        now = time.time()
        if lane.leased_until - now < needed:
            until = now + max(self.lease_seconds, needed)
            with lane.lock:
                held = self.spool.renew([*(event.id for event in rest), *lane.delivered], lane.owner, until)
            lane.leased_until = until
            if not held.issuperset(event.id for event in rest):
                return False
        with lane.lock:  # close() gives back what is not in flight under this lock: after that, nothing goes out
            if self._stopping.is_set():
                return False
            lane.in_flight = InFlight(rest[0].id, time.time() + (send_seconds or self.lease_seconds))
        return True

    def _send_one(self, lane: Lane, item: SpooledEvent, doublings: int) -> Exception | None:
        """Send one event (:meth:`_begin_send` made it the lane's send in flight): ``None`` once the backend took
        it (it is then the lane's, delivered, to be forgotten), else why not."""
        try:
            with logs.sending(self._errors, self.destination):
                lane.emit(item.payload)
        except Exception as error:  # noqa: BLE001 - the caller keeps it in the spool
            lane.in_flight = None
            if timed_out(error):
                with self._lock:
                    self._slow_backend_doublings = max(
                        self._slow_backend_doublings, min(doublings + 1, MAX_TIMEOUT_DOUBLINGS)
                    )
            return error
        # Delivered before it stops counting as in flight: a close() in between must not hand it back.
        with lane.lock:
            if not lane.delivered:
                lane.delivered_since = time.monotonic()
            lane.delivered.append(item.id)
            lane.in_flight = None
        return None

    def _forget_delivered(self, lane: Lane, *, later: bool = False) -> None:
        """Forget what the lane delivered, in one transaction, and tell :meth:`flush`. ``later`` (a batch that
        ended): in the spool's next write instead (the next events spooled or leased, most often: one transaction
        fewer an action), which comes within :data:`ACKNOWLEDGE_SECONDS` (:meth:`_wait_for_work`)."""
        with lane.lock:
            if not lane.delivered:
                return
            if later:
                self.spool.forget_later(lane.delivered)
                lane.delivered = []
            else:
                self._forget(lane)
        with self._progress:
            self._progress.notify_all()

    def _forget(self, lane: Lane) -> None:
        """Forget the events the lane delivered, and those left to be forgotten later (under ``lane.lock``). A
        spool that cannot record it keeps them in the lane's list, to be tried again (:class:`FailoverSpool`
        never fails so: it stops sending them)."""
        if lane.delivered or self.spool.forgetting:
            with costs.stage(Stage.ACKNOWLEDGE):
                self.spool.acknowledge_all(lane.delivered)
            lane.delivered = []

    def _forget_left(self) -> None:
        """Forget what was left to be forgotten in the spool's next write, when none came in time."""
        if self.spool.forgetting:
            try:
                with costs.stage(Stage.ACKNOWLEDGE):
                    self.spool.acknowledge_all(())
            except Exception:  # a plain Spool's disk: the next write tries again
                log.debug("spark_lineage: delivered events could not be forgotten yet", exc_info=True)

    def _give_back_handed(self, lane: Lane) -> None:
        """Give back the batches handed to the lane that it may not send now (the destination is paused, or other
        lanes send): the spool leases them again in their turn."""
        with self._lock:
            handed, lane.handed = lane.handed, []
        if handed:
            try:
                self.spool.release([event.id for batch, _ in handed for event in batch], lane.owner)
            except Exception:  # the leases run out in their time, and the events go then
                log.debug("spark_lineage: handed events could not be given back", exc_info=True)
                return
            # Nobody else knows they wait now: the lane that sends, or the next to find nothing, leases them (they
            # waited for the idle poll, up to 5 s, when a handoff met a lane that was not to send).
            with self._lock:
                self._wake_one()

    def _wait_for_work(self, lane: Lane) -> bool:
        """Wait for :meth:`wake`, :meth:`hand`, another lane's find, or the idle poll; at once if a wake went
        unclaimed (and the lane may send) or a batch was handed to the lane while it was busy. Whether it was woken
        (the idle poll's end is not a wake)."""
        with self._lock:
            if lane.handed:
                return True
            # Left for a lane that may send (the one sending, once done): one that may not would only look and
            # find nothing it may send.
            if self._unclaimed_wake and self._sending_lanes < self._open_lanes:
                self._unclaimed_wake = False
                return True
            lane.wake.clear()
            if self._stopping.is_set():
                return False
            self._idle.append(lane)
        # What was delivered and left to be forgotten goes with the next events spooled, or with this lane's next
        # lease: within ACKNOWLEDGE_SECONDS, long before its lease ends (another sender would send it again).
        # A lane that found events it could not take looks again as soon: whoever holds what is before them forgets
        # what it delivered within that time.
        soon = lane.blocked or self.spool.forgetting
        woken = lane.wake.wait(ACKNOWLEDGE_SECONDS if soon else IDLE_POLL_SECONDS)
        if not woken:
            self._forget_left()
        with self._lock:
            if lane in self._idle:
                self._idle.remove(lane)
        return woken

    def _wake_one(self) -> None:
        """Wake one idle lane that may send (under ``_lock``); with none idle, the next that finds nothing looks
        again. One at a time: a lane that finds work wakes the next, and one that finds none stops the chain."""
        if self._sending_lanes < self._open_lanes:
            for lane in self._idle:
                self._idle.remove(lane)
                lane.wake.set()
                return
        self._unclaimed_wake = True

    # --- outcomes --------------------------------------------------------------------------------------

    def _succeeded(self, epoch: int) -> None:
        """One more event delivered (:meth:`flush` hears of it once it is forgotten)."""
        with self._lock:
            self.sent += 1
            if epoch == self._epoch:  # not a send from before the last failure: the backend answers now
                self.problem = None
                self._backoff.succeeded()
                if self._open_lanes < len(self._lanes):
                    self._open_lanes = len(self._lanes)
                    self._wake_one()

    def _failed(self, error: BaseException, epoch: int) -> None:
        with self._lock:
            first = epoch == self._epoch
            if first:
                self._epoch += 1
                self._open_lanes = 1
                self.problem = problem(error)
        halt = self._stop_on is not None and self.halted_by is None and self._stop_on(error)
        if halt:
            self.halted_by = error
            self._stop()
        elif first:
            # One kind per destination and problem: a backend that is down is said once, not once per event or
            # lane; one that comes back and then fails differently (an HTTP 500 after connection refused) is
            # said again.
            self._errors.report(
                f"{UNDELIVERED_KIND}{self.destination}: {self.problem}",
                error,
                message=f"{self._waiting()}not delivered to {self.destination} ({self.problem}); " + kept(self.spool),
            )
        if first:
            with self._lock:
                # Once said: a flush that stops at a backend that refuses returns only then, so the failure is said
                # before what close() says of the events' fates, and with its details.
                self._backoff.failed()
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
