"""Test support: OpenLineage JSON Schema validation, a real HTTP receiver on loopback, and event helpers."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gzip
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NoReturn

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

REPO_ROOT = Path(__file__).resolve().parent.parent
REBIND_SECONDS = 30.0
"""How long a receiver coming back on its port waits for another process to release it."""
RUN_EVENT_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
# The pinned copy of the schemas the tests validate against; scripts/vendor-openlineage-spec refreshes it.
VENDORED_SPEC = Path(__file__).resolve().parent / "openlineage_spec"


def spec_dir() -> Path:
    """Where the published OpenLineage JSON Schemas are: $OPENLINEAGE_SPEC_DIR (to try other schemas), else the
    copy vendored in tests/openlineage_spec (pinned; see its README.md), else ../shared/openlineage-spec, a
    folder of every published schema that only a checkout without the vendored copy should need."""
    configured = os.environ.get("OPENLINEAGE_SPEC_DIR")
    fallback = REPO_ROOT.parent / "shared" / "openlineage-spec"
    candidates = [Path(configured)] if configured else [VENDORED_SPEC, fallback]
    for path in candidates:
        if (path / "2-0-2" / "OpenLineage.json").is_file():
            return path
    raise RuntimeError(
        f"OpenLineage JSON Schemas not found at {' or '.join(map(str, candidates))}: every emitted event is "
        "validated against them. Set OPENLINEAGE_SPEC_DIR to a folder holding 2-0-2/OpenLineage.json and facets/."
    )


@cache
def schemas_in(directory: Path) -> dict[str, dict[str, Any]]:
    """The JSON Schemas of a folder of OpenLineage schemas, by ``$id`` (the URL a ``_schemaURL`` names)."""
    schemas = {}
    for file in sorted(directory.rglob("*.json")):
        document = json.loads(file.read_text())
        if isinstance(document, dict) and "$id" in document:
            schemas[document["$id"]] = document
    return schemas


@cache
def schema_registry(directory: Path) -> Registry:
    """Every schema of ``directory``, for ``$ref``s across documents to resolve without the network."""
    return Registry().with_resources(
        (schema_id, Resource.from_contents(document, default_specification=DRAFT202012))
        for schema_id, document in schemas_in(directory).items()
    )


PACKAGE_SCHEMAS = REPO_ROOT / "spark_lineage" / "schemas"
"""The schemas of this library's own facets, shipped in the package: events are held to them as to the spec's."""


@cache
def _registry() -> Registry:
    return schema_registry(spec_dir()).with_resources(
        (schema_id, Resource.from_contents(document, default_specification=DRAFT202012))
        for schema_id, document in schemas_in(PACKAGE_SCHEMAS).items()
    )


def _validator_for(uri: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator({"$ref": uri}, registry=_registry())


def validate_event(event: dict[str, Any]) -> None:
    """Validate a run event against the core schema, and every facet against the schema its _schemaURL names."""
    _validator_for(RUN_EVENT_SCHEMA).validate(event)
    for where, facets in facet_groups(event):
        for name, facet in facets.items():
            url = facet.get("_schemaURL")
            assert url, f"{where}.{name} has no _schemaURL"
            base = url.split("#", 1)[0]
            assert base in _known_ids(), f"{where}.{name}: {url} is neither a published OpenLineage schema nor ours"
            target = url if "#" in url else base
            _validator_for(target).validate(facet if "#" in url else {name: facet})


def _known_ids() -> frozenset[str]:
    return frozenset(schemas_in(spec_dir())) | frozenset(schemas_in(PACKAGE_SCHEMAS))


def facet_groups(event: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Where facets sit in a run event, each place with its facets by name."""
    yield "run.facets", event["run"].get("facets") or {}
    yield "job.facets", event["job"].get("facets") or {}
    for kind, facet_keys in (("inputs", ("facets", "inputFacets")), ("outputs", ("facets", "outputFacets"))):
        for index, dataset in enumerate(event.get(kind) or []):
            for key in facet_keys:
                yield f"{kind}[{index}].{key}", dataset.get(key) or {}


