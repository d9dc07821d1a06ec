"""Spooled events go out as the spool holds them: the stored JSON, byte for byte, through each transport that
sends text (openlineage-python's HTTP and file transports, this library's console and Kafka ones), with what
the transport adds as before (HTTP headers, compression); transports that need the event itself get it
rebuilt (the Kafka transport's own tests are in test_kafka_delivery.py)."""

from __future__ import annotations

import gzip
import json
import logging
import os
from pathlib import Path
from typing import Any

import attr
import pytest
import requests
from openlineage.client.event_v2 import OutputDataset, RunEvent, RunState
from openlineage.client.facet_v2 import schema_dataset
from openlineage.client.serde import Serde
from openlineage.client.transport.file import FileConfig, FileTransport
from openlineage.client.transport.http import HttpConfig, HttpTransport
from openlineage.client.transport.transport import Config, Transport

from spark_lineage.delivery import transports
from spark_lineage.delivery.console import PrintingConsoleTransport, summary_line
from spark_lineage.delivery.payloads import from_payload, to_payload
from spark_lineage.delivery.sender import Sender
from spark_lineage.delivery.spool import Spool
from spark_lineage.delivery.transports import spooled_emitter
from spark_lineage.transports import leave_retries_to_the_spool
from spark_lineage.worker import ErrorLog
from tests.support import LineageReceiver
from tests.unit.test_spool import _event as query_event

DESTINATION = "test"


def _event(run: int, state: RunState = RunState.COMPLETE) -> RunEvent:
    """A query's event with a job type, an output and its schema."""
    schema = schema_dataset.SchemaDatasetFacet(
        fields=[schema_dataset.SchemaDatasetFacetFields(name="id", type="long", description=None)]
    )
    output = OutputDataset(namespace="file", name=f"/data/out_{run}", facets={"schema": schema})
    return attr.evolve(query_event(run, state), outputs=[output])


def _spooled(spool: Spool, runs: range) -> list[str]:
    """Spool a START and a COMPLETE of each run: their JSON, in spool order."""
    texts = []
    for run in runs:
        for state in (RunState.START, RunState.COMPLETE):
            payload = to_payload(_event(run, state))
            spool.put(DESTINATION, payload.run_id, payload.job, payload.application, payload.json)
            texts.append(payload.json)
    return texts


def _http(url: str, **settings: Any) -> HttpTransport:
    transport = HttpTransport(HttpConfig.from_dict({"url": url, "timeout": 5, **settings}))
    leave_retries_to_the_spool(transport)
    return transport


# --- HTTP ----------------------------------------------------------------------------------------------------

HTTP_SETTINGS = {
    "auth": {"type": "api_key", "apiKey": "k-123"},
    "custom_headers": {"X-Team": "lineage"},
    "endpoint": "api/v1/lineage?code=abc",
}


@pytest.mark.parametrize("compression", [None, "gzip"])
@pytest.mark.parametrize("concurrency", [1, 2])
def test_an_http_backend_receives_the_spooled_json_with_the_headers_emit_sends(
    tmp_path: Path, compression: str | None, concurrency: int
) -> None:
    """Byte for byte what the spool holds (gzip-compressed when configured), with the auth header, the custom
    headers and the url parameters; the same headers, and JSON-equal bodies, as openlineage-python's emit sends
    for the event rebuilt (what the sender sent before)."""
    spool = Spool(tmp_path)
    texts = _spooled(spool, range(3))
    settings = {**HTTP_SETTINGS, **({"compression": compression} if compression else {})}
    receiver = LineageReceiver()
    before = LineageReceiver()
    try:
        assert Sender(spool, DESTINATION, _http(receiver.url, **settings), ErrorLog(), concurrency=concurrency).close(
            30
        )
        emit = _http(before.url, **settings).emit
        for text in texts:
            emit(from_payload(text))
    finally:
        receiver.close()
        before.close()
    bodies = [gzip.decompress(body) if compression else body for body in receiver.bodies]
    assert sorted(bodies) == sorted(text.encode() for text in texts)
    if concurrency == 1:
        assert bodies == [text.encode() for text in texts]
    assert receiver.paths == ["/api/v1/lineage?code=abc"] * len(texts)
    for headers, earlier in zip(receiver.headers, before.headers):
        assert headers["Content-Type"] == "application/json"
        assert headers["Authorization"] == "Bearer k-123"
        assert headers["X-Team"] == "lineage"
        assert headers.get("Content-Encoding") == compression
        assert {k: v for k, v in headers.items() if k not in ("Content-Length", "Host")} == {
            k: v for k, v in earlier.items() if k not in ("Content-Length", "Host")
        }
    old = [json.loads(gzip.decompress(body) if compression else body) for body in before.bodies]
    assert [json.loads(body) for body in bodies] == old or concurrency > 1


