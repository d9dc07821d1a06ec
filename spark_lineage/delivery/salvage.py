"""Reading what can still be read from a damaged spool file (``spark-lineage replay --salvage FILE``).

Two readers, and the events either one recovers:

- **sqlite's own recovery**, the ``.recover`` command of sqlite's command-line shell, where one is installed and
  its sqlite has what ``.recover`` reads pages with (the ``sqlite_dbpage`` table; Python's ``sqlite3`` module has
  no recovery of its own, and Debian's shell lacks it): it reads every page that is still a page and rebuilds what
  it can;
- **row by row**, always: every event id the file still knows (from the table and from each of its indexes, and
  every id up to the highest one handed out), each read on its own, so that a damaged page costs the events on it
  and no others.

An event counts as recovered when its row reads whole and its payload is the JSON of an event. The events
recovered go, in their original order, into a spool of their own next to the file (:func:`salvage_dir`), which
``replay`` then delivers like any other: what the backend does not take stays there for the next
``spark-lineage replay --spool``, and the damaged file is never read twice.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import subprocess
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from spark_lineage.delivery.spool import Spool, SpooledEvent

SALVAGED_SUFFIX = ".salvaged"
RECOVER_TIMEOUT_SECONDS = 120.0
_MAX_IDS_PROBED = 5_000_000
"""Ids probed one by one at most (an id range beyond this is read through the table and indexes only)."""
_EVENT_COLUMNS = "id, destination, run_id, job, application, payload, created, attempts"


@dataclass(frozen=True)
class Salvaged:
    """What was read from a damaged spool file."""

    directory: Path
    """The spool the recovered events were put in."""
    recovered: int
    unreadable: int
    """Events the file still lists (in its table or an index) whose row could not be read whole."""
    readers: tuple[str, ...]
    """How they were read: ``sqlite .recover`` and/or ``row by row``."""
    earlier: bool = False
    """The file was salvaged before: its events were not read again."""


def salvage_dir(file: Path) -> Path:
    """Where the events recovered from ``file`` are spooled."""
    return file.with_name(file.name + SALVAGED_SUFFIX)


def salvage(file: Path, sqlite_shell: str | None = None) -> Salvaged:
    """Recover the events of the damaged spool ``file`` into :func:`salvage_dir`; with ``sqlite_shell`` (the
    path of sqlite's shell, default: ``sqlite3`` on PATH; ``""``: none) its ``.recover`` reads too. A file
    salvaged before is not read again. Raises ``OSError`` when ``file`` cannot be read at all."""
    target = salvage_dir(file)
    if (target / "spool.sqlite").is_file():
        spool = Spool(target)
        try:
            left = spool.pending().count
        finally:
            spool.close()
        return Salvaged(target, left, 0, (), earlier=True)
    if not file.is_file():
        raise FileNotFoundError(f"no such file: {file}")
    known: set[int] = set()
    rows: dict[int, SpooledEvent] = {}
    destinations: dict[str, str] = {}
    readers = []
    shell = shutil.which("sqlite3") if sqlite_shell is None else sqlite_shell
    if shell:
        recovered = _recovered_by_sqlite(file, shell)
        if recovered is not None and recovered[0]:
            readers.append("sqlite .recover")
            for row in recovered[0]:
                rows.setdefault(row.id, row)
            destinations.update(recovered[1])
    readers.append("row by row")
    by_row, listed, kept = _row_by_row(file)
    for row in by_row:
        rows.setdefault(row.id, row)
    known |= listed
    destinations.update(kept)
    spool = Spool(target, check=False)
    try:
        for destination, transport in destinations.items():
            spool.remember_destination(destination, transport)
        for row in sorted(rows.values(), key=lambda row: row.id):
            spool.put(row.destination, row.run_id, row.job, row.application, row.payload)
    finally:
        spool.close()
    unreadable = len(known - set(rows))
    return Salvaged(target, len(rows), unreadable, tuple(readers))


def _row_by_row(file: Path) -> tuple[list[SpooledEvent], set[int], dict[str, str]]:
    """``(rows read whole, ids the file lists, destinations)``."""
    with _read_only(file) as db:
        listed: set[int] = set()
        for source in ("events", "events INDEXED BY events_by_destination", "events INDEXED BY events_by_run"):
            listed.update(_ids(db, f"SELECT id FROM {source}"))
        highest = next(iter(_ids(db, "SELECT seq FROM sqlite_sequence WHERE name = 'events'")), 0)
        probed = set(range(1, highest + 1)) if highest <= _MAX_IDS_PROBED else set()
        rows = []
        for event_id in sorted(listed | probed):
            row = _row(db, event_id)
            if row is not None:
                rows.append(row)
        destinations = _destinations(db)
    return rows, listed, destinations


def _recovered_by_sqlite(file: Path, shell: str) -> tuple[list[SpooledEvent], dict[str, str]] | None:
    """The events sqlite's shell recovers from ``file`` (into a scratch database), or ``None`` when it cannot."""
    with tempfile.TemporaryDirectory(prefix="spark-lineage-salvage-") as scratch:
        rebuilt = Path(scratch) / "recovered.sqlite"
        copy = Path(scratch) / "damaged.sqlite"
        shutil.copyfile(file, copy)  # the shell may write to what it reads (its log): never to the user's file
        wal = Path(f"{file}-wal")
        if wal.is_file():
            shutil.copyfile(wal, Path(f"{copy}-wal"))
        try:
            dump = subprocess.run(
                [shell, str(copy), ".recover"],
                capture_output=True,
                timeout=RECOVER_TIMEOUT_SECONDS,
                check=False,
            )
            if not dump.stdout:
                return None
            subprocess.run(
                [shell, str(rebuilt)], input=dump.stdout, capture_output=True, timeout=RECOVER_TIMEOUT_SECONDS,
                check=False,
            )  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            return None
        if dump.returncode != 0 or b"sql error" in dump.stderr.lower() or not rebuilt.is_file():
            return None  # a shell whose sqlite lacks what .recover reads pages with (the dbpage table) says so
        try:
            with _read_only(rebuilt) as db:
                rows = [row for row in map(_valid, _fetch(db, f"SELECT {_EVENT_COLUMNS} FROM events")) if row]
                destinations: dict[str, str] = {}
                with contextlib.suppress(sqlite3.Error):
                    destinations = {
                        str(d): str(t) for d, t in db.execute("SELECT destination, transport FROM destinations")
                    }
        except sqlite3.Error:
            return None
        return rows, destinations


@contextlib.contextmanager
def _read_only(file: Path) -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(str(file), isolation_level=None)
    try:
        db.execute("PRAGMA query_only = 1")
        # sqlite then reads a file shorter than its header says (a truncated one) as far as it goes, instead of
        # refusing it whole; nothing is written (query_only).
        db.execute("PRAGMA writable_schema = ON")
        yield db
    finally:
        db.close()


def _destinations(db: sqlite3.Connection) -> dict[str, str]:
    """The transport settings the file keeps for each destination, as far as they can be read."""
    return {str(destination): str(transport) for destination, transport in _fetch(db, "SELECT * FROM destinations")}


def _ids(db: sqlite3.Connection, query: str) -> set[int]:
    """The ids a query yields until the file fails it (a damaged page ends a scan, not the salvage)."""
    found: set[int] = set()
    with contextlib.suppress(sqlite3.Error):
        cursor = db.execute(query)
        while True:
            row = cursor.fetchone()
            if row is None:
                break
            if isinstance(row[0], int):
                found.add(row[0])
    return found


def _fetch(db: sqlite3.Connection, query: str) -> Iterable[tuple[object, ...]]:
    with contextlib.suppress(sqlite3.Error):
        cursor = db.execute(query)
        while True:
            row = cursor.fetchone()
            if row is None:
                return
            yield tuple(row)


def _row(db: sqlite3.Connection, event_id: int) -> SpooledEvent | None:
    try:
        found = db.execute(f"SELECT {_EVENT_COLUMNS} FROM events WHERE id = ?", (event_id,)).fetchone()
    except sqlite3.Error:
        return None
    return _valid(tuple(found)) if found is not None else None


def _valid(row: tuple[object, ...]) -> SpooledEvent | None:
    """A row as an event, when every column is what the spool wrote: a damaged page can read as garbage."""
    event_id, destination, run_id, job, application, payload, created, attempts = row
    if not (isinstance(event_id, int) and isinstance(payload, str) and isinstance(destination, str)):
        return None
    try:
        document = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(document, dict) or "eventTime" not in document:
        return None
    when = float(created) if isinstance(created, (int, float)) else 0.0
    tries = attempts if isinstance(attempts, int) else 0
    return SpooledEvent(event_id, destination, str(run_id), str(job), bool(application), payload, when, tries)
