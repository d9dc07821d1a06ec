"""A run per Spark Connect session, under the client's own identity, the parent of its queries' runs.

The run's START carries the session's start time, and is sent with its first reported query: only then are
the client's settings known (a client sets them after its session began). A session that reports no query
has no run. The run ends COMPLETE when the session closes or expires, and ABORT when the server stops with the
session open.

Each session's settings are read again for each of its queries: a client may set its parent or name between
them. The session's run keeps those it started with. At most :data:`SESSIONS_KEPT` sessions are kept; a
closed session is forgotten at once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from openlineage.client.event_v2 import RunEvent, RunState

from spark_lineage import naming
from spark_lineage.config import ConfigError, LineageConfig, ParentJob
from spark_lineage.connect.identity import CLIENT_KEYS, ClientSettings, client_settings, session_config
from spark_lineage.events import EventBuilder, new_run_id
from spark_lineage.facets import PRODUCER, SPARK_CONNECT_FACET, SparkConnectRunFacet
from spark_lineage.plan import ConnectClient, ConnectSessionEnded, ConnectSessionStarted, QueryOrigin, SessionInfo

log = logging.getLogger("spark_lineage")

SESSIONS_KEPT = 10_000
"""Open sessions kept at most; beyond, the oldest is forgotten, its run (if started) ended ABORT."""
SESSION_JOB_SUFFIX = "connect_session"
"""A session's run is named after the client's ``appName``; without one, ``<server app>.connect_session``."""


def session_run_job_name(client_app: str | None, server_app: str | None, server_job: str) -> str:
    """The job of a Connect session's run: the client's ``appName`` when it set one of its own, else
    ``<server app>.connect_session`` (``server_job``: the server application's job name)."""
    if client_app and client_app != server_app:
        return naming.normalize_job_name(client_app) or server_job
    return f"{server_job}.{SESSION_JOB_SUFFIX}"


@dataclass
class _Session:
    session_id: str
    user: str
    started_ms: int
    user_agent: str | None = None
    run: EventBuilder | None = None
    """The builder of the session's run, once its START was sent."""
    settings: ClientSettings | None = None
    builder: EventBuilder | None = None
    """The builder of its queries' runs, for ``settings``."""
    refused_said: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class QueryIdentity:
    """How a Connect session's query is reported: built by ``builder`` (whose application run is the session's
    run), with ``run_facets`` on every event, after ``first`` (the session run's START, when not sent yet)."""

    builder: EventBuilder
    run_facets: dict[str, SparkConnectRunFacet]
    first: list[RunEvent]


class ConnectSessions:
    """The Connect sessions of one server, as the analysis worker hears of them."""

    def __init__(self, server: EventBuilder, server_session: SessionInfo) -> None:
        self._server = server
        self._server_session = server_session
        self._sessions: dict[str, _Session] = {}
        self._evicted: list[RunEvent] = []
        """The ends of the runs of sessions forgotten to make room, not yet handed out."""
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._sessions)

    @property
    def _server_app(self) -> ParentJob:
        return ParentJob(self._server.config.namespace, self._server.app_job_name, self._server.app_run_id)

    def started(self, event: ConnectSessionStarted) -> list[RunEvent]:
        """The ABORT of the run of a session forgotten to make room, if any."""
        self._session(event.session_id, event.user, event.time_ms)
        return self._take_evicted()

    def client(self, event: ConnectClient) -> list[RunEvent]:
        self._session(event.session_id, event.user, event.time_ms).user_agent = event.user_agent
        return self._take_evicted()

    def ended(self, event: ConnectSessionEnded) -> list[RunEvent]:
        """The session's run's COMPLETE, if it started; the session is forgotten."""
        with self._lock:
            session = self._sessions.pop(event.session_id, None)
        if session is None or session.run is None:
            return []
        return [self._end(session, RunState.COMPLETE, event.time_ms)]

    def end_all(self, state: RunState, time_ms: int) -> list[RunEvent]:
        """The terminal event of every session run still open (the server is stopping)."""
        with self._lock:
            sessions, self._sessions = list(self._sessions.values()), {}
        ends = [self._end(session, state, time_ms) for session in sessions if session.run is not None]
        return [*self._take_evicted(), *ends]

    def for_query(
        self, origin: QueryOrigin, query_start_ms: int, session_conf: Callable[[], Mapping[str, str]]
    ) -> QueryIdentity:
        """How a query of a Connect session is reported; ``session_conf`` reads the session's confs."""
        assert origin.connect_session is not None
        session = self._session(origin.connect_session, origin.user or "", query_start_ms)
        settings = client_settings(session_conf(), self._server_session.conf)
        self._say_refused(session, settings.refused)
        if session.builder is None or settings.taken != (session.settings.taken if session.settings else ()):
            session.settings = settings
            session.builder = self._builder(session, settings)
        first: list[RunEvent] = self._take_evicted()
        if session.run is None:
            session.run = session.builder
            first.append(
                session.run.application_event(
                    RunState.START, session.started_ms, run_facets={SPARK_CONNECT_FACET: self._session_facet(session)}
                )
            )
        facet = SparkConnectRunFacet(
            sessionId=session.session_id,
            userId=session.user,
            operationId=origin.operation,
            tags=list(origin.tags),
            producer=PRODUCER,
        )
        return QueryIdentity(session.builder, {SPARK_CONNECT_FACET: facet}, first)

    # --- pieces ------------------------------------------------------------------------------------------------

    def _take_evicted(self) -> list[RunEvent]:
        with self._lock:
            evicted, self._evicted = self._evicted, []
        return evicted

    def _session(self, session_id: str, user: str, time_ms: int) -> _Session:
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                session = self._sessions[session_id] = _Session(session_id, user, time_ms)
                while len(self._sessions) > SESSIONS_KEPT:
                    evicted = self._sessions.pop(next(iter(self._sessions)))
                    if evicted.run is not None:
                        self._evicted.append(self._end(evicted, RunState.ABORT, time_ms))
            return session

    def _builder(self, session: _Session, settings: ClientSettings) -> EventBuilder:
        """The builder for the session's queries: its run id is the session run's, once that started."""
        try:
            config = session_config(self._server.config, settings.taken, self._server_app)
        except ConfigError as error:
            self._say_once(session, f"error:{error}", f"its settings cannot be used, so the server's are: {error}")
            config = session_config(self._server.config, (), self._server_app)
        if session.run is not None:  # the run started: it keeps its id and its name
            return EventBuilder(
                config, self._server_session, session.run.app_run_id, run_job_name=session.run.run_job_name
            )
        return EventBuilder(
            config, self._server_session, new_run_id(session.started_ms), run_job_name=self._run_job_name(config)
        )

    def _run_job_name(self, config: LineageConfig) -> str:
        return session_run_job_name(config.app_name, self._server.config.app_name, self._server.app_job_name)

    def _end(self, session: _Session, state: RunState, time_ms: int) -> RunEvent:
        assert session.run is not None
        return session.run.application_event(
            state, time_ms, run_facets={SPARK_CONNECT_FACET: self._session_facet(session)}
        )

    @staticmethod
    def _session_facet(session: _Session) -> SparkConnectRunFacet:
        return SparkConnectRunFacet(
            sessionId=session.session_id, userId=session.user, userAgent=session.user_agent, producer=PRODUCER
        )

    def _say_refused(self, session: _Session, refused: tuple[str, ...]) -> None:
        for key in refused:
            self._say_once(
                session,
                key,
                f"it set {key}, which a client may not set: ignored (a client may set "
                f"{', '.join(sorted(CLIENT_KEYS))} and job.owners.<type>)",
            )

    @staticmethod
    def _say_once(session: _Session, key: str, what: str) -> None:
        if key in session.refused_said:
            return
        session.refused_said.add(key)
        log.warning("spark_lineage: Spark Connect session %s of user %r: %s", session.session_id, session.user, what)
