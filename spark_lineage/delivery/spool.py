"""The durable spool: every event is stored here before it is sent, and removed once the backend has
acknowledged it, so that a backend that is down, slow or refusing costs the job nothing and loses nothing a
replay cannot deliver.

It is one sqlite database (Python's ``sqlite3``) in write-ahead-log mode, shared safely by every thread and
process that opens it: senders lease the events they are about to send, so two senders never send the same
event at once. A lease ends when its time runs out (unless its holder renewed it first, :meth:`Spool.renew`), or
as soon as the process that holds it is found to have ended (on this host), so a replay right after a process
died does not wait for it. Its size is bounded: when full, the oldest query-run events go first; application-run
events, which say how a whole job ended, are kept.

What the disk can do to it is handled here too, so that a damaged or full disk is lineage's problem, not the
job's:

- the write-ahead log is checkpointed into the main file often while the spool runs (every
  :data:`CHECKPOINT_PAGES` pages) and wholly when it closes, so after a clean exit the main file holds everything,
  and a log damaged afterwards costs nothing (and one damaged while a process ran costs only what was not yet
  checkpointed);
- a damaged file is found when the spool opens (``PRAGMA quick_check``, for files up to
  :data:`QUICK_CHECK_MAX_BYTES`) or when sqlite reports it later; :func:`set_aside` moves it, with its log, out of
  the way under a timestamped name, for ``spark-lineage replay --salvage`` (:mod:`~spark_lineage.delivery.salvage`);
- :data:`RESERVE_FILE` holds :data:`RESERVE_BYTES` of the disk back, so that the event that ends an application run
  can still be spooled once the disk is full (:meth:`Spool.release_reserve`).

:mod:`~spark_lineage.delivery.failover` decides what to do when the disk fails: this module only says so, with
:func:`disk_problem`.
"""

from __future__ import annotations

import contextlib
import datetime
import enum
import functools
import json
import os
import shutil
import socket
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from spark_lineage.delivery import journal
from spark_lineage.delivery.payloads import Payload
from spark_lineage.errors import SpoolDamagedError

