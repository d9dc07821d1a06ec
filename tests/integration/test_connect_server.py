"""``spark-lineage connect-server``: a real Spark Connect server in its own process, real clients in others.

One server serves the whole module (starting one takes seconds): a client writes parquet through it from
another process, then SIGTERM stops it, and what it printed, its exit status, how long the stop took and the
events in its file transport are checked, every event against the OpenLineage schemas. Ctrl-C gets a server of
its own (once), and the errors (a bad option, a port in use) start no Spark at all.

The client is PySpark's own Spark Connect client, ``pyspark[connect]`` of the line under test: the line's own
environment on 4.x; on 3.5, whose Connect client pins NumPy below 2 (which the line's environment cannot take),
a virtual environment of its own beside it, ``connect-client-3.5`` (``scripts/test`` makes it;
``$SPARK_LINEAGE_CONNECT_CLIENT_PYTHON`` names another interpreter).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.jars import spark_module
from tests.support import (
    client_python,
    datasets,
    free_port,
    query_events,
    tail,
    thin_client_python,
    validate_event,
)

pytestmark = pytest.mark.spark

PREFIX = "spark-lineage connect-server: "
START_SECONDS = 300
"""A 3.5 server fetches its Connect module from Maven Central at its first start."""
STOP_BOUND_SECONDS = 40
"""What the server says a stop takes at most: lineage's shutdown timeout (10 s) and 30 s for Spark."""

CLIENT = """
import sys
from pyspark.sql import SparkSession

url, people, output = sys.argv[1:4]
spark = SparkSession.builder.remote(url).getOrCreate()
rows = spark.read.option("header", True).csv(people)
rows.selectExpr("id", "CAST(id AS INT) * 10 AS tens").write.mode("overwrite").parquet(output)
print("ROWS", spark.read.parquet(output).count(), flush=True)
"""


IDENTIFIED_CLIENT = """
import logging, sys
logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s %(message)s")
from pyspark.sql import SparkSession
import spark_lineage

url, output, events = sys.argv[1:4]
spark = SparkSession.builder.remote(url).getOrCreate()
handle = spark_lineage.enable(
    spark, appName="Identity App", transport={"type": "file", "log_file_path": events}, namespace="elsewhere"
)
print("ENABLED", handle.enabled, flush=True)
spark.range(3).write.mode("overwrite").parquet(output)
spark.stop()
"""
IDENTIFIED_USER = "identified"


def server_command(port: int, *options: str) -> list[str]:
    return [sys.executable, "-m", "spark_lineage.cli", "connect-server", "--port", str(port), *options]


def clean_env() -> dict[str, str]:
    """This environment without openlineage-python's own configuration, as a user's shell without it."""
    return {k: v for k, v in os.environ.items() if not k.startswith("OPENLINEAGE")}


@dataclass
class Server:
    """A ``connect-server`` process: its stdout read line by line as it comes, its stderr in a log file."""

    process: subprocess.Popen[str]
    port: int
    events_file: Path
    log: Path
    lines: list[str] = field(default_factory=list)
    listening: threading.Event = field(default_factory=threading.Event)
    stop_seconds: float | None = None
    reader: threading.Thread | None = None

    def __post_init__(self) -> None:
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))
            if line.startswith(PREFIX + "Spark Connect server listening"):
                self.listening.set()

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def ours(self) -> list[str]:
        """What the command itself printed (Ivy prints to the same stdout)."""
        return [line for line in self.lines if line.startswith(PREFIX)]

    def wait_listening(self) -> None:
        deadline = time.monotonic() + START_SECONDS
        while not self.listening.wait(0.5):
            assert self.process.poll() is None, f"the server exited ({self.process.returncode}):\n{tail(self.log)}"
            assert time.monotonic() < deadline, f"the server did not listen within {START_SECONDS} s:\n{tail(self.log)}"

    def stop(self, signum: signal.Signals, group: bool = False) -> int:
        """Send ``signum`` (to the whole process group, as a terminal's Ctrl-C does, with ``group``); the exit
        status, and in ``stop_seconds`` how long the stop took."""
        started = time.monotonic()
        if group:
            os.killpg(self.process.pid, signum)
        else:
            self.process.send_signal(signum)
        try:
            status = self.process.wait(timeout=STOP_BOUND_SECONDS + 30)
        finally:
            self.stop_seconds = time.monotonic() - started
        if self.reader is not None:
            self.reader.join(timeout=10)  # the last lines (the JVM, which shares the pipe, ends just after)
        return status

    def events(self) -> list[dict[str, Any]]:
        if not self.events_file.is_file():
            return []
        return [json.loads(line) for line in self.events_file.read_text().splitlines() if line.strip()]


