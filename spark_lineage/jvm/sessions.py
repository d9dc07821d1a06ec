"""A Spark listener that hears the queries of every session of the driver, and Spark Connect's sessions.

Spark calls a session's query listeners only for that session's own queries, and a new session (a Spark
Connect client's, a ``newSession()``) starts with none. Every session's SQL executions pass over the
SparkContext's listener bus, though: :class:`SessionListener` hears them there, filtered in the JVM (as
:mod:`spark_lineage.jvm.listener` filters jobs), so Python is called once per query of a session that has no
listener of ours, and once per Connect session start, end and first operation.

What crosses is one text per event, its fields joined with :attr:`~spark_lineage.jvm.wire.Separator.FIELD`,
the first naming its kind (:class:`~spark_lineage.jvm.wire.SessionEventKind`); :func:`read_session_event` reads
it into plain data (:mod:`spark_lineage.plan`). The fields of each kind, in order:

- ``query``: execution id, end time (ms), execution name (the ``funcName`` query listeners get), duration (ns),
  the server session's UUID, ``true`` when the query failed, then the job tags its execution started with,
  joined with :data:`~spark_lineage.jvm.wire.ITEM_SEP` (:attr:`~spark_lineage.jvm.wire.Separator.UNSET` when
  its start was not heard). The end event comes with it, on the side: the worker reads its ``QueryExecution``
  and failure from it;
- ``started`` and ``closed``: the Connect session's id, its user id, the time (ms);
- ``client``: the same three, then the client's user agent, at the first operation of each Connect session.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from spark_lineage import costs
from spark_lineage.costs import Stage
from spark_lineage.jvm.listener import BusListener, ListenerProxyBuilder
from spark_lineage.jvm.spark import PendingQuery
from spark_lineage.jvm.values import JvmClasses, release
from spark_lineage.jvm.wire import ITEM_SEP, Separator, SessionEventKind
from spark_lineage.plan import ConnectClient, ConnectSessionEnded, ConnectSessionStarted, QueryOrigin

log = logging.getLogger(__name__)

_EXECUTION_START = "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart"
_EXECUTION_END = "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd"
_QUERY_EXECUTION = "org.apache.spark.sql.execution.QueryExecution"
_LISTENER_MANAGER = "org.apache.spark.sql.util.ExecutionListenerManager"
_CONNECT = "org.apache.spark.sql.connect.service."
_SESSION_STARTED = _CONNECT + "SparkListenerConnectSessionStarted"
_SESSION_CLOSED = _CONNECT + "SparkListenerConnectSessionClosed"
_OPERATION_STARTED = _CONNECT + "SparkListenerConnectOperationStarted"
_PLAN_REQUEST = "org.apache.spark.connect.proto.ExecutePlanRequest"
_OPERATION_TAG = re.compile(
    r"SparkConnect_OperationTag_User_(?P<user>.*)_Session_(?P<session>[^_]+)_Operation_(?P<op>.+)"
)
_SESSION_TAG = re.compile(r"SparkConnect_SessionTag_User_.*_Session_(?P<session>[^_]+)_Tag_(?P<tag>.+)")


@dataclass
class PendingSessionEvent:
    """What the listener hands to the worker: the text, and for a query the end event (nothing read yet)."""

    text: str
    event: Any = None


class SessionSink:
    """The Python end of the session listener: queues what the JVM passes and returns. Never raises."""

    def __init__(self, submit: Callable[[PendingSessionEvent], object]) -> None:
        self._submit = submit
        self.calls = 0

    def accept(self, text: Any, event: Any) -> None:
        self.calls += 1
        try:
            with costs.stage(Stage.LISTENER):
                self._submit(PendingSessionEvent(str(text), event))
        except BaseException:
            log.debug("spark_lineage could not queue a session event", exc_info=True)

    class Java:
        implements = ["java.util.function.BiConsumer"]


class OurListeners:
    """What the session listener of one JVM leaves alone, as JVM sets it asks: the sessions that call a query
    listener of ours (which reports them), and the sessions whose lineage was turned off."""

    def __init__(self, classes: JvmClasses) -> None:
        collections = classes("java.util.Collections")
        self.jvm_set = collections.synchronizedSet(collections.newSetFromMap(classes("java.util.IdentityHashMap")()))
        """Our query listeners, by identity: asking a Python listener's ``equals`` would call into Python."""
        self.muted = classes("java.util.concurrent.ConcurrentHashMap").newKeySet()
        """The UUIDs of the sessions whose lineage was turned off (``disable()``): per-session control holds."""

    # py4j hands both sets over as Python sets whose ``remove`` and ``discard`` raise for what is not there:
    # ``_remove`` is the Java method.
    def add(self, handle: Any, session_key: str) -> None:
        self.jvm_set.add(handle)
        self.muted._remove(session_key)

    def discard(self, handle: Any, session_key: str) -> None:
        self.jvm_set._remove(handle)
        self.muted.add(session_key)


