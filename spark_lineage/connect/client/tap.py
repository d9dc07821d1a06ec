"""The one place a Spark Connect client's own code is touched: where its actions are sent and their answers end.

Every action a PySpark Connect client runs (a write, ``spark.sql``, a ``collect``) goes through its client's
``_execute_and_fetch_as_iterator``: one ``ExecutePlanRequest`` in, a stream of responses out (PySpark 3.5, 4.x
and ``pyspark-client`` alike). :class:`ClientTap` wraps that method on one session's client (on the instance:
other sessions are untouched) and tells an :class:`ActionObserver` when a request is sent, and when its
stream ends, with the error if it raised. The observer is only told: whatever it raises is swallowed, and the
stream is the client's own, unchanged.

An action's run names the operation id the server runs it under. PySpark 4.3 gives every request a random
UUID when it builds it; older clients give one only with reattachable execution (the default), a moment
after the method is entered, and otherwise leave it to the server. The tap gives a request that has none its
UUID just before, as PySpark 4.3 does, so the observer knows the id when the request is sent.

Requests lineage sends itself (a table's location, looked up on the worker thread) are not observed: they run
inside :meth:`ClientTap.unobserved`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, Protocol

log = logging.getLogger("spark_lineage")

EXECUTE_METHOD = "_execute_and_fetch_as_iterator"
"""The client method every action's request goes through (``SparkConnectClient``, PySpark 3.5 and 4.x)."""


class ActionObserver(Protocol):
    """What is told of a client's actions; neither call may block (they run on the user's thread)."""

    def sent(self, request: Any, time_ms: int) -> object:
        """A request was sent; returns a token for its end."""
        ...

    def ended(self, token: object, time_ms: int, error: BaseException | None) -> None:
        """The request's response stream ended: completely, or with ``error``."""
        ...


class ClientTap:
    """Observes the actions of one Connect client session's client."""

    def __init__(self, client: Any, observer: ActionObserver, on_error: Callable[[str, BaseException], None]) -> None:
        self._client = client
        self._observer = observer
        self._on_error = on_error
        self._local = threading.local()
        self.installed = False

    def install(self) -> bool:
        """Wrap the client's method; False (and nothing changed) for a client without it."""
        original = getattr(self._client, EXECUTE_METHOD, None)
        if original is None or getattr(original, "_spark_lineage_tap", None) is not None:
            return False
        tap = self

        def execute(request: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
            token = tap._sent(request)
            try:
                yield from original(request, *args, **kwargs)
            except GeneratorExit:  # the caller stopped reading (a ``take``, an iterator let go): no failure
                tap._ended(token, None)
                raise
            except BaseException as error:
                tap._ended(token, error)
                raise
            tap._ended(token, None)

        execute._spark_lineage_tap = self  # type: ignore[attr-defined]
        setattr(self._client, EXECUTE_METHOD, execute)
        self.installed = True
        return True

    def uninstall(self) -> None:
        """Give the client its own method back (when it is still ours)."""
        current = self._client.__dict__.get(EXECUTE_METHOD)
        if getattr(current, "_spark_lineage_tap", None) is self:
            with contextlib.suppress(Exception):
                delattr(self._client, EXECUTE_METHOD)
        self.installed = False

    @contextlib.contextmanager
    def unobserved(self) -> Iterator[None]:
        """Requests this thread sends meanwhile are lineage's own: not observed."""
        self._local.depth = getattr(self._local, "depth", 0) + 1
        try:
            yield
        finally:
            self._local.depth -= 1

    def _name_operation(self, request: Any) -> None:
        """Give ``request`` the operation id PySpark would give it (4.3: when building it; before: next, when its
        execution is reattachable)."""
        try:
            if not request.operation_id:
                request.operation_id = str(uuid.uuid4())
        except Exception as error:  # noqa: BLE001 - the client then names it itself, as it would have
            self._on_error("naming a Spark Connect operation", error)

    def _sent(self, request: Any) -> object:
        if getattr(self._local, "depth", 0) or not self.installed:
            return None
        self._name_operation(request)
        try:
            return self._observer.sent(request, int(time.time() * 1000))
        except Exception as error:  # noqa: BLE001 - lineage never fails the client's call
            self._on_error("observing a Spark Connect request", error)
            return None

    def _ended(self, token: object, error: BaseException | None) -> None:
        if token is None:
            return
        try:
            self._observer.ended(token, int(time.time() * 1000), error)
        except Exception as failure:  # noqa: BLE001
            self._on_error("observing the end of a Spark Connect request", failure)
