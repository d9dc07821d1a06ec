"""Which Spark Connect client sessions this process serves itself, and which of their confs apply, without a JVM:
PySpark's objects stand in as fakes shaped as PySpark 4.0 to 4.3 have them."""

from __future__ import annotations

import logging
import sys
import types
from typing import Any

import pytest

from spark_lineage import activation
from spark_lineage.connect import local as connect_local


class FakeService:
    """``SparkConnectService$.MODULE$``."""

    def __init__(self, port: int, started: bool = True) -> None:
        self.port, self.is_started = port, started

    def started(self) -> bool:
        return self.is_started

    def localPort(self) -> int:
        return self.port


class FakeServer:
    """The classic session PySpark keeps (``_instantiatedSession``), with a JVM that runs ``service`` or none."""

    def __init__(self, service: FakeService | None) -> None:
        self._sc = types.SimpleNamespace(_jsc=object())
        self._jsparkSession = object()
        jvm: dict[str, Any] = {}
        if service is not None:
            jvm[connect_local.CONNECT_SERVICE] = types.SimpleNamespace(**{"MODULE$": service})
        self._jvm = types.SimpleNamespace(**jvm)


def connect_session(endpoint: str | None, conf: dict[str, str] | None = None, stopped: bool = False) -> Any:
    """A client session of ``pyspark.sql.connect.session``, connecting to ``endpoint`` (``host:port``; ``None``
    for a custom ChannelBuilder, which does not say)."""
    session_class = type("SparkSession", (), {"__module__": "pyspark.sql.connect.session"})
    session = session_class()
    builder = types.SimpleNamespace() if endpoint is None else types.SimpleNamespace(endpoint=endpoint)
    session._client = types.SimpleNamespace(_builder=builder)
    session.conf = types.SimpleNamespace(getAll=conf or {})
    session.is_stopped = stopped
    return session