@dataclass
class Stopped:
    """The shared server after its SIGTERM."""

    server: Server
    status: int
    events: list[dict[str, Any]]
    written: Written


SESSION_TIMEOUT_SECONDS = 15
"""How long a Connect session the shared server runs may sit unused (Spark 4; 3.5's is an hour, fixed)."""


def expiring_sessions() -> list[str]:
    import pyspark

    if pyspark.__version__.startswith("3."):
        return []
    return [
        "--conf",
        f"spark.connect.session.manager.defaultSessionTimeout={SESSION_TIMEOUT_SECONDS}s",
        "--conf",
        "spark.connect.session.manager.maintenanceInterval=1s",
    ]


def start_server(directory: Path) -> Server:
    port = free_port()
    events_file = directory / "events.jsonl"
    log = directory / "server.log"
    prefix = ["setpriv", "--pdeathsig", "KILL"] if shutil.which("setpriv") else []  # it dies with this process
    command = server_command(
        port,
        "--master",
        "local[2]",
        "--conf",
        "spark.openlineage.transport.type=file",
        "--conf",
        f"spark.openlineage.transport.location={events_file}",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.sql.shuffle.partitions=1",
        *expiring_sessions(),
    )
    with log.open("ab") as errors:
        process = subprocess.Popen(
            [*prefix, *command],
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            env=clean_env(),
            start_new_session=True,  # a process group of its own, for the Ctrl-C test
        )
    server = Server(process, port, events_file, log)
    try:
        server.wait_listening()
    except BaseException:
        process.kill()
        raise
    return server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    directory = tmp_path_factory.mktemp("connect_server")
    running = start_server(directory)
    yield running
    if running.process.poll() is None:
        running.process.kill()
        running.process.wait()


@dataclass(frozen=True)
class Written:
    """What a client read and wrote through the server."""

    people: Path
    output: Path


def run_client(server: Server, directory: Path, user: str) -> Written:
    """A client's write through the server, from a process of its own: CSV in, parquet out. The client ends
    without closing its session, which stays open on the server until it expires or the server stops."""
    python = client_python()
    script = directory / "client.py"
    script.write_text(textwrap.dedent(CLIENT))
    people = directory / "people"
    people.mkdir()
    (people / "part-0.csv").write_text("id,name\n1,ann\n2,bob\n3,cyd\n")
    output = directory / "tens"
    env = {k: v for k, v in clean_env().items() if k not in ("PYTHONPATH", "SPARK_HOME")}
    result = subprocess.run(
        [python, str(script), f"{server.url}/;user_id={user}", str(people), str(output)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr[-3000:]}\nserver:\n{tail(server.log)}"
    assert "ROWS 3" in result.stdout
    return Written(people, output)


def session_run(events: list[dict[str, Any]], user: str) -> list[dict[str, Any]]:
    """The events of the run of ``user``'s Connect session."""
    return [
        event
        for event in events
        if event["job"]["facets"]["jobType"]["jobType"] == "APPLICATION"
        and (event["run"]["facets"].get("spark_connect") or {}).get("userId") == user
    ]


@pytest.fixture(scope="module")
def expired(server: Server, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]] | None:
    """On Spark 4, the run of a client's session the server expired (it was left unused); ``None`` on 3.5,
    whose sessions expire after an hour."""
    if not expiring_sessions():
        return None
    run_client(server, tmp_path_factory.mktemp("expiring_client"), "early")
    deadline = time.monotonic() + SESSION_TIMEOUT_SECONDS + 30
    while time.monotonic() < deadline:
        run = session_run(server.events(), "early")
        if run and run[-1]["eventType"] != "START":
            return run
        time.sleep(0.5)
    return session_run(server.events(), "early")


@pytest.fixture(scope="module")
def written(server: Server, expired: list[dict[str, Any]] | None, tmp_path_factory: pytest.TempPathFactory) -> Written:
    """A client's write through the server (after the expired session's, whose client came first)."""
    return run_client(server, tmp_path_factory.mktemp("connect_client"), "analyst")


@dataclass(frozen=True)
class Identified:
    """A client that turned its own lineage on against a server that has lineage: what it printed and wrote."""

    stdout: str
    stderr: str
    client_events: Path
    output: Path