class _RecordingSession(requests.Session):
    """A requests session that records each prepared request it would send, as it would send it, instead of
    sending it, and answers ``status``."""

    def __init__(self, status: int = 200, location: str | None = None) -> None:
        super().__init__()
        self.posts: list[dict[str, Any]] = []
        self.status = status
        self.location = location

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        self.posts.append(
            {"method": request.method, "url": request.url, "headers": dict(request.headers), "data": request.body}
            | kwargs
        )
        response = requests.Response()
        response.status_code = self.status
        response._content = b""
        response._content_consumed = True  # type: ignore[attr-defined]
        if self.location:
            response.headers["Location"] = self.location
        return response


def _client_certificate() -> dict[str, Any]:
    """The client certificate settings of openlineage-python's HTTP transport, where it has them (1.54)."""
    return {"sslContext": {"clientCertPath": "/etc/ssl/client.pem", "clientKeyPath": "/etc/ssl/client.key"}}


REQUESTS = {
    "plain": {},
    "auth, headers, url parameters, gzip": {**HTTP_SETTINGS, "compression": "gzip", "verify": False},
    "client certificate": _client_certificate(),
}


@pytest.mark.parametrize("settings", REQUESTS.values(), ids=REQUESTS.keys())
@pytest.mark.parametrize(("status", "location"), [(200, None), (503, None), (302, "https://elsewhere/")])
def test_the_spooled_request_is_the_request_openlineage_pythons_emit_makes(
    settings: dict[str, Any], status: int, location: str | None
) -> None:
    """The same request as the session sends it (method, url, every header, timeout, TLS settings, proxies,
    redirects), but for the body, which is the spooled JSON itself (JSON-equal to what emit serializes), prepared
    once and copied for each send; the same outcome (an error for an answer that is not a success, and for a
    redirect with a client certificate). This holds the raw path to the installed openlineage-python's emit: a
    release that changes how emit sends fails here."""
    text = to_payload(_event(1)).json
    calls = []
    outcomes = []
    for send in (
        lambda transport: transport.emit(from_payload(text)),
        lambda transport: spooled_emitter(transport)(text),
    ):
        transport = _http("http://backend:5000", **settings)
        session = _RecordingSession(status, location)
        transport.session = session
        try:
            send(transport)
            outcomes.append(None)
        except Exception as error:  # noqa: BLE001 - compared below
            outcomes.append((type(error), str(error)))
        (call,) = session.posts
        calls.append(call)
    emitted, spooled = calls
    compressed = emitted["headers"].get("Content-Encoding") == "gzip"
    assert (gzip.decompress(spooled["data"]).decode() if compressed else spooled["data"]) == text
    assert json.loads(gzip.decompress(emitted["data"]) if compressed else emitted["data"]) == json.loads(text)
    for call in calls:  # the bodies' lengths differ (the same JSON, written apart): each is its own
        length = call["headers"].pop("Content-Length")
        assert length == str(len(call["data"].encode() if isinstance(call["data"], str) else call["data"]))
    assert {k: v for k, v in spooled.items() if k != "data"} == {k: v for k, v in emitted.items() if k != "data"}
    assert outcomes[0] == outcomes[1]
    certificate = emitted["cert"] is not None
    assert emitted["allow_redirects"] is not certificate
    assert (outcomes[1] is not None) == (status >= 400 or (location is not None and certificate))


