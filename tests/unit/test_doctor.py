"""``spark-lineage doctor``: what it says and exits with, through the command's ``main`` in this process, and the
installed command once in its own process, as users run it."""

from __future__ import annotations

import contextlib
import io
import os
import site
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from spark_lineage import transports
from spark_lineage.cli import main
from spark_lineage.config import JAVA_AGENT_LISTENER
from spark_lineage.doctor import read_properties
from spark_lineage.facets import PRODUCER
from tests.support import LineageReceiver


def doctor(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``spark-lineage doctor ARGS`` with the environment's OpenLineage, Spark and PySpark settings left out and
    ``env`` added: in this process, through the command's ``main`` as its entry point calls it (a process each
    cost 1.5 s of start-up and imports, for 20 tests, on every Python the unit tests run on);
    :func:`test_the_installed_command_runs_the_doctor_in_its_own_process` runs the installed command itself."""
    saved = dict(os.environ)
    stdout, stderr = io.StringIO(), io.StringIO()
    try:
        for key in [key for key in os.environ if key.startswith(LEFT_OUT)]:
            del os.environ[key]
        os.environ.update(env)
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                code = main(["doctor", *args])
            except SystemExit as exit:
                code = exit.code if isinstance(exit.code, int) else 1
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return subprocess.CompletedProcess(["spark-lineage", "doctor", *args], code, stdout.getvalue(), stderr.getvalue())


LEFT_OUT = ("OPENLINEAGE", "SPARK_CONF_DIR", "PYSPARK")
"""The environment variables a doctor of these tests does not see (the settings of whoever runs them)."""


def lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    return result.stdout.splitlines()


def test_the_installed_command_runs_the_doctor_in_its_own_process(receiver: LineageReceiver) -> None:
    command = Path(sys.executable).with_name("spark-lineage")
    clean = {key: value for key, value in os.environ.items() if not key.startswith(LEFT_OUT)}
    arguments = (
        "--conf",
        "spark.openlineage.transport.type=http",
        "--conf",
        f"spark.openlineage.transport.url={receiver.url}",
    )
    result = subprocess.run(
        [str(command), "doctor", *arguments], capture_output=True, text=True, env=clean, timeout=60, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr == ""
    assert lines(result)[0] == "[ok]  spark-submit jobs here get lineage: spark.openlineage.transport.type is set"
    # the hook this environment installed (in the tests' process, the checkout's own comes first on sys.path)
    assert lines(result)[1] == f"[ok]  start-up hook installed: {Path(site.getsitepackages()[0]) / 'spark_lineage.pth'}"
    assert lines(result)[2:] == lines(doctor(*arguments))[2:]


def test_configured_and_answering_leads_with_the_verdict_and_writes_nothing(receiver: LineageReceiver) -> None:
    result = doctor(
        "--conf", "spark.openlineage.transport.type=http", "--conf", f"spark.openlineage.transport.url={receiver.url}"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert lines(result)[0] == "[ok]  spark-submit jobs here get lineage: spark.openlineage.transport.type is set"
    assert lines(result)[1].startswith("[ok]  start-up hook installed: ")
    assert lines(result)[1].endswith("spark_lineage.pth")
    assert lines(result)[2:] == [
        "[--]  Spark confs read from: --conf",
        f"[--]  transport: http to {receiver.url} (from spark.openlineage.transport.*)",
        f"[ok]  backend: {receiver.url}/api/v1/lineage answers (HTTP 501 Unsupported method ('GET') to a GET, which "
        "writes nothing there; --send-test-event sends one event)",
    ]
    assert receiver.events == []  # the backend's job list stays the user's


def test_a_test_event_is_sent_only_when_asked_and_named_as_a_test(receiver: LineageReceiver) -> None:
    result = doctor(
        *("--conf", "spark.openlineage.transport.type=http"),
        *("--conf", f"spark.openlineage.transport.url={receiver.url}", "--send-test-event"),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert lines(result)[-1] == (
        f"[ok]  backend: {receiver.url}/api/v1/lineage accepted a probe event (HTTP 200 OK): job "
        "spark_lineage_doctor_test_event in namespace default"
    )
    assert [(event["eventType"], event["job"]["name"], event["producer"]) for event in receiver.events] == [
        ("COMPLETE", "spark_lineage_doctor_test_event", PRODUCER)
    ]


def test_the_probe_event_is_named_as_the_jobs_events_are(receiver: LineageReceiver) -> None:
    """A backend that accepts events by namespace or producer sees the probe as it will see the job's events."""
    result = doctor(
        *("--conf", "spark.openlineage.transport.type=http"),
        *("--conf", f"spark.openlineage.transport.url={receiver.url}", "--conf", "spark.openlineage.namespace=etl"),
        *("--conf", "spark.openlineage.python.producer=https://example.com/our-fork", "--send-test-event"),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert lines(result)[-1].endswith("job spark_lineage_doctor_test_event in namespace etl")
    assert [(event["job"]["namespace"], event["producer"]) for event in receiver.events] == [
        ("etl", "https://example.com/our-fork")
    ]
    assert not receiver.invalid


def test_enabled_flag_with_the_client_configuration_pointing_nowhere() -> None:
    result = doctor("--conf", "spark.openlineage.enabled=true", OPENLINEAGE_URL="http://127.0.0.1:9")
    assert result.returncode == 1
    assert lines(result)[0] == "[ok]  spark-submit jobs here get lineage: spark.openlineage.enabled=true"
    assert lines(result)[3:] == [
        "[--]  transport: http to http://127.0.0.1:9 (from the openlineage-python client's configuration)",
        "[!!]  backend: http://127.0.0.1:9/api/v1/lineage does not answer ([Errno 111] Connection refused)",
    ]


def test_spark_defaults_with_the_java_agent_and_submit_args(tmp_path: Path) -> None:
    (tmp_path / "spark-defaults.conf").write_text(
        f"# cluster defaults\nspark.extraListeners   {JAVA_AGENT_LISTENER}\nspark.openlineage.transport.type  console\n"
    )
    result = doctor(
        "--no-backend-check", SPARK_CONF_DIR=str(tmp_path), PYSPARK_SUBMIT_ARGS="--conf a.b=c pyspark-shell"
    )
    assert result.returncode == 0
    assert lines(result)[0] == (
        f"[--]  spark-submit jobs here get no lineage: spark.extraListeners loads openlineage-spark "
        f"({JAVA_AGENT_LISTENER}), which already reports this application; spark_lineage stays off so no event "
        "is sent twice"
    )
    assert lines(result)[2] == f"[--]  Spark confs read from: {tmp_path / 'spark-defaults.conf'}, PYSPARK_SUBMIT_ARGS"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--conf", "spark.openlineage.transport.type"], "--conf expects KEY=VALUE"),
        (["--conf", "spark.openlineage.transport.type=carrier-pigeon"], "is not a known transport"),
    ],
)
def test_bad_input_names_what_to_fix(args: list[str], message: str) -> None:
    result = doctor(*args)
    assert result.returncode in (1, 2)
    assert message in result.stdout + result.stderr