@pytest.fixture()
def in_process(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Puts ``server`` where PySpark keeps its classic session; returns a function that does so."""

    def keep(server: FakeServer | None) -> None:
        module = types.ModuleType("pyspark.sql.session")
        module.SparkSession = types.SimpleNamespace(_instantiatedSession=server)  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "pyspark.sql.session", module)

    return keep


@pytest.mark.parametrize("endpoint", ["localhost:15002", "127.0.0.1:15002", "[::1]:15002"])
def test_a_client_of_the_port_this_process_serves_on_a_local_host_is_served_here(
    in_process: Any, endpoint: str
) -> None:
    server = FakeServer(FakeService(15002))
    in_process(server)
    assert connect_local.server_session(connect_session(endpoint)) is server


@pytest.mark.parametrize(
    ("server", "endpoint"),
    [
        (None, "localhost:15002"),  # a client-only process: no classic session
        (FakeServer(None), "localhost:15002"),  # a classic session, but no Connect service in its JVM (3.5)
        (FakeServer(FakeService(15002, started=False)), "localhost:15002"),  # the service did not start
        (FakeServer(FakeService(15002)), "localhost:15003"),  # another server on this machine
        (FakeServer(FakeService(15002)), "203.0.113.9:15002"),  # the same port on another host
        (FakeServer(FakeService(15002)), None),  # a custom ChannelBuilder: where it goes is not known
    ],
)
def test_any_other_client_is_served_elsewhere(in_process: Any, server: FakeServer | None, endpoint: str | None) -> None:
    in_process(server)
    assert connect_local.server_session(connect_session(endpoint)) is None


def test_a_stopped_server_serves_no_one(in_process: Any) -> None:
    server = FakeServer(FakeService(15002))
    server._sc._jsc = None  # what SparkContext.stop() leaves
    in_process(server)
    assert connect_local.server_session(connect_session("localhost:15002")) is None


def test_the_client_sessions_own_lineage_confs_apply_but_for_its_identity() -> None:
    client = connect_session(
        "localhost:15002",
        {
            "spark.openlineage.transport.type": "file",  # set on the client only
            "spark.openlineage.transport.location": "/tmp/events.jsonl",  # the same on the server: nothing to add
            "spark.openlineage.facets.debug.disabled": "false",  # another value than the server's
            "spark.openlineage.appName": "client_app",  # these name the client session's own run
            "spark.openlineage.parentRunId": "01a243cb-b797-79d4-8104-6af63d77a520",
            "spark.openlineage.job.owners.team": "analysts",
            "spark.sql.shuffle.partitions": "3",  # not lineage's
        },
    )
    server_conf = {
        "spark.openlineage.transport.location": "/tmp/events.jsonl",
        "spark.openlineage.facets.debug.disabled": "true",
    }
    assert connect_local.client_conf(client, server_conf) == {
        "spark.openlineage.transport.type": "file",
        "spark.openlineage.facets.debug.disabled": "false",
    }


def test_a_client_that_cannot_list_its_confs_adds_none() -> None:
    client = connect_session("localhost:15002")
    client.conf = types.SimpleNamespace()  # PySpark 3.5's has no getAll
    assert connect_local.client_conf(client, {}) == {}


def test_enable_on_a_session_served_elsewhere_that_cannot_be_asked_returns_a_disabled_handle_and_says_why(
    in_process: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The client's own lineage (tests/integration/test_connect_client.py) starts by asking the server for the
    session's confs: a server that cannot answer leaves lineage off, in one line, and nothing raises."""
    in_process(None)
    with caplog.at_level(logging.WARNING, logger="spark_lineage"):
        handle = activation.enable_session(connect_session("spark.example.com:443"), {})
    assert not handle.enabled
    assert handle.flush() is True
    (record,) = caplog.records
    assert record.getMessage().startswith(
        "spark_lineage: lineage stays off for this Spark Connect session: its server (sc://spark.example.com:443) "
        "could not be asked for the session's confs (AttributeError: "
    )


def test_enable_on_a_stopped_connect_session_of_this_processs_server_raises(in_process: Any) -> None:
    """As on a classic session whose SparkContext is stopped: the server is this process's own."""
    in_process(FakeServer(FakeService(15002)))
    with pytest.raises(activation.StoppedSessionError, match="a Spark Connect session that is stopped"):
        activation.enable_session(connect_session("localhost:15002", stopped=True), {})


def test_enable_on_a_stopped_connect_session_of_a_server_elsewhere_says_so_and_never_raises(
    in_process: Any, caplog: pytest.LogCaptureFixture
) -> None:
    in_process(None)
    with caplog.at_level(logging.WARNING, logger="spark_lineage"):
        handle = activation.enable_session(connect_session("spark.example.com:443", stopped=True), {})
    assert not handle.enabled
    assert [record.getMessage() for record in caplog.records] == [
        "spark_lineage: lineage stays off for this Spark Connect session: it is stopped "
        "(SparkSession.builder.getOrCreate() makes a running one)"
    ]


def test_enable_on_something_else_raises_a_type_error() -> None:
    with pytest.raises(TypeError, match="needs a pyspark SparkSession, got dict"):
        activation.enable_session({}, {})  # type: ignore[arg-type]


@pytest.mark.parametrize("follow", [True, None])
def test_the_notebook_switch_on_a_session_served_elsewhere_never_raises(
    in_process: Any, caplog: pytest.LogCaptureFixture, follow: bool | None
) -> None:
    """``%lineage on`` hands the active session over; one of a server elsewhere is its client's to report. When
    the switch asks for lineage and the session cannot start it, one WARNING says why; when the configuration
    decides, a session whose confs turn nothing on stays off in silence."""
    in_process(None)
    activation.follow_new_sessions(follow)
    try:
        with caplog.at_level(logging.DEBUG, logger="spark_lineage"):
            activation.session_created(connect_session("spark.example.com:443"))
    finally:
        activation.follow_new_sessions(None)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    if follow:
        assert [w.split(" (", 1)[0] for w in warnings] == [
            "spark_lineage: lineage stays off for this Spark Connect session: its server"
        ]
    else:
        assert warnings == []
        assert not [r for r in caplog.records if "lineage on" in r.getMessage()]
