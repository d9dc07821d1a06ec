"""The pipe from the user's process to its delivery helper: one length-prefixed pickle per item.

Each item is pickled whole before a byte is written, so an item that cannot be pickled never leaves half of
itself in the pipe, and the reader never needs the rest of a stream to stay in step. The reader ends at end
of input, and also when the process that started it is gone while the pipe stays open: a child the user's
process forked (``multiprocessing`` with ``fork``) holds the pipe's write end for as long as it lives, so end
of input alone would keep the helper waiting for it.
"""

from __future__ import annotations

import os
import pickle
import select
import struct
from collections.abc import Iterator
from typing import Any

from spark_lineage.worker import ErrorLog

_HEADER = struct.Struct(">I")
_CHUNK = 1 << 16
_CAN_POLL = os.name == "posix"
"""Pipes can be polled with ``select`` on POSIX only; elsewhere reads block until data or end of input."""
PARENT_POLL_SECONDS = 0.5
"""How often an idle reader checks that the process feeding it is still there."""


def frame(item: object) -> bytes:
    """``item`` as it goes down the pipe."""
    data = pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(data)) + data


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd`` (a pipe may take less than all in one write)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class FrameReader:
    """The items written to file descriptor ``fd`` by process ``parent_pid``, in order."""

    def __init__(self, fd: int, parent_pid: int, errors: ErrorLog) -> None:
        self.fd = fd
        self.parent_pid = parent_pid
        self.errors = errors
        self._buffer = bytearray()

    def __iter__(self) -> Iterator[Any]:
        while True:
            chunk = self._read()
            if not chunk:
                if self._buffer:  # the writer died in the middle of an item: the part cannot be used
                    self.errors.report(
                        "reading the last item", message=f"{len(self._buffer)} bytes of an item were cut off"
                    )
                return
            self._buffer += chunk
            yield from self._items()

    def parent_alive(self) -> bool:
        # A process whose parent dies is adopted by another (init, or a subreaper): its parent pid changes.
        return os.getppid() == self.parent_pid

    def _read(self) -> bytes:
        """The next bytes, or ``b""`` at end of input, once the parent is gone and nothing is left to read, or
        when the pipe cannot be read any more."""
        try:
            if not _CAN_POLL:
                return os.read(self.fd, _CHUNK)
            while True:
                readable, _, _ = select.select([self.fd], [], [], PARENT_POLL_SECONDS)
                if readable:
                    return os.read(self.fd, _CHUNK)
                if not self.parent_alive():
                    return b""
        except OSError as error:
            self.errors.report("reading from the parent", error)
            return b""

    def _items(self) -> Iterator[Any]:
        buffer = self._buffer
        while len(buffer) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(buffer)
            end = _HEADER.size + size
            if len(buffer) < end:
                return
            data = bytes(buffer[_HEADER.size : end])
            del buffer[:end]
            try:
                item = pickle.loads(data)
            except Exception as error:  # noqa: BLE001 - one item that cannot be read must not stop the others
                self.errors.report("reading an item", error)
                continue
            yield item