DEFAULT_MAX_BYTES = 256 * 1024 * 1024
SPOOL_FILE = "spool.sqlite"
SPOOL_DIR_ENV = "SPARK_LINEAGE_SPOOL_DIR"
SIDE_FILES = ("-wal", "-shm")
"""sqlite's write-ahead log and its index, next to the spool file: they move with it."""
RESERVE_FILE = "spool.reserve"
RESERVE_BYTES = 2 * 1024 * 1024
"""Room held back on the spool's disk for a checkpoint and the events that end application runs: twice the most
a checkpoint can need (:data:`CHECKPOINT_PAGES`)."""
CHECKPOINT_PAGES = 256
"""The write-ahead log is copied into the main file whenever it holds this many pages (1 MiB; sqlite's default
is 1000). A checkpoint syncs the log and the main file to the disk, which is most of a commit's cost: at 32
pages (a query's events fill about 25 pages, leased and forgotten) the spool's CPU was half as much again, more
on a disk that Spark's tasks keep busy. Kept well under :data:`RESERVE_BYTES`: on a full disk, the room held
back must be enough for the main file to take in what the log holds (the pages new since the last
checkpoint), or the log can never be emptied and nothing more can be written, not even to forget a delivered
event."""
QUICK_CHECK_MAX_BYTES = 64 * 1024 * 1024
"""Spool files up to this size are checked when they open (a few milliseconds for a spool that is nearly empty, as
a spool usually is); larger ones are checked by use."""
DAMAGED_SUFFIX = ".damaged-"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    destination TEXT NOT NULL,
    run_id TEXT NOT NULL,
    job TEXT NOT NULL,
    application INTEGER NOT NULL,
    payload TEXT NOT NULL,
    size INTEGER NOT NULL,
    created REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    -- Unused since leases have a table of their own; kept so that an older spark-lineage can open the file.
    leased_by TEXT,
    leased_until REAL
);
CREATE INDEX IF NOT EXISTS events_by_destination ON events (destination, id);
CREATE INDEX IF NOT EXISTS events_by_run ON events (run_id, id);
-- Which sender holds which event, until when: apart from the events, so that taking, renewing and giving back
-- a lease writes a row of a few bytes (sqlite rewrites a whole row to change one of its columns, and an event is
-- 5 to 7 KB: leasing in the events' own rows was two thirds of a lease's CPU). A row whose time has run out is
-- a lease no more; it goes when the event is leased again, given back or forgotten.
CREATE TABLE IF NOT EXISTS leases (
    id INTEGER PRIMARY KEY,
    leased_by TEXT NOT NULL,
    leased_until REAL NOT NULL
);
-- Each lease first looks for holders whose process has ended.
CREATE INDEX IF NOT EXISTS leases_by_holder ON leases (leased_by, leased_until);
-- Only the application-run events, the barriers every lease must respect (see Spool.lease): finding the next
-- one reads a handful of rows, not the whole backlog of a destination.
CREATE INDEX IF NOT EXISTS events_barriers ON events (destination, id) WHERE application = 1;
CREATE TABLE IF NOT EXISTS destinations (
    destination TEXT PRIMARY KEY,
    transport TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS totals (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
INSERT OR IGNORE INTO totals VALUES ('bytes', 0);
"""

LEASE_HOLDERS = "SELECT DISTINCT leased_by FROM leases WHERE leased_until >= ?"
"""Who holds events at a time given: the query ``leases_by_holder`` serves."""

Row = tuple[Any, ...]
"""An event as :data:`COLUMNS` reads it."""
COLUMNS = "SELECT e.id, e.destination, e.run_id, e.job, e.application, e.payload, e.created, e.attempts"
"""An event's columns; every query of the events calls them ``e``."""
ADD_BYTES = "UPDATE totals SET value = value + ? WHERE name = 'bytes'"
"""Count bytes in (or out, negative) of the spool's total."""
LEASE_ROWS = "INSERT OR REPLACE INTO leases (id, leased_by, leased_until) SELECT value, ?, ? FROM json_each(?)"
"""Lease the events a JSON array names to a holder until a time (:meth:`Spool.lease`, and a handoff)."""
LEASE_FREE = "NOT EXISTS (SELECT 1 FROM leases l WHERE l.id = e.id AND l.leased_until >= ?)"
"""Nobody holds the event ``e`` at a time given."""
NEXT_BARRIER = "SELECT MIN(id) FROM events e WHERE destination = ? AND application = 1 AND id > ?"
"""The first application-run event after an id: the query ``events_barriers`` serves."""
FREE = (
    f"{COLUMNS} FROM events e WHERE destination = ? AND id > ? AND id < ? AND {LEASE_FREE} "
    "AND NOT EXISTS (SELECT 1 FROM leases l JOIN events f ON f.id = l.id "
    "WHERE f.run_id = e.run_id AND l.id < e.id AND l.leased_until >= ?)"
)
"""Events between two ids that nobody holds and whose run has no earlier event somebody holds."""


class DiskProblem(enum.Enum):
    """What sqlite or the operating system said went wrong with the spool's files."""

    DAMAGED = "damaged"
    """The file is not a database, or a damaged one (``SQLITE_CORRUPT``, ``SQLITE_NOTADB``)."""
    FULL = "full"
    """No room left on the disk (``SQLITE_FULL``, ``ENOSPC``, ``EDQUOT``)."""
    UNUSABLE = "unusable"
    """Anything else: read-only, missing, locked, not permitted."""


_SQLITE_CORRUPT, _SQLITE_FULL, _SQLITE_NOTADB = 11, 13, 26


def disk_problem(error: BaseException) -> DiskProblem:
    """What kind of disk trouble ``error`` (from sqlite3 or the OS) is."""
    code = getattr(error, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    text = str(error).lower()
    if primary in (_SQLITE_CORRUPT, _SQLITE_NOTADB) or "malformed" in text or "not a database" in text:
        return DiskProblem.DAMAGED
    if primary == _SQLITE_FULL or "disk is full" in text or getattr(error, "errno", None) in (28, 122):
        return DiskProblem.FULL
    return DiskProblem.UNUSABLE


def set_aside(directory: Path, clock: float | None = None) -> Path:
    """Move a damaged spool file (and its log) aside, under a name with the time (UTC), and return where it went;
    the next :class:`Spool` of ``directory`` starts afresh."""
    stamp = datetime.datetime.fromtimestamp(time.time() if clock is None else clock, datetime.timezone.utc)
    base = directory / f"{SPOOL_FILE}{DAMAGED_SUFFIX}{stamp.strftime('%Y%m%dT%H%M%S.%fZ')}"
    source = directory / SPOOL_FILE
    if source.exists():
        os.replace(source, base)
    for side in SIDE_FILES:
        with contextlib.suppress(FileNotFoundError):
            if side == "-wal":
                os.replace(directory / (SPOOL_FILE + side), Path(f"{base}{side}"))
            else:  # the log's index is rebuilt from the log: a stale one must not describe the fresh file
                os.remove(directory / (SPOOL_FILE + side))
    return base


_Method = TypeVar("_Method", bound=Callable[..., Any])


def _reclaiming(*, reserve: bool) -> Callable[[_Method], _Method]:
    """A write that fails for a full disk is tried once more after :meth:`Spool.make_room`: a write-ahead log that
    could not be checkpointed grows until the disk is full, and emptying it is often all the room a write needs.
    ``reserve``: the write may use the room held back (sending and forgetting events may; spooling new ones may
    not, or a full disk would take that room from the events that end application runs)."""

    def reclaiming(method: _Method) -> _Method:
        @functools.wraps(method)
        def write(self: Spool, *args: Any, **kwargs: Any) -> Any:
            try:
                return method(self, *args, **kwargs)
            except sqlite3.OperationalError as error:
                if self.path is None or disk_problem(error) is not DiskProblem.FULL:
                    raise
                self.make_room(reserve=reserve)
                return method(self, *args, **kwargs)

        return write  # type: ignore[return-value]

    return reclaiming


def default_spool_dir() -> Path:
    """``$SPARK_LINEAGE_SPOOL_DIR``, else ``spark-lineage/spool`` under the user's state directory
    (``$XDG_STATE_HOME``, ``~/.local/state`` on Linux; ``~/Library/Application Support`` on macOS;
    ``%LOCALAPPDATA%`` on Windows)."""
    configured = os.environ.get(SPOOL_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    if os.name == "nt":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif os.uname().sysname == "Darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return base / "spark-lineage" / "spool"


def lease_owner(tag: object) -> str:
    """Who holds a lease: this host, this process, and ``tag`` (one sender) within it."""
    return f"{socket.gethostname()}:{os.getpid()}:{tag}"


def _owner_ended(owner: str) -> bool:
    """Whether the process holding a lease is known to have ended: only for a process on this host, and only
    where asking costs nothing and harms nothing (POSIX; on Windows, ``os.kill`` would end the process)."""
    parts = owner.rsplit(":", 2)
    if len(parts) != 3 or parts[0] != socket.gethostname() or not parts[1].isdigit() or os.name == "nt":
        return False
    pid = int(parts[1])
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # PermissionError: alive, another user's
        return False
    return False


@dataclass(frozen=True)
class InFlight:
    """An event a sender is sending right now, and until when that send can go on (its request's timeout)."""

    event_id: int
    until: float
    """``time.time()`` at which the send has surely ended."""


@dataclass(frozen=True)
class SpooledEvent:
    """An event as the spool keeps it."""

    id: int
    destination: str
    run_id: str
    job: str
    application: bool
    payload: str
    created: float
    attempts: int


@dataclass
class Dropped:
    """Query-run events a full spool let go of, to be logged."""

    count: int = 0
    jobs: set[str] = field(default_factory=set)
    ids: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Stored:
    """What :meth:`Spool.put` did: the new event's id, and what made room for it."""

    id: int
    dropped: Dropped = field(default_factory=Dropped)


@dataclass(frozen=True)
class Handoff:
    """A lease :meth:`Spool.put_all` is asked to take on the events it stores, for the sender about to send them,
    in the same transaction: so a sender that keeps up with its events never reads them back (a lease of its
    own reads every event it takes, and was a transaction of its own a query)."""

    owner: str
    seconds: float
    limit: int
    """The most events the lease may take (a sender's batch)."""
    one_run: bool = False
    """Only events of one run, as :meth:`Spool.lease` takes them with ``one_run``."""


@dataclass(frozen=True)
class StoredAll:
    """What :meth:`Spool.put_all` did: the new events' ids, in order, what made room for them (some of them,
    when they alone are more than the spool holds), and the events its :class:`Handoff` leased (all of them, or
    none)."""

    ids: list[int]
    dropped: Dropped = field(default_factory=Dropped)
    leased: list[SpooledEvent] = field(default_factory=list)


@dataclass(frozen=True)
class Pending:
    """What waits in the spool."""

    count: int
    jobs: tuple[str, ...]
    bytes: int


class Spool:
    """One spool database; thread-safe, and safe to share between processes.

    ``path`` ``None`` keeps the spool in memory (``spool.disabled``): the same bounded store and sending,
    without surviving the process.
    """

    def __init__(self, path: Path | None, max_bytes: int = DEFAULT_MAX_BYTES, *, check: bool = True) -> None:
        """Open (or make) the spool in directory ``path``. Raises :class:`SpoolDamagedError` when the file fails
        its check (``check``: see :data:`QUICK_CHECK_MAX_BYTES`), and ``OSError`` or ``sqlite3.Error`` when it
        cannot be opened: :func:`spark_lineage.delivery.open_spool` turns either into lineage's problem."""
        self.path = path
        self.max_bytes = max_bytes
        self.short_of_room = path is not None
        """The room held back is not held (its disk was too full for it, or it was given to the spool): new
        events must not go on that disk, or sending and forgetting the ones there could no longer be written."""
        self._lock = threading.Lock()
        self._later = _Forgettable()
        """Delivered events to forget in the next transaction that writes (:meth:`forget_later`): shared with
        every spool of this process on the same file, once it is open."""
        self._freed = 0
        """The bytes the transaction under way forgot and has not yet taken off the total."""
        if path is not None:
            path.mkdir(parents=True, exist_ok=True)
            database = str(path / SPOOL_FILE)
        else:
            database = ":memory:"
        # Autocommit mode: every transaction is an explicit BEGIN IMMEDIATE ... COMMIT below.
        self._db = sqlite3.connect(database, timeout=30, isolation_level=None, check_same_thread=False)
        try:
            with self._lock:
                self._db.execute("PRAGMA busy_timeout = 30000")
                if path is not None:
                    if check:
                        self._check(path / SPOOL_FILE)
                    self._db.execute("PRAGMA journal_mode = WAL")
                    # Durable against the process dying at any point (not against the machine losing power
                    # before a checkpoint), at a fraction of the cost of a sync per event.
                    self._db.execute("PRAGMA synchronous = NORMAL")
                    self._db.execute(f"PRAGMA wal_autocheckpoint = {CHECKPOINT_PAGES}")
                    # Debian's sqlite overwrites everything deleted with zeros (SECURE_DELETE): every event
                    # forgotten after its send would be written once more, page by page (a third of a spool's
                    # CPU, in the commits). FAST zeroes what it can without writing more; events hold no secret
                    # (they are redacted before they are spooled).
                    self._db.execute("PRAGMA secure_delete = FAST")
                self._db.executescript(_SCHEMA)
                if path is not None:
                    self._later = _forgettable(path / SPOOL_FILE)
        except BaseException:
            self._db.close()
            raise
        if path is not None:
            self._hold_reserve(path / RESERVE_FILE)
            # What a process killed outright kept in memory, in its journal (see spark_lineage.delivery.journal).
            journal.recover(path, self.put_all)

    def _check(self, file: Path) -> None:
        """Raise :class:`SpoolDamagedError` unless a spool file small enough to check quickly passes
        ``PRAGMA quick_check`` (a damaged page or header fails it)."""
        try:
            size = file.stat().st_size + _size(Path(f"{file}-wal"))
        except FileNotFoundError:
            return
        if size == 0 or size > QUICK_CHECK_MAX_BYTES:
            return
        try:
            result = [row[0] for row in self._db.execute("PRAGMA quick_check").fetchall()]
        except sqlite3.DatabaseError as error:
            if disk_problem(error) is DiskProblem.DAMAGED:
                raise SpoolDamagedError(str(error)) from error
            raise
        if result != ["ok"]:
            found = [str(line) for line in result if not str(line).startswith("***")][:1]
            raise SpoolDamagedError(f"sqlite's quick_check failed: {found[0] if found else 'damaged'}")

    def _hold_reserve(self, file: Path) -> None:
        """Hold :data:`RESERVE_BYTES` of the disk back, in a file of real blocks (not a sparse one); on a disk
        already too full for it, hold nothing (:attr:`short_of_room` says so)."""
        try:
            if not (file.is_file() and file.stat().st_size >= RESERVE_BYTES):
                with file.open("wb") as reserve:
                    reserve.write(bytes(RESERVE_BYTES))
                    reserve.flush()
                    os.fsync(reserve.fileno())
            self.short_of_room = False
        except OSError:
            with contextlib.suppress(OSError):
                file.unlink()

    def make_room(self, reserve: bool = True) -> None:
        """On a full disk: give the room held back to the write-ahead log's checkpoint, so that the log can be
        emptied and reused (sending and forgetting events writes a little; a log that cannot be checkpointed
        only grows). The room is held back again only where the disk has plenty left (the log had merely grown):
        on a disk that is really full, it is what lets events be forgotten once sent, and the events that end
        application runs be spooled. ``reserve=False``: only empty the log. Never raises."""
        if self.path is None:
            return
        if reserve:
            self.release_reserve()
        # RESTART, not TRUNCATE: the log keeps the blocks it has, and the next writes reuse them from its start,
        # where a log cut to nothing would need the disk's room to grow again.
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._db.execute("PRAGMA wal_checkpoint(RESTART)")
        with contextlib.suppress(OSError):
            if shutil.disk_usage(self.path).free >= 4 * RESERVE_BYTES:
                self._hold_reserve(self.path / RESERVE_FILE)

    def release_reserve(self) -> bool:
        """Give the room held back on the disk to the spool (its disk is full): whether there was any."""
        if self.path is None:
            return False
        self.short_of_room = True
        try:
            (self.path / RESERVE_FILE).unlink()
        except OSError:
            return False
        return True

    @property
    def location(self) -> str:
        return str(self.path) if self.path is not None else "memory"

    def close(self) -> None:
        """Forget what waits to be forgotten (:meth:`forget_later`), copy the write-ahead log into the main file (so
        that the main file holds everything, and a log damaged later costs nothing), then close. Never raises: a
        spool that cannot even be closed cleanly is left as it is, and sqlite recovers it the next time it opens
        (an event delivered but not forgotten is then sent again: at least once)."""
        if self.forgetting:
            with contextlib.suppress(sqlite3.Error):
                self.acknowledge_all(())
        with self._lock:
            if self.path is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            with contextlib.suppress(sqlite3.Error):
                self._db.close()

    def checkpoint(self) -> None:
        """Copy what the write-ahead log holds into the main file now."""
        if self.path is not None:
            with self._lock:
                self._db.execute("PRAGMA wal_checkpoint(PASSIVE)")

    # --- writing ---------------------------------------------------------------------------------------

    @_reclaiming(reserve=False)
    def remember_destination(self, destination: str, transport: str) -> None:
        """Keep how to reach ``destination`` (its transport settings, without secrets), for a replay."""
        with self._transaction() as db:
            db.execute("INSERT OR REPLACE INTO destinations VALUES (?, ?)", (destination, transport))

    def put(self, destination: str, run_id: str, job: str, application: bool, payload: str) -> Stored:
        """Store one event. When the spool is over its size, the oldest query-run events make room."""
        stored = self.put_all(destination, [Payload(payload, run_id, job, application)])
        return Stored(stored.ids[0], stored.dropped)

    @_reclaiming(reserve=False)
    def put_all(self, destination: str, payloads: Sequence[Payload], handoff: Handoff | None = None) -> StoredAll:
        """Store events in one transaction, in order: all of them or, when it fails, none. When the spool is then
        over its size, the oldest query-run events make room (the same ones as storing them one by one).

        ``handoff``: lease the new events to its owner in the same transaction, when :meth:`lease` would take them
        all in one batch for that owner right after: no event of ``destination`` is before them (none waits,
        none is held, none was dropped for them), they are no more than its limit, and with ``one_run`` they are
        one query run's. Otherwise none is leased."""
        now = time.time()
        rows = [(destination, p.run_id, p.job, int(p.application), p.json, len(p.json.encode()), now) for p in payloads]
        with self._transaction(forgetting=True) as db:
            db.executemany(
                "INSERT INTO events (destination, run_id, job, application, payload, size, created) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            # One writer at a time (the transaction is immediate), and AUTOINCREMENT: the rows' ids follow on.
            (last,) = db.execute("SELECT last_insert_rowid()").fetchone()
            ids = list(range(int(last) - len(rows) + 1, int(last) + 1)) if rows else []
            # What the transaction forgot first comes off the total in the same statement.
            total = self._add_bytes(db, sum(row[5] for row in rows) - self._take_freed())
            dropped = self._make_room(db, total) if total > self.max_bytes else Dropped()
            leased = []
            if handoff is not None and ids and not dropped.count and self._all_next(db, destination, ids[0]):
                leased = _handed_off(destination, payloads, ids, now, handoff)
                if leased:
                    db.execute(
                        LEASE_ROWS,
                        (handoff.owner, now + handoff.seconds, json.dumps(ids)),
                    )
            return StoredAll(ids, dropped, leased)

    @staticmethod
    def _all_next(db: sqlite3.Connection, destination: str, first: int) -> bool:
        """Whether no event of ``destination`` is before the id ``first``."""
        return (
            db.execute("SELECT 1 FROM events WHERE destination = ? AND id < ? LIMIT 1", (destination, first)).fetchone()
            is None
        )

    def _make_room(self, db: sqlite3.Connection, total: int) -> Dropped:
        dropped = Dropped()
        rows = db.execute("SELECT id, job, size FROM events WHERE application = 0 ORDER BY id").fetchall()
        for event_id, job, size in rows:
            if total <= self.max_bytes:
                break
            db.execute("DELETE FROM events WHERE id = ?", (event_id,))
            total = self._add_bytes(db, -size)
            dropped.count += 1
            dropped.jobs.add(job)
            dropped.ids.append(event_id)
        if dropped.ids:
            db.execute(f"DELETE FROM leases WHERE id IN {_JSON_IDS}", (json.dumps(dropped.ids),))
        return dropped

    # --- sending ---------------------------------------------------------------------------------------

    def lease(
        self,
        destination: str,
        owner: str,
        limit: int,
        seconds: float,
        exclude: Collection[int] = (),
        *,
        one_run: bool = False,
    ) -> list[SpooledEvent]:
        """Take up to ``limit`` of the oldest events for ``destination`` that nobody is sending, in order, for
        ``seconds``; with ``one_run``, only events of one run (the run of the oldest event that may go now).
        Events ``exclude`` names are left where they are, as if they were not there (see
        :mod:`~spark_lineage.delivery.failover`).

        An event may be leased only if every earlier pending event that must precede it is in the same batch:

        - every earlier event of its run (START before RUNNING before COMPLETE), whoever holds it, or nobody
          (released after a failed send: it goes first, in this batch or another one);
        - for an application-run event (a barrier), every earlier event of its destination: the application's
          START goes before everything after it, and its COMPLETE or FAIL after everything before it;
        - an event after a barrier only in the batch that holds the barrier.

        So several senders (the lanes of one, or other processes) can send different runs at once, and each
        run's events still arrive in spool order."""
        now = time.time()
        skip, skipped = _excluding(exclude)
        with self._transaction(forgetting=True) as db:
            self._end_leases_of_ended_processes(db, now)
            rows = self._leasable(db, destination, now, limit, one_run, skip, skipped)
            if rows:
                db.execute(
                    LEASE_ROWS,
                    (owner, now + seconds, json.dumps([row[0] for row in rows])),
                )
        return [SpooledEvent(row[0], row[1], row[2], row[3], bool(row[4]), row[5], row[6], row[7]) for row in rows]

    @staticmethod
    def _leasable(
        db: sqlite3.Connection,
        destination: str,
        now: float,
        limit: int,
        one_run: bool,
        skip: str = "",
        skipped: tuple[str, ...] = (),
    ) -> list[Row]:
        """The events :meth:`lease` may take. Between two barriers, an event that nobody holds may go when no
        earlier event of its run is held (an earlier one nobody holds is older, so it is taken first: a batch
        in id order that holds a run's event holds every earlier one of its run that is not held). A barrier
        may go once every earlier event of its destination is in the batch; the events after it, once it is.
        Each step reads the barrier index, then ``events_by_destination`` from where the batch left off. The
        events ``skip`` leaves out (:func:`_excluding`) count as not there."""
        batch: list[Row] = []
        after = 0
        while len(batch) < limit:
            (barrier,) = db.execute(NEXT_BARRIER + skip, (destination, after, *skipped)).fetchone()
            before = barrier if barrier is not None else 2**63 - 1
            if one_run and not batch:
                first = db.execute(
                    f"{FREE}{skip} ORDER BY id LIMIT 1", (destination, after, before, now, now, *skipped)
                ).fetchone()
                if first is not None:
                    return [first, *Spool._rest_of_run(db, first, before, now, limit - 1, skip, skipped)]
            elif not one_run:
                batch += db.execute(
                    f"{FREE}{skip} ORDER BY id LIMIT ?",
                    (destination, after, before, now, now, *skipped, limit - len(batch)),
                )
            if barrier is None or len(batch) >= limit:
                break
            earlier = db.execute(
                f"SELECT id FROM events e WHERE destination = ? AND id < ?{skip} ORDER BY id LIMIT ?",
                (destination, barrier, *skipped, len(batch) + 1),
            ).fetchall()
            row = db.execute(f"{COLUMNS} FROM events e WHERE id = ? AND {LEASE_FREE}", (barrier, now)).fetchone()
            if row is None or [event_id for (event_id,) in earlier] != [r[0] for r in batch]:
                break
            batch.append(row)
            if one_run:
                break  # the application run alone: its next event is a barrier of its own
            after = barrier
        return batch

    @staticmethod
    def _rest_of_run(
        db: sqlite3.Connection, first: Row, before: int, now: float, limit: int, skip: str, skipped: tuple[str, ...]
    ) -> list[Row]:
        """The events of ``first``'s run after it and before the barrier ``before``, up to the first one
        someone else holds (``events_by_run``)."""
        rest = []
        for row in db.execute(
            f"{COLUMNS}, l.leased_until FROM events e LEFT JOIN leases l ON l.id = e.id "
            f"WHERE e.run_id = ? AND e.destination = ? AND e.id > ? AND e.id < ?{skip} ORDER BY e.id LIMIT ?",
            (first[2], first[1], first[0], before, *skipped, limit),
        ):
            if row[-1] is not None and row[-1] >= now:
                break
            rest.append(row[:-1])
        return rest

    def peek(
        self, destination: str, limit: int, exclude: Collection[int] = (), let_go: Collection[int] = ()
    ) -> list[SpooledEvent]:
        """The oldest events for ``destination`` that no live sender holds, in order, without leasing them: what
        a sender reads from a spool whose disk is too full to write leases on, keeping its leases in memory
        instead (:mod:`~spark_lineage.delivery.failover`). ``let_go``: events
        whose holders gave them back, which that disk could not record."""
        now = time.time()
        skip, skipped = self._excluding(exclude)
        with self._lock:
            holders = [owner for (owner,) in self._db.execute(LEASE_HOLDERS, (now,)).fetchall()]
            ended = json.dumps([owner for owner in holders if _owner_ended(owner)])
            rows = self._db.execute(
                f"{COLUMNS} FROM events e LEFT JOIN leases l ON l.id = e.id "
                "WHERE e.destination = ? AND (l.id IS NULL OR l.leased_until < ? "
                "OR l.leased_by IN (SELECT value FROM json_each(?)) OR e.id IN (SELECT value FROM json_each(?)))"
                f"{skip} ORDER BY e.id LIMIT ?",
                (destination, now, ended, json.dumps(sorted(let_go)), *skipped, limit),
            ).fetchall()
        return [SpooledEvent(row[0], row[1], row[2], row[3], bool(row[4]), row[5], row[6], row[7]) for row in rows]

    def held_by(self, owner: str) -> list[int]:
        """The events ``owner`` holds."""
        with self._lock:
            held = self._db.execute(
                "SELECT l.id FROM leases l JOIN events e ON e.id = l.id WHERE l.leased_by = ? ORDER BY l.id", (owner,)
            )
            return [event_id for (event_id,) in held]

    def acknowledge(self, event_id: int) -> None:
        """The backend has it: forget it."""
        self.acknowledge_all([event_id])

    @_reclaiming(reserve=True)
    def acknowledge_all(self, event_ids: Collection[int]) -> None:
        """The backend has them: forget them, in one transaction (those already forgotten are no matter), with
        those :meth:`forget_later` was given."""
        if event_ids or self.forgetting:
            with self._transaction(forgetting=True) as db:
                self._freed += self._forget(db, event_ids)

    def forget_later(self, event_ids: Collection[int]) -> None:
        """The backend has them, and the one who leased them still holds them: forget them in the next transaction
        that writes (the next :meth:`put_all`, :meth:`lease` or :meth:`acknowledge_all`, or :meth:`close`), not
        in one of their own. Until then this spool's readers take them as gone; other processes see them leased.
        Whoever hands them over makes sure such a transaction comes well before the lease ends (a sender: within
        its :data:`~spark_lineage.delivery.sender.ACKNOWLEDGE_SECONDS`)."""
        with self._later.lock:
            self._later.ids.extend(event_ids)

    @property
    def forgetting(self) -> bool:
        """Whether events wait to be forgotten (:meth:`forget_later`)."""
        return bool(self._later.ids)

    @staticmethod
    def _forget(db: sqlite3.Connection, event_ids: Collection[int]) -> int:
        """Delete the events of ``event_ids`` and their leases; the bytes they took, which the caller takes off the
        total (with what else its transaction adds or takes: one statement)."""
        if not event_ids:
            return 0
        ids = json.dumps(sorted(event_ids))
        if _RETURNING:
            sizes = db.execute(f"DELETE FROM events WHERE id IN {_JSON_IDS} RETURNING size", (ids,)).fetchall()
            size = sum(size for (size,) in sizes)
        else:
            query = f"SELECT COALESCE(SUM(size), 0) FROM events WHERE id IN {_JSON_IDS}"
            (size,) = db.execute(query, (ids,)).fetchone()
            db.execute(f"DELETE FROM events WHERE id IN {_JSON_IDS}", (ids,))
        db.execute(f"DELETE FROM leases WHERE id IN {_JSON_IDS}", (ids,))
        return int(size)

    @_reclaiming(reserve=True)
    def renew(self, event_ids: Collection[int], owner: str, until: float) -> set[int]:
        """Hold the events of ``event_ids`` that ``owner`` still holds until ``until`` (``time.time()``), and say
        which those are. One whose lease ran out is still ``owner``'s if nobody leased it since (a lease rewrites
        its holder); one another sender took meanwhile, gave back, or forgot is not, and stays as it is."""
        if not event_ids:
            return set()
        ids = json.dumps(sorted(event_ids))
        with self._transaction() as db:
            db.execute(
                f"UPDATE leases SET leased_until = ? WHERE leased_by = ? AND id IN {_JSON_IDS}", (until, owner, ids)
            )
            held = db.execute(f"SELECT id FROM leases WHERE leased_by = ? AND id IN {_JSON_IDS}", (owner, ids))
            return {int(event_id) for (event_id,) in held}

    @_reclaiming(reserve=True)
    def release(self, event_ids: Sequence[int], owner: str, *, attempted: Sequence[int] = ()) -> None:
        """Give back events ``owner`` leased, unsent; ``attempted`` ones were tried and count an attempt. An
        event that is no longer ``owner``'s (a closed sender's send that ended late) stays with whoever has it
        now, but its attempt still counts."""
        with self._transaction() as db:
            db.executemany(
                "UPDATE events SET attempts = attempts + 1 WHERE id = ?", [(event_id,) for event_id in attempted]
            )
            db.executemany(
                "DELETE FROM leases WHERE id = ? AND leased_by = ?", [(event_id, owner) for event_id in event_ids]
            )

    @_reclaiming(reserve=True)
    def release_owned(self, owner: str, in_flight: InFlight | None = None) -> None:
        """Give back every event ``owner`` still holds (a sender that stops), except the one ``in_flight``:
        its request may still reach the backend, so it stays leased until that request has surely ended, and
        nobody sends a copy of it meanwhile. If this process ends first, the lease ends with it."""
        kept = in_flight.event_id if in_flight is not None else -1
        with self._transaction() as db:
            if in_flight is not None:
                db.execute(
                    "UPDATE leases SET leased_until = ? WHERE id = ? AND leased_by = ?", (in_flight.until, kept, owner)
                )
            db.execute("DELETE FROM leases WHERE leased_by = ? AND id != ?", (owner, kept))

    # --- looking ---------------------------------------------------------------------------------------

    def waiting(self, destination: str, exclude: Collection[int] = ()) -> bool:
        """Whether an event for ``destination`` waits that nobody holds, but the events ``exclude`` names (some
        sender may lease it now, or may once the events before it went)."""
        skip, skipped = self._excluding(exclude)
        with self._lock:
            found = self._db.execute(
                f"SELECT 1 FROM events e WHERE destination = ? AND {LEASE_FREE}{skip} LIMIT 1",
                (destination, time.time(), *skipped),
            ).fetchone()
        return found is not None

    def still_here(self, event_ids: Collection[int]) -> set[int]:
        """Those of ``event_ids`` still in the spool, and not delivered and waiting to be forgotten: the others were
        sent and forgotten (or dropped) by another sender of the file, another spool of this process or a replay."""
        if not event_ids:
            return set()
        with self._lock:
            rows = self._db.execute(f"SELECT id FROM events WHERE id IN {_JSON_IDS}", (json.dumps(list(event_ids)),))
            found = {int(event_id) for (event_id,) in rows.fetchall()}
        with self._later.lock:
            return found - set(self._later.ids)

    def pending(self, destination: str | None = None, exclude: Collection[int] = ()) -> Pending:
        """What waits (for ``destination``, or for every one), but the events ``exclude`` names."""
        conditions, arguments = (["destination = ?"], [destination]) if destination else ([], [])
        skip, skipped = self._excluding(exclude)
        if skip:
            conditions.append(skip.removeprefix(" AND "))
            arguments.extend(skipped)
        where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
        with self._lock:
            count, size = self._db.execute(
                f"SELECT COUNT(*), COALESCE(SUM(size), 0) FROM events e {where}", arguments
            ).fetchone()
            jobs = self._db.execute(f"SELECT DISTINCT job FROM events e {where} ORDER BY job", arguments).fetchall()
        return Pending(int(count), tuple(job for (job,) in jobs), int(size))

    def destinations(self) -> dict[str, str | None]:
        """Every destination with events waiting, and the transport settings kept for it (``None``: none were
        kept, or they could not be read back from a damaged file)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT e.destination, d.transport FROM (SELECT DISTINCT destination FROM events) e "
                "LEFT JOIN destinations d ON d.destination = e.destination ORDER BY e.destination"
            ).fetchall()
        return dict(rows)

    # --- plumbing --------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _transaction(self, *, forgetting: bool = False) -> Iterator[sqlite3.Connection]:
        """One immediate transaction; ``forgetting``: it first forgets what :meth:`forget_later` was given (given
        back to be forgotten later if the transaction fails)."""
        with self._lock:
            later = self._take_later() if forgetting else []
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._freed = self._forget(self._db, later)
                yield self._db
                if self._freed:
                    self._add_bytes(self._db, -self._take_freed())
                # Inside: a COMMIT that fails (a full disk) must not leave the transaction open for the next one.
                self._db.execute("COMMIT")
            except BaseException:
                self._freed = 0
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
                if later:
                    with self._later.lock:
                        self._later.ids[:0] = later
                raise

    def _take_freed(self) -> int:
        """The bytes the transaction under way forgot and has not yet taken off the total (taken now)."""
        freed, self._freed = self._freed, 0
        return freed

    def _take_later(self) -> list[int]:
        with self._later.lock:
            later, self._later.ids = self._later.ids, []
        return later

    def _excluding(self, ids: Collection[int]) -> tuple[str, tuple[str, ...]]:
        """:func:`_excluding` of ``ids`` and of the events waiting to be forgotten (gone, to this spool's readers)."""
        later = self._later.ids
        return _excluding([*ids, *later] if later else ids)

    @staticmethod
    def _end_leases_of_ended_processes(db: sqlite3.Connection, now: float) -> None:
        owners = db.execute(LEASE_HOLDERS, (now,)).fetchall()
        ended = [(owner,) for (owner,) in owners if _owner_ended(owner)]
        if ended:
            db.executemany("DELETE FROM leases WHERE leased_by = ?", ended)

    @staticmethod
    def _add_bytes(db: sqlite3.Connection, delta: int) -> int:
        if _RETURNING:
            return int(db.execute(f"{ADD_BYTES} RETURNING value", (delta,)).fetchone()[0])
        db.execute(ADD_BYTES, (delta,))
        return int(db.execute("SELECT value FROM totals WHERE name = 'bytes'").fetchone()[0])


class _Forgettable:
    """Delivered events of one spool file that wait to be forgotten in the next transaction that writes to it
    (:meth:`Spool.forget_later`). One per file in a process, shared by every :class:`Spool` on it (each session's
    delivery opens its own): whichever writes first forgets them, and none of them reads them as waiting; were
    they one spool's alone, another's lease would find them held, and an event that must go after them (an
    application run's end) would wait for that spool's next write."""

    __slots__ = ("__weakref__", "ids", "lock")

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.lock = threading.Lock()
        """Guards :attr:`ids` alone: handing events over never waits for a transaction."""


_FORGETTABLE: weakref.WeakValueDictionary[tuple[int, int], _Forgettable] = weakref.WeakValueDictionary()
"""The :class:`_Forgettable` of each spool file a spool of this process has open, by device and inode (a file
moved aside keeps its own; the fresh one that takes its place has another)."""
_FORGETTABLE_LOCK = threading.Lock()


def _forgettable(file: Path) -> _Forgettable:
    stat = file.stat()
    with _FORGETTABLE_LOCK:
        shared = _FORGETTABLE.get((stat.st_dev, stat.st_ino))
        if shared is None:
            shared = _FORGETTABLE[(stat.st_dev, stat.st_ino)] = _Forgettable()
        return shared


_RETURNING = sqlite3.sqlite_version_info >= (3, 35)
"""Whether this sqlite has ``RETURNING`` (3.35, 2021): one statement where older ones take two."""
_JSON_IDS = "(SELECT value FROM json_each(?))"
"""The ids a JSON array names: one argument, whatever the count."""


def _handed_off(
    destination: str, payloads: Sequence[Payload], ids: list[int], now: float, handoff: Handoff
) -> list[SpooledEvent]:
    """The new events as a lease of ``handoff`` takes them (nothing of their destination is before them): all of
    them, or none when they are more than its limit, or, for a one-run lease, not one query run's alone."""
    if len(ids) > handoff.limit:
        return []
    if handoff.one_run and (payloads[0].application or any(p.run_id != payloads[0].run_id for p in payloads)):
        return []  # a one-run lease takes an application-run event alone (the barrier of the events after it)
    return [SpooledEvent(i, destination, p.run_id, p.job, p.application, p.json, now, 0) for i, p in zip(ids, payloads)]


def _excluding(ids: Collection[int]) -> tuple[str, tuple[str, ...]]:
    """A condition leaving out the events ``ids`` names, and its argument (one JSON array, whatever the count)."""
    if not ids:
        return "", ()
    return f" AND e.id NOT IN {_JSON_IDS}", (json.dumps(sorted(ids)),)


def _size(file: Path) -> int:
    try:
        return file.stat().st_size
    except FileNotFoundError:
        return 0