def test_unknown_keys_are_problems_with_a_suggestion(receiver: LineageReceiver) -> None:
    result = doctor(
        "--conf",
        "spark.openlineage.transport.type=http",
        "--conf",
        f"spark.openlineage.transport.url=http://user:hunter22@{receiver.url.split('://')[1]}",
        "--conf",
        "spark.openlineage.namespce=prod",
    )
    assert result.returncode == 1
    assert lines(result)[3:5] == [
        "[!!]  spark.openlineage.namespce is not a key spark_lineage knows: it is ignored; did you mean "
        "spark.openlineage.namespace?",
        f"[--]  transport: http to {receiver.url} (from spark.openlineage.transport.*)",
    ]
    assert "hunter22" not in result.stdout + result.stderr


def test_keys_that_do_not_apply_here_are_said_with_why(receiver: LineageReceiver) -> None:
    result = doctor(
        "--conf",
        "spark.openlineage.transport.type=http",
        "--conf",
        f"spark.openlineage.transport.url={receiver.url}",
        "--conf",
        "spark.openlineage.circuitBreaker.type=java",
    )
    assert lines(result)[3:5] == [
        "[--]  spark.openlineage.circuitBreaker.type is an openlineage-spark key that does not apply here, so it is "
        "ignored: it guards the JVM the Java agent runs in (heap, GC time, its task queue); here the analysis runs "
        "on a bounded Python worker (python.queueSize), column lineage within python.columnLineage.budgetMillis",
        f"[--]  transport: http to {receiver.url} (from spark.openlineage.transport.*)",
    ]


