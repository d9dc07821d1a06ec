"""The durable spool: every event is stored here before it is sent, and removed once the backend has
acknowledged it, so that a backend that is down, slow or refusing costs the job nothing and loses nothing a
replay cannot deliver.

It is one sqlite database (Python's ``sqlite3``) in write-ahead-log mode, shared safely by every thread and
process that opens it: senders lease the events they are about to send, so two senders never send the same
event at once. A lease ends when its time runs out, or as soon as the process that holds it is found to have
ended (on this host), so a replay right after a process died does not wait for it. Its size is bounded: when
full, the oldest query-run events go first; application-run events, which say how a whole job ended, are kept.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_MAX_BYTES = 256 * 1024 * 1024
SPOOL_FILE = "spool.sqlite"
SPOOL_DIR_ENV = "SPARK_LINEAGE_SPOOL_DIR"

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
    leased_by TEXT,
    leased_until REAL
);
CREATE INDEX IF NOT EXISTS events_by_destination ON events (destination, id);
CREATE INDEX IF NOT EXISTS events_by_run ON events (run_id, id);
-- Only the events some sender holds: each lease first looks for holders whose process has ended, and a spool
-- a long outage filled holds many events but few leased ones.
CREATE INDEX IF NOT EXISTS events_leased ON events (leased_by, leased_until) WHERE leased_by IS NOT NULL;
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

LEASE_HOLDERS = "SELECT DISTINCT leased_by FROM events WHERE leased_by IS NOT NULL AND leased_until >= ?"
"""Who holds events at a time given: the query ``events_leased`` serves."""

Row = tuple[Any, ...]
"""An event as :data:`COLUMNS` reads it."""
COLUMNS = "SELECT id, destination, run_id, job, application, payload, created, attempts"
LEASE_FREE = "(leased_until IS NULL OR leased_until < ?)"
NEXT_BARRIER = "SELECT MIN(id) FROM events WHERE destination = ? AND application = 1 AND id > ?"
"""The first application-run event after an id: the query ``events_barriers`` serves."""
FREE = (
    f"{COLUMNS} FROM events e WHERE destination = ? AND id > ? AND id < ? AND {LEASE_FREE} "
    "AND NOT EXISTS (SELECT 1 FROM events f WHERE f.run_id = e.run_id AND f.id < e.id AND f.leased_until >= ?) "
    "ORDER BY id "
)
"""Events between two ids that nobody holds and whose run has no earlier event somebody holds, oldest first."""


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

    def __init__(self, path: Path | None, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        if path is not None:
            path.mkdir(parents=True, exist_ok=True)
            database = str(path / SPOOL_FILE)
        else:
            database = ":memory:"
        # Autocommit mode: every transaction is an explicit BEGIN IMMEDIATE ... COMMIT below.
        self._db = sqlite3.connect(database, timeout=30, isolation_level=None, check_same_thread=False)
        with self._lock:
            self._db.execute("PRAGMA busy_timeout = 30000")
            if path is not None:
                self._db.execute("PRAGMA journal_mode = WAL")
                # Durable against the process dying at any point (not against the machine losing power
                # before a checkpoint), at a fraction of the cost of a sync per event.
                self._db.execute("PRAGMA synchronous = NORMAL")
            self._db.executescript(_SCHEMA)

    @property
    def location(self) -> str:
        return str(self.path) if self.path is not None else "memory"

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # --- writing ---------------------------------------------------------------------------------------

    def remember_destination(self, destination: str, transport: str) -> None:
        """Keep how to reach ``destination`` (its transport settings, without secrets), for a replay."""
        with self._transaction() as db:
            db.execute("INSERT OR REPLACE INTO destinations VALUES (?, ?)", (destination, transport))

    def put(self, destination: str, run_id: str, job: str, application: bool, payload: str) -> Dropped:
        """Store one event. When the spool is over its size, the oldest query-run events make room."""
        size = len(payload.encode())
        with self._transaction() as db:
            db.execute(
                "INSERT INTO events (destination, run_id, job, application, payload, size, created) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (destination, run_id, job, int(application), payload, size, time.time()),
            )
            total = self._add_bytes(db, size)
            return self._make_room(db, total) if total > self.max_bytes else Dropped()

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
        return dropped

    # --- sending ---------------------------------------------------------------------------------------

    def lease(
        self, destination: str, owner: str, limit: int, seconds: float, *, one_run: bool = False
    ) -> list[SpooledEvent]:
        """Take up to ``limit`` of the oldest events for ``destination`` that nobody is sending, in order, for
        ``seconds``; with ``one_run``, only events of one run (the run of the oldest event that may go now).

        An event may be leased only if every earlier pending event that must precede it is in the same batch:

        - every earlier event of its run (START before RUNNING before COMPLETE), whoever holds it, or nobody
          (released after a failed send: it goes first, in this batch or another one);
        - for an application-run event (a barrier), every earlier event of its destination: the application's
          START goes before everything after it, and its COMPLETE or FAIL after everything before it;
        - an event after a barrier only in the batch that holds the barrier.

        So several senders (the lanes of one, or other processes) can send different runs at once, and each
        run's events still arrive in spool order."""
        now = time.time()
        with self._transaction() as db:
            self._end_leases_of_ended_processes(db, now)
            rows = self._leasable(db, destination, now, limit, one_run)
            if rows:
                db.executemany(
                    "UPDATE events SET leased_by = ?, leased_until = ? WHERE id = ?",
                    [(owner, now + seconds, row[0]) for row in rows],
                )
        return [SpooledEvent(row[0], row[1], row[2], row[3], bool(row[4]), row[5], row[6], row[7]) for row in rows]

    @staticmethod
    def _leasable(db: sqlite3.Connection, destination: str, now: float, limit: int, one_run: bool) -> list[Row]:
        """The events :meth:`lease` may take. Between two barriers, an event that nobody holds may go when no
        earlier event of its run is held (an earlier one nobody holds is older, so it is taken first: a batch
        in id order that holds a run's event holds every earlier one of its run that is not held). A barrier
        may go once every earlier event of its destination is in the batch; the events after it, once it is.
        Each step reads the barrier index, then ``events_by_destination`` from where the batch left off."""
        batch: list[Row] = []
        after = 0
        while len(batch) < limit:
            (barrier,) = db.execute(NEXT_BARRIER, (destination, after)).fetchone()
            before = barrier if barrier is not None else 2**63 - 1
            if one_run and not batch:
                first = db.execute(FREE + "LIMIT 1", (destination, after, before, now, now)).fetchone()
                if first is not None:
                    return [first, *Spool._rest_of_run(db, first, before, now, limit - 1)]
            elif not one_run:
                batch += db.execute(FREE + "LIMIT ?", (destination, after, before, now, now, limit - len(batch)))
            if barrier is None or len(batch) >= limit:
                break
            earlier = db.execute(
                "SELECT id FROM events WHERE destination = ? AND id < ? ORDER BY id LIMIT ?",
                (destination, barrier, len(batch) + 1),
            ).fetchall()
            row = db.execute(f"{COLUMNS} FROM events WHERE id = ? AND {LEASE_FREE}", (barrier, now)).fetchone()
            if row is None or [event_id for (event_id,) in earlier] != [r[0] for r in batch]:
                break
            batch.append(row)
            if one_run:
                break  # the application run alone: its next event is a barrier of its own
            after = barrier
        return batch

    @staticmethod
    def _rest_of_run(db: sqlite3.Connection, first: Row, before: int, now: float, limit: int) -> list[Row]:
        """The events of ``first``'s run after it and before the barrier ``before``, up to the first one
        someone else holds (``events_by_run``)."""
        rest = []
        for row in db.execute(
            f"{COLUMNS}, leased_until FROM events WHERE run_id = ? AND destination = ? AND id > ? AND id < ? "
            "ORDER BY id LIMIT ?",
            (first[2], first[1], first[0], before, limit),
        ):
            if row[-1] is not None and row[-1] >= now:
                break
            rest.append(row[:-1])
        return rest

    def acknowledge(self, event_id: int) -> None:
        """The backend has it: forget it."""
        with self._transaction() as db:
            row = db.execute("SELECT size FROM events WHERE id = ?", (event_id,)).fetchone()
            if row is not None:
                db.execute("DELETE FROM events WHERE id = ?", (event_id,))
                self._add_bytes(db, -row[0])

    def release(self, event_ids: Sequence[int], owner: str, *, attempted: Sequence[int] = ()) -> None:
        """Give back events ``owner`` leased, unsent; ``attempted`` ones were tried and count an attempt. An
        event that is no longer ``owner``'s (a closed sender's send that ended late) stays with whoever has it
        now, but its attempt still counts."""
        with self._transaction() as db:
            db.executemany(
                "UPDATE events SET attempts = attempts + 1 WHERE id = ?", [(event_id,) for event_id in attempted]
            )
            db.executemany(
                "UPDATE events SET leased_by = NULL, leased_until = NULL WHERE id = ? AND leased_by = ?",
                [(event_id, owner) for event_id in event_ids],
            )

    def release_owned(self, owner: str, in_flight: InFlight | None = None) -> None:
        """Give back every event ``owner`` still holds (a sender that stops), except the one ``in_flight``:
        its request may still reach the backend, so it stays leased until that request has surely ended, and
        nobody sends a copy of it meanwhile. If this process ends first, the lease ends with it."""
        kept = in_flight.event_id if in_flight is not None else -1
        with self._transaction() as db:
            if in_flight is not None:
                db.execute(
                    "UPDATE events SET leased_until = ? WHERE id = ? AND leased_by = ?",
                    (in_flight.until, kept, owner),
                )
            db.execute(
                "UPDATE events SET leased_by = NULL, leased_until = NULL WHERE leased_by = ? AND id != ?",
                (owner, kept),
            )

    # --- looking ---------------------------------------------------------------------------------------

    def pending(self, destination: str | None = None) -> Pending:
        where, arguments = ("WHERE destination = ?", (destination,)) if destination else ("", ())
        with self._lock:
            count, size = self._db.execute(
                f"SELECT COUNT(*), COALESCE(SUM(size), 0) FROM events {where}", arguments
            ).fetchone()
            jobs = self._db.execute(f"SELECT DISTINCT job FROM events {where} ORDER BY job", arguments).fetchall()
        return Pending(int(count), tuple(job for (job,) in jobs), int(size))

    def destinations(self) -> dict[str, str]:
        """Every destination with events waiting, and the transport settings kept for it."""
        with self._lock:
            rows = self._db.execute(
                "SELECT d.destination, d.transport FROM destinations d "
                "WHERE EXISTS (SELECT 1 FROM events e WHERE e.destination = d.destination)"
            ).fetchall()
        return dict(rows)

    # --- plumbing --------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    @staticmethod
    def _end_leases_of_ended_processes(db: sqlite3.Connection, now: float) -> None:
        owners = db.execute(LEASE_HOLDERS, (now,)).fetchall()
        ended = [(owner,) for (owner,) in owners if _owner_ended(owner)]
        db.executemany("UPDATE events SET leased_by = NULL, leased_until = NULL WHERE leased_by = ?", ended)

    @staticmethod
    def _add_bytes(db: sqlite3.Connection, delta: int) -> int:
        db.execute("UPDATE totals SET value = value + ? WHERE name = 'bytes'", (delta,))
        return int(db.execute("SELECT value FROM totals WHERE name = 'bytes'").fetchone()[0])