EventKey = tuple[str, str, str, Any]


def event_key(event: dict[str, Any]) -> EventKey:
    """What tells one event of a run from another: its type and time, and for a RUNNING event at a Spark job's
    start, the job (a run has one such event per job, and another at its first job's end)."""
    job = (event["run"].get("facets") or {}).get("spark_jobDetails") or {}
    return (event["run"]["runId"], str(event.get("eventType")), str(event.get("eventTime")), job.get("jobId"))


class LineageReceiver:
    """A real OpenLineage HTTP endpoint on loopback that keeps what it receives, in arrival order, and validates
    every event against the published schemas as it arrives.

    It can be sick the ways backends are: ``refuse_first`` answers 503 to that many requests (keeping none of
    them), ``delay_seconds`` keeps each event at once but answers only after that long (a backend slower than
    the client's timeout), ``before_reply`` runs before each answer, and :meth:`stop` / :meth:`start` take it
    down and bring it back on the same port. With ``track_senders`` it notes which local processes sent each
    kept event (:func:`sender_pids`), in ``senders``.
    """

    def __init__(
        self,
        status: int = 200,
        before_reply: Callable[[], object] | None = None,
        *,
        port: int = 0,
        refuse_first: int = 0,
        delay_seconds: float = 0.0,
        track_senders: bool = False,
    ) -> None:
        self.events: list[dict[str, Any]] = []
        self.senders: list[frozenset[int]] = []
        """With ``track_senders``: the pids holding the client end of the connection of each kept event."""
        self.track_senders = track_senders
        self.invalid: list[str] = []
        self.status = status
        self.refuse_first = refuse_first
        self.delay_seconds = delay_seconds
        self.requests = 0
        self.authorizations: list[str | None] = []
        """The Authorization header of each request, in arrival order."""
        self.paths: list[str] = []
        """The path of each request, with its query (url parameters), in arrival order."""
        self.headers: list[dict[str, str]] = []
        """The headers of each request, in arrival order."""
        self.bodies: list[bytes] = []
        """The body of each request as it arrived (gzip-compressed ones too), in arrival order."""
        self.set_cookie: str | None = None
        """A ``Set-Cookie`` header for each answer (a load balancer's sticky session), when set."""
        self.events_answered = 0
        self.in_flight = 0
        self.most_in_flight = 0
        """The most requests this receiver was answering at once (it answers each on a thread of its own)."""
        self._before_reply = before_reply
        self._lock = threading.Lock()
        self._port = port
        self._server: ThreadingHTTPServer | None = None
        self.start()

    def _bind(self, handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
        """A server on this receiver's port. Back on a port it gave up, it waits for whoever took the port
        meanwhile to let it go (a process the test ended, as a killed driver's JVM, can hold it a moment)."""
        deadline = time.monotonic() + REBIND_SECONDS
        while True:
            try:
                return ThreadingHTTPServer(("127.0.0.1", self._port), handler)
            except OSError as error:
                if error.errno != errno.EADDRINUSE or not self._port or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def start(self) -> None:
        """Listen (again, on the same port once it had one)."""
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                with receiver._lock:
                    receiver.in_flight += 1
                    receiver.most_in_flight = max(receiver.most_in_flight, receiver.in_flight)
                try:
                    self._receive()
                finally:
                    with receiver._lock:
                        receiver.in_flight -= 1

            def _receive(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if receiver._server is not self.server:  # stopped: a kept-alive connection is dropped too
                    self.close_connection = True
                    return
                with receiver._lock:
                    receiver.requests += 1
                    receiver.authorizations.append(self.headers.get("Authorization"))
                    receiver.paths.append(self.path)
                    receiver.headers.append(dict(self.headers.items()))
                    receiver.bodies.append(body)
                    refused = receiver.requests <= receiver.refuse_first
                if refused:
                    self._answer(503)
                    return
                event = json.loads(gzip.decompress(body) if self.headers.get("Content-Encoding") == "gzip" else body)
                # While the client still holds its end of the connection.
                senders = sender_pids(self.client_address[1]) if receiver.track_senders else frozenset()
                try:
                    validate_event(event)
                except Exception as error:  # noqa: BLE001 - collected, asserted by the fixture
                    receiver.invalid.append(f"{event.get('eventType')} {event['job']['name']}: {error}")
                with receiver._lock:
                    receiver.events.append(event)
                    if receiver.track_senders:
                        receiver.senders.append(senders)
                if receiver._before_reply is not None:
                    receiver._before_reply()
                if receiver.delay_seconds:
                    time.sleep(receiver.delay_seconds)
                self._answer(receiver.status)
                receiver.events_answered += 1

            def _answer(self, status: int) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", "0")
                    if receiver.set_cookie is not None:
                        self.send_header("Set-Cookie", receiver.set_cookie)
                    self.end_headers()
                except OSError:  # the client gave up waiting: what it sent is kept all the same
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        server = self._bind(Handler)
        server.daemon_threads = True
        self._port = int(server.server_address[1])
        self._server = server
        threading.Thread(target=server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        """Stop listening: connections are refused until :meth:`start`."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def clear(self) -> None:
        with self._lock:
            self.events.clear()

    def copies(self) -> dict[EventKey, int]:
        """How many times each event arrived, by :func:`event_key`."""
        counts: dict[EventKey, int] = {}
        with self._lock:
            for event in self.events:
                key = event_key(event)
                counts[key] = counts.get(key, 0) + 1
        return counts

    def close(self) -> None:
        self.stop()


def replay(spool: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``spark-lineage replay --spool SPOOL`` as a user runs it: its own process."""
    return subprocess.run(
        [sys.executable, "-m", "spark_lineage.cli", "replay", "--spool", str(spool), "--timeout", str(timeout)],
        capture_output=True,
        text=True,
        timeout=timeout + 60,
        check=False,
    )


def minimal_run_event(run: int = 1) -> Any:
    """A COMPLETE event of job ``job_<run>`` with nothing else in it: for tests of delivery, not of content."""
    from openlineage.client.event_v2 import Job, Run, RunEvent, RunState

    return RunEvent(
        eventType=RunState.COMPLETE,
        eventTime="2026-12-01T10:00:00.000+00:00",
        run=Run(runId=f"0195f5b6-0000-7000-8000-{run:012d}"),
        job=Job(namespace="default", name=f"job_{run}"),
        producer="https://github.com/spark-lineage/spark-lineage",
    )


def free_port() -> int:
    """A loopback port nothing listens on (a backend that is down)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class HeldPort:
    """A loopback port held bound, not listening, until :meth:`release`: a connection to it is refused, as by a
    backend that is down, and no other socket takes it meanwhile. (A port :func:`free_port` found is free only
    when it is asked: left unbound while a job runs, any process's outgoing connection may get it as its own
    port, and a server started on it later cannot bind.)"""

    def __init__(self) -> None:
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self.port = int(self._socket.getsockname()[1])

    def release(self) -> int:
        """Let the port go, for a server to start on it at once; returns it."""
        self._socket.close()
        return self.port


LOCAL_CONNECT_PORT = 15002
"""Where PySpark's in-process Connect server (``remote("local[N]")``) listens, and its client connects: always
(but under ``SPARK_TESTING``, which changes Spark itself), so two such servers on one machine cannot run at
once: the second fails to start its SparkContext."""


@contextmanager
def local_connect_server_turn(wait_seconds: float = 600.0) -> Iterator[None]:
    """Hold while a process of these tests runs PySpark's in-process Connect server: test runs beside each other
    (``scripts/test`` runs the tests that run once beside the PySpark lines) take turns for
    :data:`LOCAL_CONNECT_PORT`. Once the turn is ours, waits for the port to be free (a server that has just
    ended may still hold it a moment)."""
    lock_path = Path(tempfile.gettempdir()) / f"spark-lineage-tests-connect-{LOCAL_CONNECT_PORT}.lock"
    with lock_path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            deadline = time.monotonic() + wait_seconds
            while not _port_free(LOCAL_CONNECT_PORT):
                assert time.monotonic() < deadline, f"port {LOCAL_CONNECT_PORT} stayed in use by another process"
                time.sleep(0.5)
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def wait_until(
    ready: Callable[[], bool], process: subprocess.Popen[bytes], log: Path, what: str, timeout: float = 120.0
) -> None:
    """Wait until ``ready()``, while a server ``process`` (logging to ``log``) starts; fails with its log if it
    ends first or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while not ready():
        if process.poll() is not None:
            raise RuntimeError(f"a server exited with {process.returncode} before {what}:\n{tail(log)}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"waited {timeout:.0f} s for {what}:\n{tail(log)}")
        time.sleep(0.2)


def listens(port: int) -> bool:
    """Whether something accepts connections on loopback ``port``."""
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


@contextmanager
def child_process(
    command: list[str], log_path: Path, env: dict[str, str] | None = None, stop_timeout: float = 30.0
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``command`` (a server) with its output appended to ``log_path``, as this process's child that is
    killed if this process dies (``setpriv --pdeathsig``, where there is setpriv); afterwards SIGTERM it, and
    SIGKILL it if it has not exited within ``stop_timeout``."""
    prefix = ["setpriv", "--pdeathsig", "KILL"] if shutil.which("setpriv") else []
    with log_path.open("ab") as log:
        process = subprocess.Popen([*prefix, *command], stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            yield process
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=stop_timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def spool_disk(room_kib: int) -> str:
    """The size of a disk (for :func:`small_disk`) with ``room_kib`` KiB for a spool's files and whatever else a
    test puts there, besides the room the spool holds back on it (``spool.RESERVE_BYTES``)."""
    from spark_lineage.delivery.spool import RESERVE_BYTES

    return f"{room_kib + RESERVE_BYTES // 1024}k"


@contextmanager
def small_disk(mount_point: Path, size: str) -> Iterator[Path]:
    """A real disk of ``size`` (``1m``, or :func:`spool_disk`'s): a tmpfs mounted at ``mount_point`` for the
    block, unmounted after it. Mounting needs root (CI runs as root); elsewhere the test is skipped, saying so."""
    import pytest

    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a full disk is a tmpfs of its own, and mounting one needs root")
    mount_point.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount_point)], check=True)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "--lazy", str(mount_point)], check=False)


def tail(log: Path) -> str:
    """The end of a server's log, for an error message."""
    return log.read_text(errors="replace")[-3000:] if log.is_file() else "(no log)"


def sender_pids(client_port: int) -> frozenset[int]:
    """The pids of the local processes holding the TCP socket bound to 127.0.0.1:``client_port``: the client of
    a connection to a server on loopback (Linux: the socket's inode in /proc/net/tcp, then whose fd it is)."""
    local = f"0100007F:{client_port:04X}"
    inodes = {
        fields[9]
        for fields in (line.split() for line in Path("/proc/net/tcp").read_text().splitlines()[1:])
        if fields[1] == local and fields[9] != "0"
    }
    links = {f"socket:[{inode}]" for inode in inodes}
    pids = set()
    for fd_dir in Path("/proc").glob("[0-9]*/fd") if links else ():
        with contextlib.suppress(OSError):  # a process that ended, or one of another user's
            for fd in fd_dir.iterdir():
                with contextlib.suppress(OSError):  # a file it closed meanwhile
                    if os.readlink(fd) in links:
                        pids.add(int(fd_dir.parent.name))
    return frozenset(pids)


def query_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events of query runs (not the application run)."""
    return [e for e in events if e["job"]["facets"]["jobType"]["jobType"] == "SQL_JOB"]


def app_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["job"]["facets"]["jobType"]["jobType"] == "APPLICATION"]


def runs_by_job(events: list[dict[str, Any]], job_contains: str) -> list[list[dict[str, Any]]]:
    """The query runs whose job name contains ``job_contains``, each as its events in arrival order."""
    runs: dict[str, list[dict[str, Any]]] = {}
    for event in query_events(events):
        if job_contains in event["job"]["name"]:
            runs.setdefault(event["run"]["runId"], []).append(event)
    return list(runs.values())


def only_run(events: list[dict[str, Any]], job_contains: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The single query run matching ``job_contains``: its START and its final event (RUNNING ones between)."""
    runs = runs_by_job(events, job_contains)
    names = sorted({e["job"]["name"] for e in query_events(events)})
    assert len(runs) == 1, f"expected one run of a job containing {job_contains!r}, got {len(runs)}: {names}"
    (run,) = runs
    assert run_ends([e["eventType"] for e in run])[0] == "START", run
    return run[0], run[-1]


def run_ends(types: list[str]) -> tuple[str, str]:
    """A run's first and last event types, once checked that every event between them is RUNNING (a query run
    has one per Spark job it ran)."""
    assert len(types) >= 2 and all(t == "RUNNING" for t in types[1:-1]), types
    return types[0], types[-1]


def datasets(event: dict[str, Any], kind: str) -> list[tuple[str, str]]:
    return sorted((d["namespace"], d["name"]) for d in event[kind])


def dataset(event: dict[str, Any], kind: str, name: str) -> dict[str, Any]:
    matches = [d for d in event[kind] if d["name"] == name]
    assert len(matches) == 1, f"{kind} named {name}: {datasets(event, kind)}"
    return matches[0]


CLIENT_ENV = "SPARK_LINEAGE_CONNECT_CLIENT_PYTHON"
"""An interpreter with a Spark Connect client of the PySpark line under test (where the line's own has none)."""
REQUIRE_CLIENT_ENV = "SPARK_LINEAGE_REQUIRE_CONNECT_CLIENT"


def client_python() -> str:
    """An interpreter with PySpark's Spark Connect client of the line under test: $SPARK_LINEAGE_CONNECT_CLIENT_PYTHON,
    else this one where it has the client (4.x), else ``connect-client-<line>`` beside its virtual environment
    (3.5: scripts/test makes it, as the line's own cannot take the client's NumPy pin)."""
    named = os.environ.get(CLIENT_ENV)
    if named:
        return named
    grpc = importlib.util.find_spec("grpc")
    # A namespace package (no origin) is no gRPC: Spark's Connect jar, on sys.path once Spark added it, has a
    # ``grpc`` directory of Java classes.
    if grpc is not None and grpc.origin is not None:
        return sys.executable
    import pyspark

    from tests.jars import spark_line

    beside = Path(sys.prefix).parent / f"connect-client-{spark_line(pyspark.__version__)}" / "bin" / "python"
    if beside.is_file():
        return str(beside)
    _no_client(f"no Spark Connect client for pyspark {pyspark.__version__}: none at {beside}, nor ${CLIENT_ENV}")


def _no_client(reason: str) -> NoReturn:
    """Fail where CI requires the client environments ($SPARK_LINEAGE_REQUIRE_CONNECT_CLIENT=1), else skip."""
    import pytest

    if os.environ.get(REQUIRE_CLIENT_ENV) == "1":
        pytest.fail(f"{reason} ({REQUIRE_CLIENT_ENV}=1)")
    pytest.skip(reason)


THIN_CLIENT_VENV = "pyspark-client"
"""The virtual environment beside the line's own with the thin ``pyspark-client`` package (no JVM, no py4j) and
spark-lineage: scripts/test makes it."""


def thin_client_python() -> str:
    """An interpreter with ``pyspark-client`` alone (the Connect client a user who cannot touch the server
    installs) and this project: ``.venvs/pyspark-client``, beside the line's own virtual environment."""
    beside = Path(sys.prefix).parent / THIN_CLIENT_VENV / "bin" / "python"
    if beside.is_file():
        return str(beside)
    _no_client(f"no pyspark-client environment at {beside} (scripts/test makes it)")