_our_listeners: dict[int, OurListeners] = {}


def our_listeners(gateway: Any, classes: JvmClasses) -> OurListeners:
    """The set of this gateway's JVM (one per SparkContext's gateway, made on first use)."""
    found = _our_listeners.get(id(gateway))
    if found is None:
        found = _our_listeners[id(gateway)] = OurListeners(classes)
    return found


class SessionListener(BusListener):
    """The session listener of one SparkContext."""

    def _build(self, sink: Any) -> Any:
        return _SessionListenerBuilder(self._gateway, self._classes).build(
            sink, our_listeners(self._gateway, self._classes)
        )


class _SessionListenerBuilder(ListenerProxyBuilder):
    """Composes the session listener's ``onOtherEvent``."""

    def build(self, sink: Any, ours: OurListeners) -> Any:
        starts = self._classes("java.util.concurrent.ConcurrentHashMap")()
        """Job tags by execution id, from an execution's start until its end."""
        seen = self._classes("java.util.concurrent.ConcurrentHashMap").newKeySet()
        """Connect sessions whose first operation was passed on."""
        cases = [
            (self._is(_EXECUTION_START), self._on_execution_start(starts)),
            (self._is(_EXECUTION_END), self._on_execution_end(sink, ours, starts)),
        ]
        cases += self._connect_cases(sink, seen)
        return self.proxy({"onOtherEvent": self._choose(cases, self._ignore())}, "spark_lineage session listener")

    def _on_execution_start(self, starts: Any) -> Any:
        """``(start) -> void``: keep the execution's job tags until its end."""
        put = self.mh.insertArguments(
            self._method("java.util.Map", "put", "java.lang.Object", "java.lang.Object"), 0, self._objects(starts)
        )
        tags = self._after(
            self._method(_EXECUTION_START, "jobTags"),
            self.mh.insertArguments(
                self._method("scala.collection.immutable.Set", "mkString", "java.lang.String"),
                1,
                self._objects(ITEM_SEP),
            ),
        )
        keep = self.mh.filterArguments(
            put, 0, self._handles(self._boxed(self._method(_EXECUTION_START, "executionId")), self._as_object(tags))
        )
        return self._void(self.mh.permuteArguments(keep, self._method_type(self.OBJ, self.OBJ), self._ints(0, 0)))

    def _on_execution_end(self, sink: Any, ours: OurListeners, starts: Any) -> Any:
        """``(end) -> void``: forget the execution's tags; pass on a query of a session none of our query
        listeners hears and whose lineage was not turned off, with its tags."""
        end = _EXECUTION_END
        session_class = str(
            self._classes.java_class(_QUERY_EXECUTION)
            .getMethod("sparkSession", self._types())
            .getReturnType()
            .getName()
        )
        session = self._after(self._method(end, "qe"), self._method(_QUERY_EXECUTION, "sparkSession"))
        listeners = self._after(
            self._after(session, self._method(session_class, "listenerManager")),
            self._method(_LISTENER_MANAGER, "listListeners"),
        )
        as_list = self._after(listeners, self._method("java.util.Arrays", "asList", "[Ljava.lang.Object;"))
        disjoint = self.mh.insertArguments(
            self._method("java.util.Collections", "disjoint", "java.util.Collection", "java.util.Collection"),
            0,
            self._objects(ours.jvm_set),
        )
        uuid = self._after(session, self._method(session_class, "sessionUUID"))
        muted = self._after(
            uuid,
            self.mh.insertArguments(
                self._method("java.util.Set", "contains", "java.lang.Object"), 0, self._objects(ours.muted)
            ),
        )
        none_of_ours = self.mh.guardWithTest(muted, self._constant(False), self._after(as_list, disjoint))
        named = self._after(self._method(end, "executionName"), self._method("scala.Option", "isDefined"))
        has_query = self._after(
            self._method(end, "qe"), self._method("java.util.Objects", "nonNull", "java.lang.Object")
        )
        reported = self.mh.guardWithTest(
            named, self.mh.guardWithTest(has_query, none_of_ours, self._constant(False)), self._constant(False)
        )
        name = self._string(
            self._after(self._method(end, "executionName"), self._method("scala.Option", "get")), "java.lang.Object"
        )
        failed = self._string(
            self._after(self._method(end, "executionFailure"), self._method("scala.Option", "isDefined")), "boolean"
        )
        base = self._joined(
            self._text(SessionEventKind.QUERY.value),
            self._string(self._method(end, "executionId"), "long"),
            self._string(self._method(end, "time"), "long"),
            name,
            self._string(self._method(end, "duration"), "long"),
            uuid,
            failed,
        )
        tags_text = self.mh.insertArguments(
            self._method("java.util.Objects", "toString", "java.lang.Object", "java.lang.String"),
            1,
            self._objects(Separator.UNSET.value),
        )
        sequence = self._classes.java_class("java.lang.CharSequence")
        join = self._method("java.lang.String", "join", "java.lang.CharSequence", "[Ljava.lang.CharSequence;")
        two = self.mh.insertArguments(
            join.asCollector(self._classes.java_class("[Ljava.lang.CharSequence;"), 2),
            0,
            self._objects(Separator.FIELD.value),
        )
        # (event, tags) -> text, then (tags, event) -> text
        text = self.mh.filterArguments(
            two,
            0,
            self._handles(
                base.asType(base.type().changeReturnType(sequence)),
                tags_text.asType(tags_text.type().changeReturnType(sequence)),
            ),
        )
        text = self.mh.permuteArguments(
            text.asType(self._method_type(self.OBJ, self.OBJ, self.OBJ)),
            self._method_type(self.OBJ, self.OBJ, self.OBJ),
            self._ints(1, 0),
        )
        accept = self.mh.insertArguments(
            self._method("java.util.function.BiConsumer", "accept", "java.lang.Object", "java.lang.Object"),
            0,
            self._objects(sink),
        )
        send = self.mh.foldArguments(self.mh.dropArguments(accept, 1, self._types(self.OBJ)), text)
        body = self.mh.guardWithTest(
            self.mh.dropArguments(reported, 0, self._types(self.OBJ)),
            send,
            self.mh.empty(self._method_type(self.VOID, self.OBJ, self.OBJ)),
        )
        forget = self._after(
            self._boxed(self._method(end, "executionId")),
            self.mh.insertArguments(
                self._method("java.util.Map", "remove", "java.lang.Object"), 0, self._objects(starts)
            ),
        )
        return self.mh.foldArguments(body, forget)

    def _connect_cases(self, sink: Any, seen: Any) -> list[tuple[Any, Any]]:
        """The Connect session events, where Spark Connect's classes are there to hear them."""
        try:
            accept = self.mh.insertArguments(self._accept(sink), 1, self._objects(None))
            cases = []
            for kind, event_class in (
                (SessionEventKind.STARTED, _SESSION_STARTED),
                (SessionEventKind.CLOSED, _SESSION_CLOSED),
            ):
                text = self._as_object(self._joined(self._text(kind.value), *self._session_fields(event_class)))
                passed_on = self.mh.filterArguments(accept, 0, self._handles(text))
                if kind is SessionEventKind.CLOSED:
                    passed_on = self._then(self._void(self._seen(seen, event_class, "remove")), passed_on)
                cases.append((self._is(event_class), passed_on))
            client = self._as_object(
                self._joined(
                    self._text(SessionEventKind.CLIENT.value),
                    *self._session_fields(_OPERATION_STARTED),
                    self._client_type(),
                )
            )
            first = self.mh.guardWithTest(
                self._seen(seen, _OPERATION_STARTED, "add"),
                self.mh.filterArguments(accept, 0, self._handles(client)),
                self._ignore(),
            )
            cases.append((self._is(_OPERATION_STARTED), first))
            return cases
        except Exception:
            log.debug("spark_lineage: no Spark Connect session events to listen to", exc_info=True)
            return []

    def _session_fields(self, event_class: str) -> list[Any]:
        return [
            self._method(event_class, "sessionId"),
            self._method(event_class, "userId"),
            self._string(self._method(event_class, "eventTime"), "long"),
        ]

    def _seen(self, seen: Any, event_class: str, operation: str) -> Any:
        """``(event) -> boolean``: add the event's session id to ``seen``, or remove it."""
        return self._after(
            self._method(event_class, "sessionId"),
            self.mh.insertArguments(
                self._method("java.util.Set", operation, "java.lang.Object"), 0, self._objects(seen)
            ),
        )

    def _client_type(self) -> Any:
        """``(operation started) -> String``: the client's user agent, empty where the event has no request."""
        empty = self.mh.dropArguments(self.mh.constant(self.STR, ""), 0, self._types(self.OBJ))
        try:
            request = self._after(self._method(_OPERATION_STARTED, "planRequest"), self._method("scala.Option", "get"))
            client = self._after(request, self._method(_PLAN_REQUEST, "getClientType"))
            defined = self._after(
                self._method(_OPERATION_STARTED, "planRequest"), self._method("scala.Option", "isDefined")
            )
            return self.mh.guardWithTest(defined, client, empty)
        except Exception:  # noqa: BLE001 - an older event without the request
            return empty

    def _text(self, value: str) -> Any:
        """``(event) -> String``: ``value``."""
        return self.mh.dropArguments(self.mh.constant(self.STR, value), 0, self._types(self.OBJ))


