"""Notices when the JVM behind a py4j gateway ends, however it ends (SIGTERM, SIGKILL, a crash).

Under ``spark-submit`` the JVM is the Python driver's parent, and Spark's ``PythonRunner`` sends the driver no
signal when the JVM is stopped: the driver lives on, its gateway gone. One daemon thread per gateway holds a
connection of its own to the gateway, authenticated as PySpark's are, and blocks reading it. The JVM never
writes on a connection that sends it nothing, so the read returns only when the connection closes, which the
kernel does when the JVM's process ends: one idle socket and thread on each side, no CPU, no polling, and no
reliance on who is whose parent (a wrapper script between them, a container's init, plain ``python``).

A closed connection is confirmed before anything is concluded: the watch connects anew, and a gateway that
accepts and authenticates it is alive (the watch goes on over the new connection); one that refuses it, or
drops it before answering, has ended. Only then is the gateway marked ended (:func:`ended`: the bridge makes
no JVM call after it) and the callbacks called, once, on the watch's thread.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

_CONNECT_TIMEOUT = 10.0
"""Seconds to connect and authenticate; a JVM too busy to answer in time is not taken for dead."""
_QUICK_CLOSES = 3
"""Connections in a row closed within a second of opening: the gateway is closing ours on purpose, so the watch
stops (without a verdict) rather than loop."""


class _GoneError(Exception):
    """The gateway refused a connection or dropped it before answering: the JVM has ended."""


@dataclass(frozen=True)
class _Endpoint:
    address: str
    port: int
    token: str | None = field(repr=False)


@dataclass
class _Watch:
    gateway: Any = field(repr=False)
    """Kept, so that no other gateway gets its ``id``."""
    endpoint: _Endpoint
    callbacks: list[Callable[[], None]] = field(default_factory=list)
    ended: bool = False


_watches: dict[int, _Watch] = {}
"""By ``id`` of the gateway (PySpark makes one per process and keeps it)."""
_lock = threading.Lock()


def watch(gateway: Any, on_end: Callable[[], None]) -> bool:
    """Call ``on_end`` once, from the watch's daemon thread, when the JVM behind ``gateway`` has ended (a
    callback given again is not added twice). Returns whether the gateway is watched. Never raises."""
    try:
        with _lock:
            current = _watches.get(id(gateway))
            if current is None:
                endpoint = _endpoint_of(gateway)
                if endpoint is None:
                    return False
                current = _watches[id(gateway)] = _Watch(gateway, endpoint)
                thread = threading.Thread(target=_run, args=(current,), name="spark_lineage-jvm-watch", daemon=True)
                thread.start()
            if on_end not in current.callbacks:
                current.callbacks.append(on_end)
            return True
    except Exception:
        log.debug("spark_lineage: cannot watch the JVM", exc_info=True)
        return False


def ended(gateway: Any) -> bool:
    """Whether the JVM behind ``gateway`` is known to have ended."""
    current = _watches.get(id(gateway))
    return current is not None and current.ended


def _endpoint_of(gateway: Any) -> _Endpoint | None:
    # vars(): an attribute a py4j gateway lacks is looked up in the JVM.
    attributes = vars(gateway)
    parameters = attributes.get("gateway_parameters") or attributes.get("java_parameters")
    if parameters is None:
        return None
    return _Endpoint(str(parameters.address), int(parameters.port), parameters.auth_token)


def _run(current: _Watch) -> None:
    quick_closes = 0
    first = True
    while True:
        try:
            connection = _connect(current.endpoint)
        except _GoneError:
            if first:  # never reached: nothing to conclude from
                log.debug("spark_lineage: the JVM watch could not connect to %s", current.endpoint)
                return
            break
        except socket.timeout:
            continue  # a JVM too busy to answer (a long GC pause) is alive
        except Exception:
            log.debug("spark_lineage: the JVM watch stops", exc_info=True)
            return
        first = False
        opened = time.monotonic()
        _wait_for_close(connection)
        quick_closes = quick_closes + 1 if time.monotonic() - opened < 1.0 else 0
        if quick_closes >= _QUICK_CLOSES:
            log.debug("spark_lineage: the gateway keeps closing the JVM watch's connection: it stops")
            return
    log.debug("spark_lineage: the JVM at %s:%d has ended", current.endpoint.address, current.endpoint.port)
    with _lock:
        current.ended = True
        callbacks = list(current.callbacks)
    for callback in callbacks:
        with contextlib.suppress(BaseException):
            callback()


def _connect(endpoint: _Endpoint) -> socket.socket:
    """A connection to the gateway, authenticated (py4j's protocol: ``A``, the token; ``!yv`` answers yes)."""
    try:
        connection = socket.create_connection((endpoint.address, endpoint.port), timeout=_CONNECT_TIMEOUT)
    except (ConnectionRefusedError, ConnectionResetError, ConnectionAbortedError) as error:
        raise _GoneError from error
    try:
        if endpoint.token is not None:
            connection.sendall(f"A\n{endpoint.token}\n".encode())
            answer = _read_line(connection)
            if not answer:
                raise _GoneError
            if not answer.startswith(b"!y"):
                raise ConnectionError(f"the gateway answered {answer[:40]!r} to the watch's authentication")
        connection.settimeout(None)
        return connection
    except (ConnectionResetError, ConnectionAbortedError, BrokenPipeError) as error:
        connection.close()
        raise _GoneError from error
    except BaseException:
        connection.close()
        raise


def _read_line(connection: socket.socket) -> bytes:
    """One line from ``connection`` (empty: it closed first)."""
    line = b""
    while not line.endswith(b"\n"):
        chunk = connection.recv(64)
        if not chunk:
            return b""
        line += chunk
    return line


def _wait_for_close(connection: socket.socket) -> None:
    """Block until the gateway closes ``connection`` (it never writes on it)."""
    with connection:
        while True:
            try:
                if not connection.recv(4096):
                    return
            except OSError:
                return
