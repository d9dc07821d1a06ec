"""This process's spool: the one on disk while the disk takes events, one in memory when it cannot, and the fate
of every event this process spooled.

A spool that cannot be opened, written or read is lineage's problem, never the job's. :class:`FailoverSpool`
answers the sender and :class:`~spark_lineage.delivery.Delivery` as one :class:`~spark_lineage.delivery.spool.Spool`
does, over several stores, oldest first:

- **damaged** (a malformed file, a garbled header; found when it opens or when sqlite says so later): the file is
  moved aside (:func:`~spark_lineage.delivery.spool.set_aside`) and a fresh spool takes its place, so this job and
  later ones go on; ``spark-lineage replay --salvage`` delivers what can still be read from the file set aside;
- **full, read-only, gone**: events go on in a spool in memory (bounded by ``python.spool.maxBytes``), sent straight
  to the backend after what the disk still holds (a run's events stay in order), and lost if the process ends
  before the backend takes them. The event that ends an application run is kept all the same: it is sent from
  memory in its turn, and spooled on the disk in the room held back for it
  (:data:`~spark_lineage.delivery.spool.RESERVE_FILE`), where a replay finds it if the send fails.

Each of these is said once, at WARNING, with the spool's path, the cause and what it costs. Event ids carry the
store they are in (:data:`STORE_BITS`), so the sender hands them back as it got them.

:meth:`FailoverSpool.fates` says at the end what became of this process's events: delivered, spooled for a replay,
or lost, each lost one with its job and why.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from spark_lineage.delivery.payloads import Payload
from spark_lineage.delivery.spool import (
    DEFAULT_MAX_BYTES,
    DiskProblem,
    Dropped,
    Handoff,
    InFlight,
    Pending,
    Spool,
    SpooledEvent,
    Stored,
    StoredAll,
    disk_problem,
    set_aside,
)
from spark_lineage.worker import one_line

log = logging.getLogger("spark_lineage")

_said: set[str] = set()
"""The warnings this process gave already: each is given once, however many sessions meet the same disk."""
_said_lock = threading.Lock()

STORE_BITS = 8
"""An event id is its id in its store, shifted left by this many bits, plus the store's index."""
_MAX_STORES = 1 << STORE_BITS


class StoreKind(enum.Enum):
    DISK = "disk"
    MEMORY = "memory"


@dataclass
class _Store:
    spool: Spool
    kind: StoreKind
    readable: bool = True
    writable: bool = True


@dataclass(frozen=True)
class Lost:
    """An event of this process that was neither delivered nor spooled."""

    job: str
    reason: str


@dataclass(frozen=True)
class Fates:
    """What became of the events this process spooled, once the sender has stopped."""

    delivered: int = 0
    spooled: tuple[str, ...] = ()
    """The jobs of events kept on a disk, for a replay."""
    unsent: tuple[str, ...] = ()
    """The jobs of events that waited in memory and were never sent: lost, for a reason the caller knows."""
    lost: tuple[Lost, ...] = ()
    """Events lost for a reason of the spool's own (a full ``maxBytes``, a damaged file)."""

    @property
    def total(self) -> int:
        return self.delivered + len(self.spooled) + len(self.unsent) + len(self.lost)


@dataclass
class _Own:
    """The events of this process still in a store, by id, with their jobs; and what became of the others."""

    jobs: dict[int, str] = field(default_factory=dict)
    delivered: int = 0
    lost: list[Lost] = field(default_factory=list)