def read_session_event(
    pending: PendingSessionEvent,
) -> PendingQuery | ConnectSessionStarted | ConnectSessionEnded | ConnectClient | None:
    """What a text the session listener passed says, as plain data; a query as the :class:`PendingQuery` the
    query listener would have given (its end event read: one or two round trips)."""
    fields = pending.text.split(Separator.FIELD.value)
    kind = SessionEventKind(fields[0])
    if kind is SessionEventKind.QUERY:
        event, pending.event = pending.event, None
        tags = () if fields[7] == Separator.UNSET.value else tuple(tag for tag in fields[7].split(ITEM_SEP) if tag)
        try:
            exception = event.executionFailure().get() if fields[6] == "true" else None
            query_execution = event.qe()
        finally:
            release(event)  # it holds the query's execution: the query keeps its own reference, released once read
        return PendingQuery(
            fields[3],
            query_execution,
            int(fields[2]),
            duration_ns=None if exception is not None else int(fields[4]),
            exception=exception,
            origin=query_origin(fields[5], tags),
        )
    session_id, user_id, time_ms = fields[1], fields[2], int(fields[3])
    if kind is SessionEventKind.STARTED:
        return ConnectSessionStarted(session_id, user_id, time_ms)
    if kind is SessionEventKind.CLOSED:
        return ConnectSessionEnded(session_id, user_id, time_ms)
    return ConnectClient(session_id, user_id, time_ms, fields[4] or None)


def query_origin(session_uuid: str, tags: tuple[str, ...]) -> QueryOrigin:
    """Which session ran a query, from its server session's UUID and its execution's job tags: a Spark Connect
    operation's tag names the Connect session, its user and the operation; the client's own tags
    (``spark.addTag``) are session tags."""
    connect_session = user = operation = None
    client_tags = []
    for tag in tags:
        operation_tag = _OPERATION_TAG.fullmatch(tag)
        if operation_tag:
            user, connect_session, operation = operation_tag.group("user", "session", "op")
            continue
        session_tag = _SESSION_TAG.fullmatch(tag)
        if session_tag:
            client_tags.append(session_tag.group("tag"))
    return QueryOrigin(session_uuid, connect_session, user, operation, tuple(sorted(client_tags)))