@pytest.fixture(scope="module")
def identified(server: Server, written: Written, tmp_path_factory: pytest.TempPathFactory) -> Identified | None:
    """``spark_lineage.enable()`` on a thin client (``pyspark-client``) of this server, which reports its
    sessions itself; ``None`` on Spark 3.5, whose server a 4.x client cannot talk to."""
    import pyspark

    if pyspark.__version__.startswith("3."):
        return None
    directory = tmp_path_factory.mktemp("identified_client")
    script = directory / "client.py"
    script.write_text(textwrap.dedent(IDENTIFIED_CLIENT))
    output, events = directory / "out", directory / "client_events.jsonl"
    env = {k: v for k, v in clean_env().items() if k not in ("PYTHONPATH", "SPARK_HOME")}
    result = subprocess.run(
        [thin_client_python(), str(script), f"{server.url}/;user_id={IDENTIFIED_USER}", str(output), str(events)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr[-3000:]}\nserver:\n{tail(server.log)}"
    return Identified(result.stdout, result.stderr, events, output)


@pytest.fixture(scope="module")
def stopped(server: Server, written: Written, identified: Identified | None) -> Stopped:
    """The shared server, stopped by SIGTERM after a client wrote through it."""
    status = server.stop(signal.SIGTERM)
    return Stopped(server, status, server.events(), written)


def expected_lines(server: Server, signal_name: str) -> list[str]:
    import pyspark

    lines = []
    if pyspark.__version__.startswith("3."):
        package = spark_module("spark-connect", pyspark.__version__)
        lines.append(
            f"{PREFIX}Spark {pyspark.__version__} has no Spark Connect server jar: adding {package} from Maven Central"
        )
    return [
        *lines,
        f"{PREFIX}Spark Connect server listening on sc://localhost:{server.port} (every interface); lineage goes to "
        f"file {server.events_file}",
        f"{PREFIX}{signal_name}: stopping (lineage ends first; {STOP_BOUND_SECONDS} s at most)",
        f"{PREFIX}stopped",
    ]


def application_run(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The server's application run: the run lineage starts with (its START is the first event spooled)."""
    assert events, "no events"
    run_id = events[0]["run"]["runId"]
    return [event for event in events if event["run"]["runId"] == run_id]


def assert_stopped_cleanly(server: Server, status: int, events: list[dict[str, Any]], signal_name: str) -> None:
    assert status == 0, tail(server.log)
    assert server.ours() == expected_lines(server, signal_name), tail(server.log)
    assert server.stop_seconds is not None
    assert server.stop_seconds < STOP_BOUND_SECONDS, f"the stop took {server.stop_seconds:.1f} s"
    app = application_run(events)
    assert [event["eventType"] for event in app] == ["START", "COMPLETE"]
    assert {event["job"]["name"] for event in app} == {"spark_connect_server"}
    assert app[0]["job"]["facets"]["jobType"]["jobType"] == "APPLICATION"
    assert "errorMessage" not in app[1]["run"]["facets"]
    for event in events:
        validate_event(event)
    errors = server.log.read_text(errors="replace")
    assert "Traceback" not in errors, tail(server.log)


def test_a_client_writes_through_the_server(written: Written) -> None:
    assert list(written.output.glob("part-*.parquet")), sorted(path.name for path in written.output.iterdir())


def test_sigterm_ends_lineage_then_spark_and_exits_0(stopped: Stopped) -> None:
    assert_stopped_cleanly(stopped.server, stopped.status, stopped.events, "SIGTERM")


def test_an_unused_session_expires_and_its_run_completes(expired: list[dict[str, Any]] | None) -> None:
    if expired is None:
        pytest.skip("Spark 3.5's Connect sessions expire after an hour unused, which no conf changes")
    assert [event["eventType"] for event in expired] == ["START", "COMPLETE"]
    assert {event["job"]["name"] for event in expired} == {"spark_connect_server.connect_session"}
    start, complete = expired
    assert start["run"]["runId"] == complete["run"]["runId"]
    # It ended when the server expired it, at least the timeout after the client's last request.
    assert _epoch(complete["eventTime"]) - _epoch(start["eventTime"]) >= SESSION_TIMEOUT_SECONDS


def test_sigterm_aborts_the_run_of_a_session_still_open(stopped: Stopped) -> None:
    run = session_run(stopped.events, "analyst")
    assert [event["eventType"] for event in run] == ["START", "ABORT"]
    app_run_id = application_run(stopped.events)[0]["run"]["runId"]
    assert run[0]["run"]["facets"]["parent"]["run"]["runId"] == app_run_id
    # Every run ended before the application's.
    assert stopped.events[-1]["run"]["runId"] == app_run_id and stopped.events[-1]["eventType"] == "COMPLETE"


def _epoch(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text).timestamp()


def test_the_client_write_is_reported_under_the_server_application(stopped: Stopped) -> None:
    app_run_id = application_run(stopped.events)[0]["run"]["runId"]
    people, output = str(stopped.written.people), stopped.written.output
    writes = [
        event
        for event in query_events(stopped.events)
        if event["eventType"] == "COMPLETE" and datasets(event, "outputs") == [("file", str(output))]
    ]
    assert len(writes) == 1, sorted({event["job"]["name"] for event in query_events(stopped.events)})
    (write,) = writes
    name = f"{output.parent.name}_{output.name}"
    assert write["job"]["name"] == f"spark_connect_server.execute_insert_into_hadoop_fs_relation_command.{name}"
    assert write["run"]["facets"]["parent"]["root"]["run"]["runId"] == app_run_id
    assert datasets(write, "inputs") == [("file", people)]
    columns = write["outputs"][0]["facets"]["columnLineage"]["fields"]
    sources = {column: [(f["name"], f["field"]) for f in spec["inputFields"]] for column, spec in columns.items()}
    assert sources == {"id": [(people, "id")], "tens": [(people, "id")]}


@pytest.mark.once
def test_ctrl_c_stops_it_cleanly_too(tmp_path: Path) -> None:
    """Ctrl-C in a terminal signals the whole process group: the server's Python and its JVM (which PySpark
    starts with SIGINT ignored)."""
    server = start_server(tmp_path)
    try:
        status = server.stop(signal.SIGINT, group=True)
    finally:
        if server.process.poll() is None:
            server.process.kill()
    assert_stopped_cleanly(server, status, server.events(), "SIGINT")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--port", "http"], "argument --port: expects a port number from 1 to 65535, got 'http'"),
        (["--port", "70000"], "argument --port: expects a port number from 1 to 65535, got '70000'"),
        (["--conf", "spark.master"], "--conf expects KEY=VALUE, got 'spark.master'"),
        (
            ["--driver-memory", "4g"],
            "unrecognized argument '--driver-memory': it takes --master, --conf KEY=VALUE, --packages, --jars, "
            "--name, --port; give other Spark settings as --conf KEY=VALUE (spark-submit's --driver-memory 4g is "
            "--conf spark.driver.memory=4g)",
        ),
        (
            ["--conf", "spark.openlineage.python.shutdownTimeoutSeconds=soon"],
            "spark.openlineage.python.shutdownTimeoutSeconds='soon' is not a number.",
        ),
        (
            ["--conf", "spark.api.mode=connect"],
            "--conf spark.remote and spark.api.mode=connect make a Spark Connect client; connect-server runs the "
            "server: leave them out",
        ),
    ],
    ids=["port-not-a-number", "port-out-of-range", "conf-without-value", "spark-submit-only-option", "bad-lineage-conf",
         "client-conf"],
)  # fmt: skip
def test_a_bad_option_is_one_line_naming_it(options: list[str], message: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "spark_lineage.cli", "connect-server", *options],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
        check=False,
    )
    assert (result.returncode, result.stdout, result.stderr) == (2, "", f"{PREFIX}{message}\n")


