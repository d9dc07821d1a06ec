"""How values cross from the JVM: joined strings parsed in Python, cached class lookups, and error text.

Every module of the edge uses these; none of them knows what a Spark plan means.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from typing import Any

from spark_lineage.jvm.wire import ITEM_SEP, KV_SEP

_METRIC_VALUE = re.compile(r"value: (-?\d+)\)\s*$")


class JavaCallback:
    """A Python object Spark holds as a Java listener: py4j proxies need these to behave in Java collections
    (Spark keeps its listeners in lists), and the name tells ours apart when they come back as proxies."""

    def __init__(self, name: str) -> None:
        self._name = name

    def equals(self, other: Any) -> bool:
        return other is self

    def hashCode(self) -> int:
        return id(self) & 0x7FFFFFFF

    def toString(self) -> str:
        return self._name


@cache
def _statics_once() -> tuple[Any, Any]:
    """py4j's ``JavaClass``, and a subclass that asks the JVM what each static method name is only once: py4j's
    own asks on every access, which doubles the cost of a static call (composing a tree reader makes hundreds of
    them). Static field values are not kept, as they may change. Made on first use: py4j comes with PySpark,
    which a pyiceberg-only install lacks."""
    from py4j.java_gateway import JavaClass, JavaMember

    class StaticsOnce(JavaClass):  # type: ignore[misc]  # py4j has no type hints
        def __getattr__(self, name: str) -> Any:
            member = super().__getattr__(name)
            if isinstance(member, (JavaMember, JavaClass)):
                self.__dict__[name] = member
            return member

    return JavaClass, StaticsOnce


class JvmClasses:
    """Classes and packages of the JVM, looked up once each.

    Every ``jvm.a.b.C`` attribute chain costs a py4j round trip to find out whether ``C`` is a class; this
    keeps what it found, so that a per-query or per-report path never pays for the same lookup twice. The
    classes it gives look up each of their static methods once too.
    """

    def __init__(self, jvm: Any) -> None:
        self._jvm = jvm
        self._found: dict[str, Any] = {}

    def __call__(self, dotted_name: str) -> Any:
        """``jvm.org.apache.x.Y`` (a py4j ``JavaClass``, or a ``JavaPackage`` for a package name)."""
        found = self._found.get(dotted_name)
        if found is None:
            found = self._jvm
            for part in dotted_name.split("."):
                found = getattr(found, part)
            java_class, statics_once = _statics_once()
            if isinstance(found, java_class):
                found = statics_once(found._fqn, found._gateway_client)
            self._found[dotted_name] = found
        return found

    def java_class(self, dotted_name: str) -> Any:
        """The ``java.lang.Class`` object itself, as method handles and reflection need it."""
        key = "class:" + dotted_name
        found = self._found.get(key)
        if found is None:
            try:
                found = self("java.lang.Class").forName(dotted_name)
            except Exception:  # noqa: BLE001 - a class of a jar added at start-up (spark.jars.packages: Delta)
                # is only visible to Spark's class loader, which py4j's threads have as their context loader.
                loader = self("java.lang.Thread").currentThread().getContextClassLoader()
                found = self("java.lang.Class").forName(dotted_name, True, loader)
            self._found[key] = found
        return found


def parse_map(joined: str) -> dict[str, str]:
    """A Scala map joined JVM-side with ``mkString(ITEM_SEP)``, as a dict."""
    result: dict[str, str] = {}
    if not joined:
        return result
    for item in joined.split(ITEM_SEP):
        key, sep, value = item.partition(KV_SEP)
        if sep:
            result[key] = value
    return result


def parse_metrics(joined: str) -> dict[str, int]:
    """A map of ``SQLMetric`` joined JVM-side, as ``{name: value}``."""
    metrics: dict[str, int] = {}
    for key, value in parse_map(joined).items():
        match = _METRIC_VALUE.search(value)
        if match:
            metrics[key] = int(match.group(1))
    return metrics


def message(error: BaseException) -> str:
    """The first line of an error, bounded: what goes into logs and extraction-error facets."""
    text = str(error).strip().splitlines()
    return text[0][:500] if text else type(error).__name__


def safe(read: Callable[[], Any]) -> Any:
    """``read()``, or ``None`` when the JVM will not answer: for optional facts."""
    try:
        return read()
    except Exception:  # noqa: BLE001 - optional facts
        return None


def release(*objects: Any) -> None:
    """Let the JVM drop Python's references to ``objects`` now, a round trip each (``None``s are skipped), and
    never later: py4j's finalizer thread would release them up to a second after Python lets go (it looks once a
    second). Meanwhile a young collection moves what they hold to the old generation: a finished query's
    ``QueryExecution`` holds its plans and its broadcast relations (tens of MB each, pinned in the block manager
    until the broadcast is collected), which only a concurrent marking cycle then frees. The objects cannot be
    used after this. Never raises."""
    for value in objects:
        target_id = getattr(value, "_target_id", None)
        client = getattr(value, "_gateway_client", None)
        if not isinstance(target_id, str) or client is None:
            continue
        try:
            _release(client, target_id)
        except Exception:  # noqa: BLE001 - py4j's finalizer releases it later, as it would have
            continue


def _release(client: Any, target_id: str) -> None:
    from py4j.clientserver import JavaClient
    from py4j.finalizer import ThreadSafeFinalizer
    from py4j.protocol import smart_decode

    # py4j's key for the object's finalizer: removed, so that no second release follows when Python collects it.
    ThreadSafeFinalizer.remove_finalizer(smart_decode(client.address) + smart_decode(client.port) + target_id)
    if isinstance(client, JavaClient):  # pinned threads: releases are queued for the finalizer thread by default
        client.garbage_collect_object(target_id, False)
    else:
        client.garbage_collect_object(target_id)


def call(target: Any, method: str, *args: Any) -> Any:
    """``target.method(*args)``, one round trip, without the layers py4j's ``JavaMember`` and PySpark wrap each
    call in (PySpark's argument converters, each asked of every argument, and its exception translation): about
    35 µs of Python CPU where those take 110. For the calls made for every query. ``args``: JVM objects, text,
    numbers, booleans and ``None``; what the JVM throws raises py4j's ``Py4JJavaError``."""
    from py4j.protocol import CALL_COMMAND_NAME, END_COMMAND_PART, get_command_part, get_return_value

    client, target_id = target._gateway_client, target._target_id
    parts = [get_command_part(argument) for argument in args]
    command = f"{CALL_COMMAND_NAME}{target_id}\n{method}\n{''.join(parts)}{END_COMMAND_PART}"
    return get_return_value(client.send_command(command), client, target_id, method)


def answers_at_once(gateway: Any, classes: JvmClasses) -> bool:
    """Have the JVM send the answers to the calling thread's calls without waiting: Nagle's algorithm on the
    JVM's end of py4j's connection holds the end of an answer longer than a socket write (8 KiB) until the
    first part is acknowledged, and the receiving end acknowledges late (40 ms). Returns whether it is so:
    with PySpark's pinned threads, each Python thread has a connection of its own, found among the gateway
    server's by the port it connects from; otherwise long answers must be read in pieces."""
    try:
        connection = gateway._gateway_client.get_thread_connection()
        if connection is None:
            return False
        port = int(connection.socket.getsockname()[1])
        fields = classes("org.apache.commons.lang3.reflect.FieldUtils")
        connections = fields.readField(gateway.java_gateway_server, "connections", True).toArray()
        for index in range(len(connections)):
            socket = connections[index].getSocket()
            if int(socket.getPort()) == port:
                socket.setTcpNoDelay(True)
                return True
    except Exception:  # noqa: BLE001 - py4j's classic mode, or another py4j: answers come in pieces
        return False
    return False


def unwrap_option(option: Any, evidence: Any) -> Any:
    """A Scala ``Option`` as its value or ``None``, in one call (``orNull`` with the evidence it needs)."""
    if option is None or isinstance(option, (str, int, float, bool)):
        return option
    return option.orNull(evidence)