class FailoverSpool:
    """The spool of one process: on disk in ``directory`` when it can be, else in memory (``directory`` ``None``:
    ``python.spool.disabled=true``, said by ``memory_reason``). Thread-safe; never raises from a disk's trouble."""

    def __init__(
        self,
        directory: Path | None,
        max_bytes: int = DEFAULT_MAX_BYTES,
        *,
        label: str = "spark_lineage",
        memory_reason: str = "python.spool.disabled=true",
        setting: str = "spark.openlineage.python.spool.dir",
        replaying: bool = False,
    ) -> None:
        """``label`` starts the warnings; ``setting`` is what the user calls the directory setting; ``replaying``:
        only what the spool holds is sent (``spark-lineage replay``), nothing is spooled."""
        self.replaying = replaying
        self.directory = directory
        self.max_bytes = max_bytes
        self.label = label
        self.setting = setting
        self.problem: str | None = None if directory is not None else memory_reason
        """Why events are not kept on disk (``None`` while they are)."""
        self.set_aside: list[Path] = []
        """Damaged spool files this process moved aside."""
        self._stores: list[_Store] = []
        self._own = _Own()
        self._hidden: set[int] = set()
        """Disk events this process must not send: copies of events it sends from memory, and events it delivered
        but could not forget (a full disk)."""
        self._twins: dict[int, int] = {}
        """An application run's event sent from memory, and its copy in the disk's held-back room."""
        self._destinations: dict[str, str] = {}
        self._held: dict[int, tuple[str, float]] = {}
        """Leases kept in memory, on events of a disk too full to write leases on: id -> (owner, until)."""
        self._unforgotten: set[int] = set()
        """Delivered events a full disk would not let go of: tried again at close."""
        self._let_go: set[int] = set()
        """Events of such a disk given back while it could not record it (their lease there is stale)."""
        self._lock = threading.RLock()
        self._closed = False
        if directory is not None:
            self._open_disk(first=True)

    # --- what the delivery and the sender see, as of a Spool ----------------------------------------------

    @property
    def path(self) -> Path | None:
        """The directory events are spooled in now; ``None`` while they are kept in memory."""
        disk = self._writable_disk()
        return disk.spool.path if disk is not None else None

    @property
    def location(self) -> str:
        return str(self.path) if self.path is not None else "memory"

    def remember_destination(self, destination: str, transport: str) -> None:
        with self._lock:
            self._destinations[destination] = transport
            disk = self._writable_disk()
            if disk is not None:
                try:
                    disk.spool.remember_destination(destination, transport)
                except Exception as error:  # noqa: BLE001 - lineage's problem, not the job's
                    self._failed(disk, error, "written")

    def put(self, destination: str, run_id: str, job: str, application: bool, payload: str) -> Stored:
        """Spool one event (see :meth:`put_all`)."""
        stored = self.put_all(destination, [Payload(payload, run_id, job, application)])
        return Stored(stored.ids[0], stored.dropped)

    def put_all(self, destination: str, payloads: Sequence[Payload], handoff: Handoff | None = None) -> StoredAll:
        """Spool events in order, in one transaction: all on disk if they can be, else all in memory (and each
        application run's event also in the disk's held-back room): a disk that fails in the middle of them
        keeps none of them, and the store after it gets every one, so a run's events stay in order. Never
        raises for a disk's sake. ``handoff`` (see :meth:`Spool.put_all`) is asked of the store only while it is
        this process's one store and holds nothing this process must not send from it: otherwise what the other
        stores hold decides the order, and :meth:`lease` reads it."""
        with self._lock:
            if len(self._stores) > 1 or self._hidden or self._held or self._let_go or self.replaying:
                handoff = None
            for _ in range(2):  # once more on a fresh spool, when the first one was found damaged
                disk = self._writable_disk()
                if disk is None:
                    break
                if disk.spool.short_of_room:  # what the disk still has is for sending and forgetting
                    self._failed(disk, sqlite3.OperationalError("database or disk is full"), "written")
                    break
                try:
                    return self._owned(disk, disk.spool.put_all(destination, payloads, handoff), payloads)
                except Exception as error:  # noqa: BLE001
                    self._failed(disk, error, "written")
            if any(store.kind is StoreKind.DISK for store in self._stores):
                handoff = None  # a disk that failed just now may hold what goes first
            memory = self._memory()
            stored = self._owned(memory, memory.spool.put_all(destination, payloads, handoff), payloads)
            for event_id, payload in zip(stored.ids, payloads):
                if payload.application:
                    twin = self._into_reserve(destination, payload)
                    if twin is not None:
                        self._twins[event_id] = twin
                        self._hidden.add(twin)
            return stored

    def lease(
        self, destination: str, owner: str, limit: int, seconds: float, *, one_run: bool = False
    ) -> list[SpooledEvent]:
        """The oldest store's events first: a store's events are leased only once the stores before it hold
        none for ``destination`` (so a run that began on disk and went on in memory is sent in order). With
        ``one_run``, only one run's events (:meth:`Spool.lease`; a disk too full for leases gives one holder
        at a time whatever it reads)."""
        with self._lock:
            stores = list(enumerate(self._stores))
        for index, store in stores:
            if not store.readable or self._closed:
                continue
            hidden = self._hidden_in(index)
            try:
                if store.kind is StoreKind.DISK and not store.writable:
                    events = self._hold(index, store, destination, owner, limit, seconds, hidden)
                else:
                    events = store.spool.lease(destination, owner, limit, seconds, exclude=hidden, one_run=one_run)
                if events:
                    return [_with_id(event, _encode(event.id, index)) for event in events]
                if index == len(stores) - 1 or store.spool.pending(destination, exclude=hidden).count:
                    return []  # the last store, or one whose events must go before the next one's
            except Exception as error:  # noqa: BLE001
                full = disk_problem(error) is DiskProblem.FULL
                self._failed(store, error, "written" if full else "read")
                if full:
                    return []  # read it without leases from now on
        return []

    def _hold(
        self, index: int, store: _Store, destination: str, owner: str, limit: int, seconds: float, hidden: list[int]
    ) -> list[SpooledEvent]:
        """Lease events of a disk too full to write leases on, in memory: one holder at a time, so a run's
        events still go in order (other processes cannot spool on that disk either)."""
        now = time.time()
        with self._lock:
            holders = {
                holder
                for event_id, (holder, until) in self._held.items()
                if until >= now and _decode(event_id)[0] == index
            }
            if holders - {owner}:
                return []
            held = [_decode(event_id)[1] for event_id in self._held if _decode(event_id)[0] == index]
            let_go = [raw for store_index, raw in map(_decode, self._let_go) if store_index == index]
            events = store.spool.peek(destination, limit, exclude=[*hidden, *held], let_go=let_go)
            for event in events:
                self._held[_encode(event.id, index)] = (owner, now + seconds)
        return events

    def acknowledge(self, event_id: int) -> None:
        """The backend has it: forget it (see :meth:`acknowledge_all`)."""
        self.acknowledge_all([event_id])

    def acknowledge_all(self, event_ids: Sequence[int]) -> None:
        """The backend has them: forget them (in one transaction per store, with those :meth:`forget_later` left
        there), and count this process's as delivered. A disk that cannot record it still never sends them again
        from here; they are forgotten at :meth:`close`."""
        by_store = _by_store(event_ids)
        with self._lock:
            for index, kept in enumerate(self._stores):
                if kept.spool.forgetting and kept.writable:
                    by_store.setdefault(index, [])
        for index, raw_ids in by_store.items():
            store = self._store(index)
            if store is None or self._closed:
                continue
            for attempt in range(2):
                try:
                    store.spool.acknowledge_all(raw_ids)
                    break
                except Exception as error:  # noqa: BLE001
                    if attempt == 0 and disk_problem(error) is DiskProblem.FULL:
                        store.spool.make_room()  # forgetting an event frees room; its log needs a little first
                        continue
                    with self._lock:  # sent all the same: never send them again from here; forgotten at close
                        unforgotten = [_encode(raw, index) for raw in raw_ids]
                        self._hidden.update(unforgotten)
                        self._unforgotten.update(unforgotten)
                    self._failed(store, error, "written")
        self._delivered(event_ids)

    def forget_later(self, event_ids: Sequence[int]) -> None:
        """The backend has them, and their sender still holds them: count this process's as delivered, and let
        their store forget them in its next write (:meth:`Spool.forget_later`): the next events spooled, or
        the next lease. Those of a store that cannot be written now are forgotten at once
        (:meth:`acknowledge_all`, which tries and says what it could not)."""
        now: list[int] = []
        for index, raw_ids in _by_store(event_ids).items():
            store = self._store(index)
            if store is None or self._closed:
                continue
            if store.writable and store.readable:
                store.spool.forget_later(raw_ids)
            else:
                now.extend(_encode(raw, index) for raw in raw_ids)
        if now:
            self.acknowledge_all(now)
            gone = set(now)
            event_ids = [event_id for event_id in event_ids if event_id not in gone]
        self._delivered(event_ids)

    @property
    def forgetting(self) -> bool:
        """Whether delivered events wait in a store that can be written to be forgotten (:meth:`forget_later`)."""
        with self._lock:
            return any(store.spool.forgetting for store in self._stores if store.writable and store.readable)

    def _delivered(self, event_ids: Sequence[int]) -> None:
        """Count this process's events of ``event_ids`` as delivered, and forget the twins of those that have one."""
        twins = []
        with self._lock:
            for event_id in event_ids:
                self._held.pop(event_id, None)
                if self._own.jobs.pop(event_id, None) is not None:
                    self._own.delivered += 1
                twin = self._twins.pop(event_id, None)
                if twin is not None:
                    twins.append(twin)
        if twins:
            self.acknowledge_all(twins)

    def release(self, event_ids: Sequence[int], owner: str, *, attempted: Sequence[int] = ()) -> None:
        with self._lock:
            for event_id in event_ids:
                if self._held.get(event_id, ("", 0.0))[0] == owner:
                    del self._held[event_id]
        for index, raw_ids in _by_store(event_ids).items():
            store = self._store(index)
            if store is None or not store.readable or self._closed:
                continue
            if not store.writable:  # a full disk: its lease cannot be given back there
                with self._lock:
                    self._let_go.update(_encode(raw, index) for raw in raw_ids)
                continue
            tried = [raw for store_index, raw in map(_decode, attempted) if store_index == index]
            try:
                store.spool.release(raw_ids, owner, attempted=tried)
            except Exception as error:  # noqa: BLE001 - the lease runs out by itself
                self._failed(store, error, "written")

    def renew(self, event_ids: Sequence[int], owner: str, until: float) -> set[int]:
        """The events of ``event_ids`` ``owner`` still holds, now held until ``until`` (:meth:`Spool.renew`): on
        a disk too full to write leases on, those it holds in memory. Where the lease cannot be renewed (the
        store fails), the events are not said to be held: a sender does not send them."""
        held: set[int] = set()
        for index, raw_ids in _by_store(event_ids).items():
            store = self._store(index)
            if store is None or not store.readable or self._closed:
                continue
            if store.kind is StoreKind.DISK and not store.writable:  # its leases are kept here, in memory
                with self._lock:
                    for event_id in (_encode(raw, index) for raw in raw_ids):
                        if self._held.get(event_id, ("", 0.0))[0] == owner:
                            self._held[event_id] = (owner, until)
                            held.add(event_id)
                continue
            try:
                held.update(_encode(raw, index) for raw in store.spool.renew(raw_ids, owner, until))
            except Exception as error:  # noqa: BLE001 - lineage's problem, not the job's
                self._failed(store, error, "written")
        return held

    def release_owned(self, owner: str, in_flight: InFlight | None = None) -> None:
        with self._lock:
            stores = list(enumerate(self._stores))
            kept = in_flight.event_id if in_flight is not None else None
            for event_id, (holder, _) in list(self._held.items()):
                if holder == owner and event_id != kept:
                    del self._held[event_id]
        for index, store in stores:
            if not store.readable or self._closed:
                continue
            mine = None
            if in_flight is not None and _decode(in_flight.event_id)[0] == index:
                mine = InFlight(_decode(in_flight.event_id)[1], in_flight.until)
            if not store.writable:  # a full disk: its leases cannot be given back there
                with contextlib.suppress(Exception):
                    kept_raw = mine.event_id if mine is not None else None
                    held = [_encode(raw, index) for raw in store.spool.held_by(owner) if raw != kept_raw]
                    with self._lock:
                        self._let_go.update(held)
                continue
            try:
                store.spool.release_owned(owner, mine)
            except Exception as error:  # noqa: BLE001 - the leases end with this process
                self._failed(store, error, "written")

    def waiting(self, destination: str) -> bool:
        """Whether an event for ``destination`` waits in a store that nobody holds (:meth:`Spool.waiting`); yes
        when a store cannot say (a disk too full for leases keeps them in memory; a store that fails)."""
        with self._lock:
            stores = list(enumerate(self._stores))
        for index, store in stores:
            if not store.readable or self._closed:
                continue
            if store.kind is StoreKind.DISK and not store.writable:
                return True
            try:
                if store.spool.waiting(destination, exclude=self._hidden_in(index)):
                    return True
            except Exception:  # noqa: BLE001 - the next lease finds out what is wrong with it
                return True
        return False

    def pending(self, destination: str | None = None) -> Pending:
        """What waits to be sent from this process's stores (not the copies it must not send)."""
        count, size, jobs = 0, 0, set[str]()
        with self._lock:
            stores = list(enumerate(self._stores))
        for index, store in stores:
            if not store.readable or self._closed:
                continue
            try:
                part = store.spool.pending(destination, exclude=self._hidden_in(index))
            except Exception as error:  # noqa: BLE001
                self._failed(store, error, "read")
                continue
            count, size = count + part.count, size + part.bytes
            jobs.update(part.jobs)
        return Pending(count, tuple(sorted(jobs)), size)

    def pending_in_memory(self, destination: str | None = None) -> int:
        """How many of the events waiting to be sent are held in memory only (the disk failed, or the spool is
        off): those are lost if the process ends before they are sent."""
        with self._lock:
            stores = [store for store in self._stores if store.kind is StoreKind.MEMORY and store.readable]
        count = 0
        for store in stores:
            with contextlib.suppress(Exception):  # counted as held in memory: waited for, to be safe
                count += store.spool.pending(destination).count
        return count

    def destinations(self) -> dict[str, str | None]:
        """Every destination with events waiting on a disk that can be read, and the settings kept for it."""
        found: dict[str, str | None] = {}
        with self._lock:
            stores = [store for store in self._stores if store.kind is StoreKind.DISK and store.readable]
        for store in stores:
            try:
                for destination, kept in store.spool.destinations().items():
                    found[destination] = found.get(destination) or kept
            except Exception as error:  # noqa: BLE001
                self._failed(store, error, "read")
        return found

    def lost(self, job: str, reason: str) -> None:
        """An event of this process that never reached a store: counted with the others at the end."""
        with self._lock:
            self._own.lost.append(Lost(job, reason))

    def fates(self) -> Fates:
        """What became of this process's events so far: call it once the sender has stopped. An event of its own
        that another sender of its spool file took (another session's delivery in this process, whose lanes lease
        whatever waits for their destination) is gone from the file: delivered."""
        with self._lock:
            gone = self._taken_by_others()
            spooled, unsent = [], []
            for event_id, job in self._own.jobs.items():
                if event_id in gone:
                    continue
                index, _ = _decode(event_id)
                store = self._stores[index]
                twin = self._twins.get(event_id)
                on_disk = store.kind is StoreKind.DISK and store.readable
                if on_disk or (twin is not None and self._stores[_decode(twin)[0]].readable):
                    spooled.append(job)
                else:
                    unsent.append(job)
            delivered = self._own.delivered + len(gone)
            return Fates(delivered, tuple(spooled), tuple(unsent), tuple(self._own.lost))

    def _taken_by_others(self) -> set[int]:
        """This process's events that are no longer in their disk store, nor held back as twins (under ``_lock``)."""
        by_store: dict[int, list[int]] = {}
        for event_id in self._own.jobs:
            index, raw = _decode(event_id)
            if self._stores[index].kind is StoreKind.DISK and event_id not in self._twins:
                by_store.setdefault(index, []).append(raw)
        gone: set[int] = set()
        for index, raws in by_store.items():
            store = self._stores[index]
            if not store.readable:
                continue
            try:
                here = store.spool.still_here(raws)
            except Exception:  # noqa: BLE001 - a disk that cannot be read says nothing: the events count as spooled
                continue
            gone.update(_encode(raw, index) for raw in raws if raw not in here)
        return gone

    def close(self) -> None:
        """Forget, once more, the delivered events a full disk would not let go of (nothing else writes now), then
        close every store (a disk's write-ahead log goes into its main file first). Later calls do nothing."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for event_id in sorted(self._unforgotten):
                index, raw = _decode(event_id)
                with contextlib.suppress(Exception):
                    self._stores[index].spool.make_room()
                    self._stores[index].spool.acknowledge(raw)
            for store in self._stores:
                store.spool.close()

    # --- the stores ----------------------------------------------------------------------------------------

    def _open_disk(self, first: bool = False) -> None:
        """Open the spool in :attr:`directory`, setting a damaged one aside; in memory if it cannot be had."""
        assert self.directory is not None
        if len(self._stores) >= _MAX_STORES - 1:
            self._use_memory("too many spool files were found damaged in this process")
            return
        for attempt in range(2):
            try:
                spool = Spool(self.directory, self.max_bytes)
            except Exception as error:  # noqa: BLE001 - lineage's problem, not the job's
                if disk_problem(error) is DiskProblem.DAMAGED and attempt == 0:
                    self._set_aside(error)
                    continue
                self._use_memory(f"the spool cannot be opened in {self.directory} ({one_line(error)})", first)
                return
            self._stores.append(_Store(spool, StoreKind.DISK))
            for destination, transport in self._destinations.items():
                spool.remember_destination(destination, transport)
            return

    def _set_aside(self, error: BaseException) -> None:
        assert self.directory is not None
        try:
            aside = set_aside(self.directory)
        except OSError as move_error:
            self._use_memory(
                f"the spool file in {self.directory} is damaged ({one_line(error)}) and cannot be moved aside "
                f"({one_line(move_error)})"
            )
            return
        self.set_aside.append(aside)
        _warn_once(
            f"{self.label}: the lineage spool in {self.directory} was damaged ({one_line(error)}): moved it to "
            f"{aside} and started a new one; deliver what can still be read from it with: spark-lineage replay "
            f"--salvage {aside}"
        )

    def _failed(self, store: _Store, error: BaseException, doing: str) -> None:
        """``store`` could not be ``doing`` (read, written): set it aside when damaged, else stop writing to it
        (and stop reading it too, when reading is what failed)."""
        if self._closed:
            return
        problem = disk_problem(error)
        with self._lock:
            if store.kind is StoreKind.MEMORY or not (store.readable or store.writable):
                log.debug("%s: the in-memory spool failed", self.label, exc_info=error)
                return
            if problem is DiskProblem.DAMAGED:
                store.readable = store.writable = False
                index = self._stores.index(store)
                newest = self._newest_disk() is store
                with contextlib.suppress(Exception):
                    store.spool.close()
                if not newest:  # its file was moved aside already: the directory now holds another one
                    return
                self._set_aside(error)
                reason = (
                    f"the spool file was damaged ({one_line(error)}); what can still be read is delivered by: "
                    f"spark-lineage replay --salvage {self.set_aside[-1]}"
                    if self.set_aside
                    else f"the spool file was damaged ({one_line(error)})"
                )
                for event_id in [event_id for event_id in self._own.jobs if _decode(event_id)[0] == index]:
                    self._own.lost.append(Lost(self._own.jobs.pop(event_id), reason))
                self._open_disk()
                return
            if doing == "read":
                store.readable = False
            if problem is DiskProblem.FULL:
                # What it holds must still be sent and forgotten, which writes a little: let the log be emptied.
                store.spool.make_room()
            if store.writable:
                store.writable = False
                self._use_memory(f"the spool in {store.spool.path} cannot be {doing} ({one_line(error)})")

    def _use_memory(self, why: str, first: bool = False) -> None:
        if self.replaying:
            if self.problem is None:
                self.problem = why
                _warn_once(
                    f"{self.label}: {why}: its events are sent all the same, without marking them taken on the disk; "
                    "free some room there, so that jobs can spool again"
                )
            return
        if self.problem is None or first:
            self.problem = why
            readable_disk = any(s.kind is StoreKind.DISK and s.readable for s in self._stores)
            kept = (
                "; the events that end application runs are still kept on that disk, in room held back for them"
                if readable_disk
                else ""
            )
            _warn_once(
                f"{self.label}: {why}: events go straight to the backend from memory instead (at most "
                f"python.spool.maxBytes={self.max_bytes} bytes), and those it has not taken when the process ends "
                f"are lost{kept}. Name a writable directory with {self.setting}"
            )
        self._memory()

    def _memory(self) -> _Store:
        with self._lock:
            for store in self._stores:
                if store.kind is StoreKind.MEMORY:
                    return store
            store = _Store(Spool(None, self.max_bytes), StoreKind.MEMORY)
            self._stores.append(store)
            return store

    def _newest_disk(self) -> _Store | None:
        with self._lock:
            return next((store for store in reversed(self._stores) if store.kind is StoreKind.DISK), None)

    def _writable_disk(self) -> _Store | None:
        with self._lock:
            for store in reversed(self._stores):
                if store.kind is StoreKind.DISK and store.writable:
                    return store
                if store.kind is StoreKind.MEMORY:
                    return None  # once in memory, a run's later events must not jump ahead of it on disk
        return None

    def _into_reserve(self, destination: str, payload: Payload) -> int | None:
        """Spool an application run's event on the newest disk that can still be read, in the room held back
        there when the disk is full: the id of that copy, or ``None``."""
        with self._lock:
            disks = [(i, s) for i, s in enumerate(self._stores) if s.kind is StoreKind.DISK and s.readable]
        if not disks:
            return None
        index, store = disks[-1]
        for _ in range(2):
            try:
                return _encode(store.spool.put_all(destination, [payload]).ids[0], index)
            except Exception as error:
                if disk_problem(error) is not DiskProblem.FULL or not store.spool.release_reserve():
                    log.debug("%s: an application event could not be kept on disk", self.label, exc_info=error)
                    return None
        return None

    def _owned(self, store: _Store, stored: StoredAll, payloads: Sequence[Payload]) -> StoredAll:
        """``stored`` with the ids of this process's stores; its events are this process's own, and the ones that
        made room for them (some of them, perhaps) are lost."""
        index = self._stores.index(store)
        ids = [_encode(raw, index) for raw in stored.ids]
        dropped = Dropped(stored.dropped.count, stored.dropped.jobs, [_encode(i, index) for i in stored.dropped.ids])
        for event_id, payload in zip(ids, payloads):
            self._own.jobs[event_id] = payload.job
        for gone in dropped.ids:
            lost_job = self._own.jobs.pop(gone, None)
            if lost_job is not None:
                self._own.lost.append(Lost(lost_job, f"the spool was full (python.spool.maxBytes={self.max_bytes})"))
        return StoredAll(ids, dropped, [_with_id(event, _encode(event.id, index)) for event in stored.leased])

    def _store(self, index: int) -> _Store | None:
        with self._lock:
            return self._stores[index] if index < len(self._stores) else None

    def _hidden_in(self, index: int) -> list[int]:
        """The ids, in store ``index``, of the events this process must not send from there."""
        with self._lock:
            return [raw for store_index, raw in map(_decode, self._hidden) if store_index == index]


def _warn_once(message: str) -> None:
    with _said_lock:
        if message in _said:
            return
        _said.add(message)
    log.warning("%s", message)


def _encode(raw: int, index: int) -> int:
    return (raw << STORE_BITS) | index


def _decode(event_id: int) -> tuple[int, int]:
    """``(store index, id in that store)``."""
    return event_id & (_MAX_STORES - 1), event_id >> STORE_BITS


def _by_store(event_ids: Sequence[int]) -> dict[int, list[int]]:
    grouped: dict[int, list[int]] = {}
    for index, raw in map(_decode, event_ids):
        grouped.setdefault(index, []).append(raw)
    return grouped


def _with_id(event: SpooledEvent, event_id: int) -> SpooledEvent:
    # Not dataclasses.replace, which looks at every field anew: 10 µs an event, on every event sent.
    return SpooledEvent(
        event_id,
        event.destination,
        event.run_id,
        event.job,
        event.application,
        event.payload,
        event.created,
        event.attempts,
    )