class Backend:
    """An HTTP backend on loopback answering every POST and GET with ``status``, keeping each request's method,
    path and headers."""

    def __init__(self, status: int) -> None:
        self.status = status
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.methods: list[str] = []
        backend = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.do_GET()

            def do_GET(self) -> None:
                backend.methods.append(self.command)
                backend.requests.append((self.path, dict(self.headers.items())))
                self.send_response(backend.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


SECRET = "s3cr3t-api-key-4711"


def http_confs(url: str) -> list[str]:
    confs = {
        "spark.openlineage.transport.type": "http",
        "spark.openlineage.transport.url": url,
        "spark.openlineage.transport.endpoint": "api/v2/events",
        "spark.openlineage.transport.urlParams.tenant": "blue",
        "spark.openlineage.transport.auth.type": "api_key",
        "spark.openlineage.transport.auth.apiKey": SECRET,
        "spark.openlineage.transport.headers.X-Team": "lineage-team",
    }
    return [arg for key, value in confs.items() for arg in ("--conf", f"{key}={value}")]


@pytest.mark.parametrize(
    ("status", "code", "expected"),
    [
        (201, 0, "[ok]  backend: {url} accepted a probe event (HTTP 201 Created): job "
         "spark_lineage_doctor_test_event in namespace default"),
        (401, 1, "[!!]  backend: {url} refused the credentials (HTTP 401 Unauthorized): check "
         "spark.openlineage.transport.auth.type and spark.openlineage.transport.auth.apiKey (and the headers in "
         "spark.openlineage.transport.headers.*)"),
        (403, 1, "[!!]  backend: {url} refused the credentials (HTTP 403 Forbidden): check "
         "spark.openlineage.transport.auth.type and spark.openlineage.transport.auth.apiKey (and the headers in "
         "spark.openlineage.transport.headers.*)"),
        (404, 1, "[!!]  backend: {url} rejected a probe event (HTTP 404 Not Found): the url or endpoint is wrong, "
         "or no OpenLineage backend listens there; check spark.openlineage.transport.url and "
         "spark.openlineage.transport.endpoint"),
        (500, 1, "[!!]  backend: {url} failed on a probe event (HTTP 500 Internal Server Error): the backend is in "
         "error, see its logs"),
    ],
)  # fmt: skip
def test_the_backend_check_sends_what_the_transport_sends_and_classifies_the_answer(
    status: int, code: int, expected: str
) -> None:
    backend = Backend(status)
    try:
        result = doctor(*http_confs(backend.url), "--send-test-event")
    finally:
        backend.close()
    assert backend.methods == ["POST"]
    url = f"{backend.url}/api/v2/events?tenant=*********(redacted)"  # a url parameter's value is a secret
    assert lines(result)[-1] == expected.format(url=url), result.stdout + result.stderr
    assert result.returncode == code
    assert len(backend.requests) == 1  # one request: no retries of a refused or failed probe
    path, headers = backend.requests[0]
    assert path == "/api/v2/events?tenant=blue"
    assert headers["Authorization"] == f"Bearer {SECRET}"
    assert headers["X-Team"] == "lineage-team"
    assert headers["Content-Type"] == "application/json"
    assert SECRET not in result.stdout + result.stderr
    assert "lineage-team" not in result.stdout + result.stderr  # header values count as secrets
    assert "blue" not in result.stdout + result.stderr  # so do url parameters' values, however short
    assert "Traceback" not in result.stderr


def test_an_unauthorized_answer_without_credentials_says_what_to_set() -> None:
    backend = Backend(401)
    try:
        result = doctor(
            "--conf",
            "spark.openlineage.transport.type=http",
            "--conf",
            f"spark.openlineage.transport.url={backend.url}",
        )
    finally:
        backend.close()
    assert backend.methods == ["GET"]  # refused without an event sent
    assert lines(result)[-1] == (
        f"[!!]  backend: {backend.url}/api/v1/lineage refused the credentials (HTTP 401 Unauthorized): no "
        "credentials are configured: set spark.openlineage.transport.auth.type and "
        "spark.openlineage.transport.auth.apiKey"
    )
    assert "Authorization" not in backend.requests[0][1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_kafka_with_no_broker_is_one_line_without_a_traceback() -> None:
    pytest.importorskip("confluent_kafka")
    port = free_port()
    result = doctor(
        "--conf", "spark.openlineage.transport.type=kafka",
        "--conf", "spark.openlineage.transport.topicName=lineage",
        "--conf", f"spark.openlineage.transport.properties.bootstrap.servers=127.0.0.1:{port}",
    )  # fmt: skip
    assert result.returncode == 1
    assert lines(result)[-2] == f"[--]  transport: kafka to 127.0.0.1:{port} (from spark.openlineage.transport.*)"
    last = lines(result)[-1]
    assert last.startswith(f"[!!]  backend: kafka 127.0.0.1:{port} does not answer within 5 s (")
    assert last.endswith("); check spark.openlineage.transport.properties.bootstrap.servers")
    assert result.stderr == ""


def test_spark_defaults_is_read_as_spark_reads_it(tmp_path: Path) -> None:
    (tmp_path / "spark-defaults.conf").write_text(
        "# comment\n"
        "  ! another comment\n"
        "spark.openlineage.transport.type = file\n"
        "spark.openlineage.transport.location:" + str(tmp_path / "events") + "\\\n"
        "    .jsonl\n"
        "spark.openlineage.namespace\tprod  \n"
        "spark.openlineage.namespce=typo\n"
    )
    result = doctor(SPARK_CONF_DIR=str(tmp_path))
    assert lines(result)[0].startswith("[ok]  spark-submit jobs here get lineage: ")
    assert lines(result)[3:] == [
        "[!!]  spark.openlineage.namespce is not a key spark_lineage knows: it is ignored; did you mean "
        "spark.openlineage.namespace?",
        f"[--]  transport: file to {tmp_path / 'events.jsonl'} (from spark.openlineage.transport.*)",
        f"[ok]  backend: {tmp_path / 'events.jsonl'} can be written (a file was made in {tmp_path}, and removed)",
    ]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["spark-defaults.conf"]  # nothing left behind


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("spark.a b", {"spark.a": "b"}),
        ("spark.a=b", {"spark.a": "b"}),
        ("spark.a = b", {"spark.a": "b"}),
        ("spark.a:b", {"spark.a": "b"}),
        ("  spark.a   \t  b c  ", {"spark.a": "b c"}),
        ("spark.a = x=y", {"spark.a": "x=y"}),
        ("spark.a", {"spark.a": ""}),
        ("# spark.a b\n! spark.b c\n\n", {}),
        ("spark.a one,\\\n    two", {"spark.a": "one,two"}),
        ("spark.a one\\\\\nspark.b two", {"spark.a": "one\\", "spark.b": "two"}),
        ("spark.a\\=b = c", {"spark.a=b": "c"}),
        ("spark.a \\u0041\\tB", {"spark.a": "A\tB"}),
        ("spark.a x\r\nspark.b y\rspark.c z", {"spark.a": "x", "spark.b": "y", "spark.c": "z"}),
        ("spark.a = 1\nspark.a = 2", {"spark.a": "2"}),
    ],
)
def test_properties_as_java_reads_them(text: str, expected: dict[str, str]) -> None:
    assert read_properties(text) == expected