def test_a_proxy_set_in_the_environment_is_read_once_per_environment_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    """requests reads the proxy from the environment for each request; the spooled sends of a session read it
    once per ENVIRONMENT_SECONDS: a proxy changed meanwhile is used once that time has passed, not before. Each
    proxy is a real HTTP server on loopback, which receives the request for the backend's url."""
    for name in ("http_proxy", "HTTP_PROXY", "no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    first, second = LineageReceiver(), LineageReceiver()
    try:
        monkeypatch.setenv("http_proxy", first.url)
        send = spooled_emitter(_http("http://lineage.invalid"))
        text = to_payload(_event(1)).json
        send(text)
        monkeypatch.setenv("http_proxy", second.url)
        send(text)
        monkeypatch.setattr(transports, "ENVIRONMENT_SECONDS", 0.0)
        send(text)
        assert first.paths == ["http://lineage.invalid/api/v1/lineage"] * 2
        assert second.paths == ["http://lineage.invalid/api/v1/lineage"]
        assert first.invalid == second.invalid == [], "each event valid against the OpenLineage schemas"
        assert [event["run"]["runId"] for event in [*first.events, *second.events]] == [
            json.loads(text)["run"]["runId"]
        ] * 3
    finally:
        first.close()
        second.close()


def test_a_cookie_the_backend_sets_goes_with_the_next_spooled_requests() -> None:
    """A load balancer's sticky-session cookie, set by an answer, goes with every later request, as the session
    sends it for emit: the request prepared once is prepared again when the session's cookies change."""
    receiver = LineageReceiver()
    try:
        receiver.set_cookie = "lb=node-7; Path=/"
        send = spooled_emitter(_http(receiver.url))
        text = to_payload(_event(1)).json
        send(text)
        send(text)
        receiver.set_cookie = "lb=node-9; Path=/"
        send(text)
        send(text)
    finally:
        receiver.close()
    assert [headers.get("Cookie") for headers in receiver.headers] == [None, "lb=node-7", "lb=node-7", "lb=node-9"]
    assert len(receiver.events) == 4 and receiver.invalid == []


def test_a_session_with_an_auth_of_its_own_has_each_request_prepared_afresh() -> None:
    """An ``auth`` on the session may sign each body: it is applied to every request, the way emit's is."""
    receiver = LineageReceiver()
    try:
        transport = _http(receiver.url)
        transport.session.auth = lambda request: request.headers.update({"X-Signed": str(len(request.body))}) or request
        send = spooled_emitter(transport)
        texts = [to_payload(_event(run)).json for run in (1, 22)]
        for text in texts:
            send(text)
    finally:
        receiver.close()
    assert [headers["X-Signed"] for headers in receiver.headers] == [str(len(text)) for text in texts]
    assert len(receiver.events) == 2 and receiver.invalid == []


# --- file, console -------------------------------------------------------------------------------------------


def test_the_file_transport_appends_the_spooled_json_as_it_is(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool")
    texts = _spooled(spool, range(3))
    log_file = tmp_path / "events.jsonl"
    transport = FileTransport(FileConfig(log_file_path=str(log_file), append=True))
    assert Sender(spool, DESTINATION, transport, ErrorLog()).close(30)
    assert log_file.read_text() == "".join(text + "\n" for text in texts)


def test_the_appended_file_is_opened_once_a_batch_each_event_written_through_and_a_moved_file_followed(
    tmp_path: Path,
) -> None:
    texts = [to_payload(_event(run)).json for run in range(3)]
    log_file = tmp_path / "events.jsonl"
    emit = spooled_emitter(FileTransport(FileConfig(log_file_path=str(log_file), append=True)))
    emit(texts[0])
    assert log_file.read_text() == texts[0] + "\n"  # on disk before the send counts as done
    opened = os.stat(log_file).st_ino
    log_file.rename(tmp_path / "moved.jsonl")
    emit(texts[1])  # the batch's file, wherever it went
    emit.batch_ended()
    assert (tmp_path / "moved.jsonl").read_text() == texts[0] + "\n" + texts[1] + "\n"
    emit(texts[2])  # the next batch opens the file its path names
    emit.batch_ended()
    emit.batch_ended()
    assert log_file.read_text() == texts[2] + "\n"
    assert os.stat(log_file).st_ino != opened


def test_the_file_transport_writes_a_file_per_spooled_event_as_emit_names_it(tmp_path: Path) -> None:
    text = to_payload(_event(1)).json
    transport = FileTransport(FileConfig(log_file_path=str(tmp_path / "event")))
    spooled_emitter(transport)(text)
    (written,) = tmp_path.glob("event-*.json")
    assert written.read_text() == text + "\n"


def test_the_file_transports_debug_mode_gets_the_event_for_its_file_names(tmp_path: Path) -> None:
    text = to_payload(_event(1)).json
    transport = FileTransport(FileConfig(log_file_path=str(tmp_path / "event"), debug_mode=True))
    spooled_emitter(transport)(text)
    (written,) = tmp_path.glob("event-*-job_1-COMPLETE.json")
    assert written.read_text() == Serde.to_json(from_payload(text), indent=2) + "\n"


def test_a_file_that_cannot_be_written_fails_the_send_as_emit_does(tmp_path: Path) -> None:
    text = to_payload(_event(1)).json
    transport = FileTransport(FileConfig(log_file_path=str(tmp_path / "missing" / "events.jsonl"), append=True))
    with pytest.raises(RuntimeError, match=r"^Failed to write to log file `.*events\.jsonl`"):
        spooled_emitter(transport)(text)


def test_the_console_logs_the_spooled_json_and_prints_its_line(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    text = to_payload(_event(1)).json
    with caplog.at_level(logging.INFO, logger="openlineage.client.transport.console"):
        spooled_emitter(PrintingConsoleTransport())(text)
    assert [record.getMessage() for record in caplog.records] == [text]
    assert capsys.readouterr().out == summary_line(from_payload(text)) + "\n"
    assert summary_line(json.loads(text)) == (
        "OpenLineage COMPLETE default/job_1 run 0195f5b6-0000-7000-8000-000000000001: (no inputs) -> /data/out_1"
    )


# --- transports that need the event --------------------------------------------------------------------------


class _Recording(Transport):
    """A user's own transport: it gets openlineage-python's event."""

    kind = "recording"
    config_class = Config

    def __init__(self, config: Config | None = None) -> None:
        self.events: list[Any] = []

    def emit(self, event: Any) -> None:
        self.events.append(event)


class _OwnHttp(HttpTransport):
    """A user's subclass of the HTTP transport: its emit may do more, so it gets the event."""

    def __init__(self) -> None:
        super().__init__(HttpConfig(url="http://127.0.0.1:9"))
        self.events: list[Any] = []

    def emit(self, event: Any) -> Any:
        self.events.append(event)


@pytest.mark.parametrize("transport", [_Recording(), _OwnHttp()], ids=["custom", "HTTP subclass"])
def test_other_transports_get_openlineage_pythons_event_rebuilt(transport: Any) -> None:
    text = to_payload(_event(1)).json
    spooled_emitter(transport)(text)
    (event,) = transport.events
    assert isinstance(event, RunEvent)
    assert json.loads(Serde.to_json(event)) == json.loads(text)
