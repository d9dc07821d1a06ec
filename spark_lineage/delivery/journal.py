"""The journal of the events a delivery keeps in memory before it spools them, so that keeping them loses none.

A Spark Connect client's delivery keeps each action's events a while (``python.connect.spoolDelayMillis``: its
START from when it is sent, its end's) to spool several actions' in one transaction
(:meth:`~spark_lineage.delivery.Delivery.keep`). Each kept batch is first appended to a file of the delivery's
own in the spool's directory, in one write: a process killed
outright (``SIGKILL``) while events are kept leaves them there, and whoever opens that spool next (a session, or
``spark-lineage replay``) puts them in it (:func:`recover`). Once the kept events are spooled, the journal is
emptied; at the delivery's close it is removed.

A journal is its owner's while the owner lives: the owner holds an exclusive ``flock`` on it, which the kernel
lets go when the process ends, however it ends. A journal whose lock can be taken is a dead process's. Events
spooled just before their owner died, with the journal not yet emptied, are put in twice: delivery is at least
once, as everywhere in the spool.

Each line is one event: a JSON array (destination, run id, job, whether an application run's) and the event's
JSON (which holds no raw tab or newline: ``json.dumps`` escapes them), separated by a tab. A line cut short by
the process's death is left out. Without ``fcntl`` (Windows) there is no journal, and nothing is kept.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from spark_lineage.delivery.payloads import Payload

try:
    import fcntl
except ImportError:  # Windows: no journal
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger("spark_lineage")

JOURNAL_PREFIX = "kept-"
JOURNAL_SUFFIX = ".journal"


def journals_supported() -> bool:
    """Whether this platform can tell a live owner's journal from a dead one's (``flock``)."""
    return fcntl is not None


class Journal:
    """One delivery's journal in ``directory``: made at the first :meth:`append`, locked while it is open. Not
    thread-safe: its delivery appends and empties it under its own lock."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / f"{JOURNAL_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}{JOURNAL_SUFFIX}"
        self._fd: int | None = None
        self._empty = True

    def append(self, destination: str, payloads: Sequence[Payload]) -> None:
        """Write ``payloads`` at the journal's end, in one write. Raises ``OSError`` when it cannot (the caller
        spools them at once instead)."""
        if self._fd is None:
            self._fd = _open_locked(self.path)
        text = "".join(
            f"{json.dumps([destination, p.run_id, p.job, p.application])}\t{p.json}\n" for p in payloads
        ).encode()
        view = memoryview(text)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        self._empty = False

    def clear(self) -> None:
        """Empty the journal: what it held is spooled."""
        if self._fd is not None and not self._empty:
            os.ftruncate(self._fd, 0)
            self._empty = True

    def close(self) -> None:
        """Remove the journal (once what it held is spooled) and let its lock go."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()
        with contextlib.suppress(OSError):
            os.close(self._fd)
        self._fd = None


def _open_locked(path: Path) -> int:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BaseException:
        os.close(fd)
        raise
    return fd


def recover(directory: Path, put_all: Callable[[str, list[Payload]], object]) -> int:
    """Put the events of the dead processes' journals in ``directory`` in the spool (``put_all``, per
    destination, in their order), and remove each journal once its events are in; journals of live owners are
    left alone. How many events were put. Never raises: a journal that cannot be read or put is left for the
    next time."""
    if fcntl is None:
        return 0
    recovered = 0
    try:
        paths = sorted(directory.glob(f"{JOURNAL_PREFIX}*{JOURNAL_SUFFIX}"))
    except OSError:
        return 0
    for path in paths:
        try:
            recovered += _recover_one(path, put_all)
        except Exception as error:  # noqa: BLE001 - left for the next one to open the spool
            log.warning("spark_lineage: the events kept in %s could not be spooled yet: %s", path, error)
    return recovered


def _recover_one(path: Path, put_all: Callable[[str, list[Payload]], object]) -> int:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:  # its owner removed it, or another process recovered it
        return 0
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # its owner lives (or another process is recovering it)
            return 0
        try:
            if os.fstat(fd).st_ino != os.stat(path).st_ino:
                return 0  # recovered and removed by another process meanwhile; this name is a new journal's
        except FileNotFoundError:
            return 0
        with os.fdopen(os.dup(fd), "rb") as file:
            lines = file.read().split(b"\n")
        groups: list[tuple[str, list[Payload]]] = []
        unreadable = 0
        for line in lines[:-1]:  # the last is empty, or a line cut short
            event = _event(line)
            if event is None:
                unreadable += 1
                continue
            destination, payload = event
            if not groups or groups[-1][0] != destination:
                groups.append((destination, []))
            groups[-1][1].append(payload)
        for destination, payloads in groups:
            put_all(destination, payloads)
        count = sum(len(payloads) for _, payloads in groups)
        path.unlink()
        if count or unreadable:
            log.info(
                "spark_lineage: spooled %d events a process kept in memory when it ended (%s)%s",
                count,
                path.name,
                f"; {unreadable} unreadable lines were left out" if unreadable else "",
            )
        return count
    finally:
        os.close(fd)


def _event(line: bytes) -> tuple[str, Payload] | None:
    """A journal line's destination and event; ``None`` for a line that is not one."""
    head, tab, text = line.partition(b"\t")
    if not tab:
        return None
    try:
        destination, run_id, job, application = json.loads(head)
        document = json.loads(text)
    except (ValueError, TypeError):
        return None
    if not isinstance(document, dict) or not all(isinstance(v, str) for v in (destination, run_id, job)):
        return None
    return destination, Payload(text.decode(), run_id, job, bool(application))