def test_transport_keys_the_transport_does_not_read_are_problems_with_a_suggestion() -> None:
    result = doctor(
        "--no-backend-check",
        "--conf", "spark.openlineage.transport.type=http",
        "--conf", "spark.openlineage.transport.url=http://localhost:5000",
        "--conf", "spark.openlineage.transport.endpont=api/v2/events",
        "--conf", "spark.openlineage.transport.header.X-Team=lineage-team",
        "--conf", "spark.openlineage.transport.headers.X-Other=fine",
        "--conf", "spark.openlineage.transport.timeoutInMillis=3000",
    )  # fmt: skip
    assert result.returncode == 1
    assert lines(result)[3:5] == [
        "[!!]  spark.openlineage.transport.endpont is not a key the http transport reads: it is ignored; did you "
        "mean spark.openlineage.transport.endpoint?",
        "[!!]  spark.openlineage.transport.header.X-Team is not a key the http transport reads: it is ignored; did "
        "you mean spark.openlineage.transport.headers.X-Team?",
    ]
    assert lines(result)[5] == "[--]  transport: http to http://localhost:5000 (from spark.openlineage.transport.*)"


@pytest.mark.parametrize(
    ("flat", "expected"),
    [
        ({"type": "kafka", "topicname": "t", "properties.bootstrap.servers": "b:9092"}, [("topicname", "topicName")]),
        ({"type": "file", "location": "/tmp/e.jsonl", "apend": "false"}, [("apend", "append")]),
        ({"url": "http://x", "auth.type": "api_key", "sslContext.ca_cert_path": "/ca.pem", "retry.total": "2"}, []),
        ({"type": "async_http", "url": "http://x", "max_queue_size": "5", "nonsense": "1"}, [("nonsense", None)]),
        ({"type": "composite", "transports.a.type": "console", "anything": "1"}, []),  # its own: not judged
    ],
)
def test_unknown_transport_keys_by_type(flat: dict[str, str], expected: list[tuple[str, str | None]]) -> None:
    assert transports.unknown_keys(flat) == expected