def test_a_port_in_use_is_one_line_and_no_spark(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        started = time.monotonic()
        result = subprocess.run(
            server_command(port, "--master", "local[1]"),
            capture_output=True,
            text=True,
            timeout=120,
            env=clean_env(),
            check=False,
        )
    elapsed = time.monotonic() - started
    message = f"{PREFIX}port {port} is in use: stop what listens there, or give another port with --port\n"
    assert (result.returncode, result.stdout, result.stderr) == (1, "", message)
    assert elapsed < 10, f"{elapsed:.1f} s: found before Spark starts"


def test_a_client_of_a_server_with_lineage_only_sets_its_identity(
    stopped: Stopped, identified: Identified | None
) -> None:
    if identified is None:
        pytest.skip("a Spark 3.5 server takes no 4.x client")
    assert "ENABLED False" in identified.stdout
    said = re.findall(
        r"spark_lineage: the server runs spark_lineage \(spark\.openlineage\.transport\.\w+ is set\), (.*)",
        identified.stderr,
    )
    assert said == [
        "so this Spark Connect client reports nothing itself; it set its identity: spark.openlineage.appName, "
        "spark.openlineage.namespace"
    ], identified.stderr[-3000:]
    assert not identified.client_events.exists()
    # The server reports the session once, under the name and namespace the client set.
    run = session_run(stopped.events, IDENTIFIED_USER)
    assert [event["eventType"] for event in run] == ["START", "COMPLETE"]
    assert {(event["job"]["namespace"], event["job"]["name"]) for event in run} == {("elsewhere", "identity_app")}
    writes = [
        event
        for event in query_events(stopped.events)
        if event["eventType"] == "COMPLETE"
        and event["run"]["facets"]["parent"]["run"]["runId"] == run[0]["run"]["runId"]
    ]
    assert [datasets(event, "outputs") for event in writes] == [[("file", str(identified.output))]]
