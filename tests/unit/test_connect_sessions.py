"""Spark Connect sessions without a JVM: which session a query's job tags name, what a client may set, and the
run of each session as the parent of its queries' runs (the integration tests run the same on a real server)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from openlineage.client.event_v2 import RunEvent, RunState
from openlineage.client.serde import Serde

from spark_lineage.config import ConfigError, ParentJob, Tag, resolve
from spark_lineage.connect import sessions as connect_sessions
from spark_lineage.connect.identity import client_settings, session_config
from spark_lineage.connect.sessions import ConnectSessions
from spark_lineage.events import EventBuilder
from spark_lineage.jvm.sessions import PendingSessionEvent, query_origin, read_session_event
from spark_lineage.jvm.wire import Separator
from spark_lineage.lineage import DatasetLineage, QueryLineage
from spark_lineage.naming.identifiers import DatasetIdentifier
from spark_lineage.plan import (
    CapturedQuery,
    ConnectClient,
    ConnectSessionEnded,
    ConnectSessionStarted,
    QueryOrigin,
    SessionInfo,
)
from tests.support import validate_event

FIELD_SEP, UNSET = Separator.FIELD.value, Separator.UNSET.value
SESSION = "776920eb-952e-4ac3-bc5f-0568b68f9601"
SERVER_UUID = "181e290c-8b1f-46f0-9035-50f37f1e0a95"
OPERATION = "f348fd2b-4642-4128-a384-308c33c75ec0"
PARENT_RUN = "01890f3e-5c2b-7cc1-9f0e-3d0e2b6f1a2c"
ROOT_RUN = "01890f3e-5c2b-7cc1-9f0e-3d0e2b6f1a2d"
SERVER_CONF = {
    "spark.app.name": "Analytics Server",
    "spark.openlineage.namespace": "shared",
    "spark.openlineage.transport.type": "console",
}
TAGS = (
    f"SparkConnect_OperationTag_User_data_eng_Session_{SESSION}_Operation_{OPERATION}",
    f"SparkConnect_SessionTag_User_data_eng_Session_{SESSION}_Tag_nightly",
    f"SparkConnect_SessionTag_User_data_eng_Session_{SESSION}_Tag_team_a",
    f"spark-session-{SERVER_UUID}-execution-root-id-3",
    f"spark-session-{SERVER_UUID}",
)


def test_the_job_tags_name_the_connect_session_its_user_the_operation_and_the_clients_tags() -> None:
    origin = query_origin(SERVER_UUID, TAGS)
    assert origin == QueryOrigin(SERVER_UUID, SESSION, "data_eng", OPERATION, ("nightly", "team_a"))
    assert query_origin(SERVER_UUID, (f"spark-session-{SERVER_UUID}",)) == QueryOrigin(SERVER_UUID)


def test_the_session_listeners_texts_are_read_into_plain_data() -> None:
    def read(*fields: str) -> Any:
        return read_session_event(PendingSessionEvent(FIELD_SEP.join(fields)))

    assert read("started", SESSION, "ann", "1700000000000") == ConnectSessionStarted(SESSION, "ann", 1700000000000)
    assert read("closed", SESSION, "ann", "1700000000001") == ConnectSessionEnded(SESSION, "ann", 1700000000001)
    agent = "_SPARK_CONNECT_PYTHON spark/4.1.1 os/linux python/3.11.7"
    assert read("client", SESSION, "ann", "5", agent) == ConnectClient(SESSION, "ann", 5, agent)
    assert read("client", SESSION, "ann", "5", "") == ConnectClient(SESSION, "ann", 5, None)
    with pytest.raises(ValueError, match="'opened' is not a valid SessionEventKind"):
        read("opened", SESSION, "ann", "5")
    assert UNSET not in FIELD_SEP


def test_a_client_may_set_its_names_parents_tags_and_owners_and_nothing_else() -> None:
    session_conf = {
        **SERVER_CONF,
        "spark.openlineage.appName": "ann_etl",
        "spark.openlineage.parentJobName": "dag.task",
        "spark.openlineage.parentRunId": PARENT_RUN,
        "spark.openlineage.job.owners.team": "data",
        "spark.openlineage.transport.url": "http://elsewhere",
        "spark.openlineage.facets.disabled": "[spark_unknown]",
        "spark.openlineage.capturedProperties": "spark.hadoop.fs.s3a.secret.key",
        "spark.openlineage.transport.type": "http",
        "spark.sql.shuffle.partitions": "7",
    }
    settings = client_settings(session_conf, SERVER_CONF)
    assert settings.taken == (
        ("appName", "ann_etl"),
        ("job.owners.team", "data"),
        ("parentJobName", "dag.task"),
        ("parentRunId", PARENT_RUN),
    )
    assert settings.refused == (
        "spark.openlineage.capturedProperties",
        "spark.openlineage.facets.disabled",
        "spark.openlineage.transport.type",
        "spark.openlineage.transport.url",
    )
    # The server's own keys, as every session sees them, are nobody's to refuse.
    assert client_settings(SERVER_CONF, SERVER_CONF).refused == ()


SERVER_APP = ParentJob("shared", "analytics_server", "01890f3e-0000-7000-8000-000000000001")


def test_a_session_without_a_parent_of_its_own_is_a_child_of_the_servers_application_run() -> None:
    server = resolve({**SERVER_CONF, "spark.openlineage.job.tags": "env:prod"})
    config = session_config(server, (("job.tags", "team:a"),), SERVER_APP)
    assert (config.parent, config.root_parent) == (SERVER_APP, SERVER_APP)
    assert config.job_tags == (Tag("env", "prod"), Tag("team", "a"))
    assert config.transport == server.transport and config.namespace == "shared"


def test_a_clients_parent_and_root_parent_are_its_sessions() -> None:
    server = resolve(SERVER_CONF)
    taken = (
        ("namespace", "ann"),
        ("parentJobName", "dag.task"),
        ("parentRunId", PARENT_RUN),
        ("rootParentJobName", "dag"),
        ("rootParentRunId", ROOT_RUN),
    )
    config = session_config(server, taken, SERVER_APP)
    assert config.namespace == "ann"
    assert config.parent == ParentJob("ann", "dag.task", PARENT_RUN)
    assert config.root_parent == ParentJob("ann", "dag", ROOT_RUN)
    with pytest.raises(ConfigError, match=r"spark\.openlineage\.parentRunId='run-1' is not a UUID"):
        session_config(server, (("parentJobName", "dag.task"), ("parentRunId", "run-1")), SERVER_APP)


def _server() -> tuple[EventBuilder, SessionInfo]:
    session = SessionInfo("Analytics Server", "local-1", "4.1.1", "local[2]", None, conf=SERVER_CONF)
    return EventBuilder(resolve(SERVER_CONF), session, SERVER_APP.run_id), session


def _query(start_ms: int) -> tuple[CapturedQuery, QueryLineage]:
    query = CapturedQuery(func_name="command", start_ms=start_ms, end_ms=start_ms + 50, tree=None)
    output = DatasetLineage(DatasetIdentifier("file", "/data/out"))
    return query, QueryLineage(outputs=[output], job_suffix="data_out")


def _job(parent: dict[str, Any]) -> tuple[str, str]:
    return parent["job"]["namespace"], parent["job"]["name"]


def _json(event: RunEvent) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(Serde.to_json(event))
    validate_event(document)
    return document


def test_a_sessions_run_starts_with_its_first_query_and_is_the_parent_of_its_queries() -> None:
    server, info = _server()
    sessions = ConnectSessions(server, info)
    sessions.started(ConnectSessionStarted(SESSION, "data_eng", 1_000))
    sessions.client(ConnectClient(SESSION, "data_eng", 1_001, "_SPARK_CONNECT_PYTHON spark/4.1.1"))
    conf = {
        **SERVER_CONF,
        "spark.openlineage.appName": "Ann ETL",
        "spark.openlineage.parentJobName": "dag.task",
        "spark.openlineage.parentRunId": PARENT_RUN,
    }
    identity = sessions.for_query(query_origin(SERVER_UUID, TAGS), 2_000, lambda: conf)
    (start,) = [_json(event) for event in identity.first]
    assert (start["eventType"], start["eventTime"], start["job"]["name"]) == (
        "START",
        "1970-01-01T00:00:01.000+00:00",
        "ann_etl",
    )
    assert _job(start["run"]["facets"]["parent"]) == ("shared", "dag.task")
    assert start["run"]["facets"]["parent"]["run"]["runId"] == PARENT_RUN
    connect = start["run"]["facets"]["spark_connect"]
    assert {k: v for k, v in connect.items() if not k.startswith("_")} == {
        "sessionId": SESSION,
        "userId": "data_eng",
        "userAgent": "_SPARK_CONNECT_PYTHON spark/4.1.1",
    }
    query, lineage = _query(2_000)
    events = [_json(e) for e in identity.builder.query_events(query, lineage, run_facets=identity.run_facets)]
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
    for event in events:
        assert event["job"]["name"] == "ann_etl.command.data_out"
        assert event["run"]["facets"]["parent"]["run"]["runId"] == start["run"]["runId"]
        assert _job(event["run"]["facets"]["parent"]) == ("shared", "ann_etl")
        assert event["run"]["facets"]["parent"]["root"]["run"]["runId"] == PARENT_RUN
        connect = event["run"]["facets"]["spark_connect"]
        assert (connect["operationId"], connect["tags"]) == (OPERATION, ["nightly", "team_a"])

    # A second query of the same session: no second START of the session's run.
    again = sessions.for_query(query_origin(SERVER_UUID, TAGS), 3_000, lambda: conf)
    assert again.first == [] and again.builder.app_run_id == start["run"]["runId"]
    (end,) = [_json(event) for event in sessions.ended(ConnectSessionEnded(SESSION, "data_eng", 9_000))]
    assert (end["eventType"], end["run"]["runId"], end["job"]["name"]) == ("COMPLETE", start["run"]["runId"], "ann_etl")
    assert len(sessions) == 0


def test_a_session_without_an_app_name_is_named_after_the_server_and_aborted_when_it_stops() -> None:
    server, info = _server()
    sessions = ConnectSessions(server, info)
    identity = sessions.for_query(query_origin(SERVER_UUID, TAGS), 2_000, lambda: SERVER_CONF)
    (start,) = [_json(event) for event in identity.first]
    assert start["job"]["name"] == "analytics_server.connect_session"
    assert start["run"]["facets"]["parent"]["run"]["runId"] == SERVER_APP.run_id
    query, lineage = _query(2_000)
    first = _json(identity.builder.query_events(query, lineage, run_facets=identity.run_facets)[0])
    assert first["job"]["name"] == "analytics_server.command.data_out"
    # Its parent is the session's run, by that run's own job name.
    assert _job(first["run"]["facets"]["parent"]) == ("shared", "analytics_server.connect_session")
    assert first["run"]["facets"]["parent"]["run"]["runId"] == start["run"]["runId"]
    (abort,) = [_json(event) for event in sessions.end_all(RunState.ABORT, 5_000)]
    assert (abort["eventType"], abort["run"]["runId"]) == ("ABORT", start["run"]["runId"])
    # A session that reported nothing has no run to end.
    sessions.started(ConnectSessionStarted("another", "bob", 1))
    assert sessions.ended(ConnectSessionEnded("another", "bob", 2)) == []


def test_a_refused_key_is_said_once_per_session_naming_it_and_the_user(caplog: pytest.LogCaptureFixture) -> None:
    server, info = _server()
    sessions = ConnectSessions(server, info)
    conf = {**SERVER_CONF, "spark.openlineage.transport.url": "http://elsewhere", "spark.openlineage.parentRunId": "x"}
    caplog.set_level(logging.WARNING, logger="spark_lineage")
    for _ in range(3):
        sessions.for_query(query_origin(SERVER_UUID, TAGS), 2_000, lambda: conf)
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 2, lines
    assert lines[0].startswith(
        f"spark_lineage: Spark Connect session {SESSION} of user 'data_eng': it set "
        "spark.openlineage.transport.url, which a client may not set: ignored"
    )
    assert "its settings cannot be used, so the server's are: spark.openlineage.parentJobName must be set" in lines[1]


def test_sessions_kept_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connect_sessions, "SESSIONS_KEPT", 3)
    server, info = _server()
    sessions = ConnectSessions(server, info)
    for index in range(10):
        assert sessions.started(ConnectSessionStarted(f"s{index}", "u", index)) == []  # no run started yet
    assert len(sessions) == 3
    # A session whose run started and is then forgotten to make room has that run ended, not left open.
    origin = QueryOrigin(SERVER_UUID, "s9", "u", OPERATION)
    (start,) = sessions.for_query(origin, 20, lambda: SERVER_CONF).first
    for index in range(10, 13):
        evicted = sessions.started(ConnectSessionStarted(f"s{index}", "u", 30 + index))
    (abort,) = [_json(event) for event in evicted]
    assert (abort["eventType"], abort["run"]["runId"]) == ("ABORT", str(start.run.runId))
