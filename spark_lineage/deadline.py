"""One bounded wait shared by several steps: each step waits what is left of it, never more, and the whole
never waits longer than it was given (``python.shutdownTimeoutSeconds`` at a stop, a flush's timeout)."""

from __future__ import annotations

import time

FOREVER_MILLIS = 3_600_000
"""What an unbounded wait is, for the JVM's waits that take milliseconds: an hour."""


class Deadline:
    """The end of a wait of ``timeout`` seconds from now (``None``: no end)."""

    __slots__ = ("_end",)

    def __init__(self, timeout: float | None) -> None:
        self._end = None if timeout is None else time.monotonic() + timeout

    def seconds(self) -> float | None:
        """What is left, in seconds (never below 0); ``None`` for no end."""
        return None if self._end is None else max(self._end - time.monotonic(), 0.0)

    def millis(self) -> int:
        """What is left, in whole milliseconds (:data:`FOREVER_MILLIS` for no end)."""
        remaining = self.seconds()
        return FOREVER_MILLIS if remaining is None else int(remaining * 1000)