def test_an_async_http_transport_is_checked_with_the_same_request() -> None:
    backend = Backend(200)
    try:
        args = [arg.replace("transport.type=http", "transport.type=async_http") for arg in http_confs(backend.url)]
        result = doctor(*args, "--send-test-event")
    finally:
        backend.close()
    assert lines(result)[-1] == (
        f"[ok]  backend: {backend.url}/api/v2/events?tenant=*********(redacted) accepted a probe event (HTTP 200 OK): "
        "job spark_lineage_doctor_test_event in namespace default"
    ), result.stdout + result.stderr
    [(path, headers)] = backend.requests
    assert (path, headers["Authorization"], headers["X-Team"]) == (
        "/api/v2/events?tenant=blue",
        f"Bearer {SECRET}",
        "lineage-team",
    )


@pytest.mark.parametrize(
    ("status", "code", "expected"),
    [
        (200, 0, "[ok]  backend: {url} answers (HTTP 200 OK to a GET, which writes nothing there; --send-test-event "
         "sends one event)"),
        (405, 0, "[ok]  backend: {url} answers (HTTP 405 Method Not Allowed to a GET, which writes nothing there; "
         "--send-test-event sends one event)"),
        (401, 1, "[!!]  backend: {url} refused the credentials (HTTP 401 Unauthorized): check "
         "spark.openlineage.transport.auth.type and spark.openlineage.transport.auth.apiKey (and the headers in "
         "spark.openlineage.transport.headers.*)"),
        (404, 1, "[!!]  backend: {url} answers HTTP 404 Not Found to a GET: the url or endpoint is wrong, or no "
         "OpenLineage backend listens there; check spark.openlineage.transport.url and "
         "spark.openlineage.transport.endpoint"),
        (502, 1, "[!!]  backend: {url} answers HTTP 502 Bad Gateway to a GET; check spark.openlineage.transport.url "
         "and spark.openlineage.transport.endpoint, and the backend's logs"),
    ],
)  # fmt: skip
def test_the_backend_is_asked_with_a_get_that_writes_nothing(status: int, code: int, expected: str) -> None:
    backend = Backend(status)
    try:
        result = doctor(*http_confs(backend.url))
    finally:
        backend.close()
    url = f"{backend.url}/api/v2/events?tenant=*********(redacted)"
    assert lines(result)[-1] == expected.format(url=url), result.stdout + result.stderr
    assert result.returncode == code
    assert backend.methods == ["GET"]
    [(path, headers)] = backend.requests
    assert (path, headers["Authorization"], headers["X-Team"]) == (
        "/api/v2/events?tenant=blue",
        f"Bearer {SECRET}",
        "lineage-team",
    )
    assert "Content-Type" not in headers and "Content-Encoding" not in headers
    assert SECRET not in result.stdout + result.stderr


def test_a_refused_configuration_is_the_verdict_and_nothing_says_ok() -> None:
    result = doctor("--conf", "spark.openlineage.transport.type=htp", "--conf", "spark.openlineage.transport.url=x")
    assert result.returncode == 1
    assert lines(result)[0].startswith(
        "[!!]  spark-submit jobs here get no lineage: their configuration is refused: "
        "spark.openlineage.transport.type='htp' is not a known transport; accepted values: "
    )
    assert not any(line.startswith("[ok]  spark-submit") for line in lines(result))
    assert sum("is not a known transport" in line for line in lines(result)) == 1  # said once, by the verdict


def test_a_file_location_is_checked_by_making_a_file_there() -> None:
    """``/sys`` is a directory that even root may not write a file in: a permission check alone says yes."""
    result = doctor(
        "--conf", "spark.openlineage.transport.type=file", "--conf", "spark.openlineage.transport.location=/sys/e.jsonl"
    )
    assert result.returncode == 1
    assert lines(result)[-1] == "[!!]  backend: /sys/e.jsonl cannot be written: Permission denied"


def test_the_environment_variable_that_turned_lineage_off_is_named() -> None:
    result = doctor("--conf", "spark.openlineage.transport.type=console", OPENLINEAGE_DISABLED="true")
    assert result.returncode == 0
    assert lines(result)[0] == (
        "[--]  spark-submit jobs here get no lineage: lineage is disabled: OPENLINEAGE_DISABLED=true in the environment"
    )
    assert not any("to turn it on" in line for line in lines(result))


def test_a_url_that_holds_the_endpoint_already_is_a_problem(receiver: LineageReceiver) -> None:
    url = f"{receiver.url}/api/v1/lineage"
    result = doctor("--conf", "spark.openlineage.enabled=true", "--no-backend-check", OPENLINEAGE_URL=url)
    assert result.returncode == 1
    assert lines(result)[-1] == (
        f"[!!]  the url {url} ends with the endpoint (api/v1/lineage) already: openlineage-python joins the two, so "
        f"events go to {receiver.url}/api/v1/api/v1/lineage; give the url without it ({receiver.url})"
    )
