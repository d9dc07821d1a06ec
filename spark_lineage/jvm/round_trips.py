"""Counting JVM round trips, for a benchmark or a test: each command py4j sends from this process, while
:func:`counting` is on, is charged to the calling thread's stage (:mod:`spark_lineage.costs`).

py4j sends every call, field read and object release through one method of its connection classes (the
pinned-thread ``ClientServerConnection`` PySpark uses, and the classic ``GatewayConnection``), so wrapping
that method counts every round trip whatever object made it. Only calls made inside a stage are counted: the
user's own calls, and Spark's, are not ours.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from spark_lineage import costs

_lock = threading.Lock()
_depth = 0
_originals: dict[type, Callable[..., Any]] = {}


def _connection_classes() -> list[type]:
    from py4j.clientserver import ClientServerConnection
    from py4j.java_gateway import GatewayConnection

    return [ClientServerConnection, GatewayConnection]


def _counted(send: Callable[..., Any]) -> Callable[..., Any]:
    def send_command(self: Any, command: str, *args: Any, **kwargs: Any) -> Any:
        costs.count_round_trip()
        return send(self, command, *args, **kwargs)

    return send_command


@contextmanager
def counting() -> Iterator[None]:
    """Count round trips while inside (nested uses share one wrapping)."""
    global _depth
    with _lock:
        if _depth == 0:
            for cls in _connection_classes():
                _originals[cls] = cls.send_command  # type: ignore[attr-defined]
                cls.send_command = _counted(_originals[cls])  # type: ignore[attr-defined]
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                for cls, original in _originals.items():
                    cls.send_command = original  # type: ignore[attr-defined]
                _originals.clear()
