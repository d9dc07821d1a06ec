"""Lineage for Spark Connect sessions whose server PySpark starts in the same process (``remote("local[2]")``,
``spark.api.mode=connect``), and ``enable()`` on a session of a server in another process.

Each case runs in a fresh Python process, as a user's program does: PySpark starts one in-process Connect server
per process, always on the same port, so these processes take turns (:func:`local_connect_server_turn`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.jars import CONNECT_PLUGIN, ships_spark_connect
from tests.support import (
    child_process,
    datasets,
    free_port,
    listens,
    local_connect_server_turn,
    only_run,
    validate_event,
    wait_until,
)

pyspark = pytest.importorskip("pyspark")
pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(
        not ships_spark_connect(pyspark.__version__),
        reason="PySpark 3.5 ships no Spark Connect server: remote('local') needs the spark-connect jar from Maven",
    ),
]

WRITE = "execute_insert_into_hadoop_fs_relation_command"

# A local Connect session with lineage confs on its builder, as a notebook or a script makes one; it never
# imports spark_lineage. The write is the client's: run by the server on a Connect session of its own.
BUILDER_JOB = """
import sys
from pyspark.sql import SparkSession

builder = SparkSession.builder
if sys.argv[1] == "remote":
    builder = builder.remote("local[2]")
else:
    builder = builder.config("spark.api.mode", "connect").master("local[2]")
spark = (
    builder.appName("Connect Orders")
    .config("spark.openlineage.transport.type", "file")
    .config("spark.openlineage.transport.location", sys.argv[2])
    .getOrCreate()
)
assert type(spark).__module__ == "pyspark.sql.connect.session", type(spark)
if len(sys.argv) > 3:
    spark.read.schema("id INT, city STRING").csv(sys.argv[3]).write.parquet(sys.argv[4])
spark.stop()
"""


def run_python(code: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``code`` as a program of its own, in this environment, with no OpenLineage settings of ours; it must
    succeed."""
    clean_env = {k: v for k, v in os.environ.items() if not k.startswith("OPENLINEAGE")}
    clean_env.update(PYSPARK_PYTHON=sys.executable, **(env or {}))
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=clean_env,
        check=False,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    return result


def output_of(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    parsed: dict[str, Any] = json.loads(line.removeprefix("RESULT "))
    return parsed


def lineage_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    """What spark_lineage logged (on stderr)."""
    return [line for line in result.stderr.splitlines() if "spark_lineage:" in line]


def read_events(path: Path) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in path.read_text().splitlines()]
    for event in events:
        validate_event(event)
    return events


def application_run(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events of the server's application run: the first event starts it."""
    return [e for e in events if e["run"]["runId"] == events[0]["run"]["runId"]]


def assert_application_run(events: list[dict[str, Any]], name: str) -> None:
    run = application_run(events)
    assert [e["eventType"] for e in run] == ["START", "COMPLETE"]
    for event in run:
        assert (event["job"]["namespace"], event["job"]["name"]) == ("default", name)
        assert event["job"]["facets"]["jobType"]["jobType"] == "APPLICATION"


@pytest.fixture(scope="module")
def client_write(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], Path, Path]:
    """One ``remote("local[2]")`` program with lineage confs on its builder that writes a parquet directory from
    a CSV one: its events, the input and the output."""
    workdir = tmp_path_factory.mktemp("connect_write")
    orders = workdir / "orders"
    orders.mkdir()
    (orders / "part-0.csv").write_text("1,paris\n2,oslo\n")
    events, output = workdir / "events.jsonl", workdir / "clean_orders"
    with local_connect_server_turn():
        run_python(BUILDER_JOB, "remote", str(events), str(orders), str(output))
    return read_events(events), orders, output


def test_builder_confs_turn_lineage_on_for_the_in_process_server(
    client_write: tuple[list[dict[str, Any]], Path, Path],
) -> None:
    events, _, _ = client_write
    assert_application_run(events, "connect_orders")


def test_builder_confs_with_api_mode_connect_turn_lineage_on_too(tmp_path: Path) -> None:
    events, spool = tmp_path / "events.jsonl", tmp_path / "spool"
    with local_connect_server_turn():
        result = run_python(BUILDER_JOB, "api_mode", str(events), env={"SPARK_LINEAGE_SPOOL_DIR": str(spool)})
    assert_application_run(read_events(events), "connect_orders")
    # The line a job turned on by configuration alone prints, as for a classic session
    assert lineage_lines(result)[0] == (
        f"spark_lineage: lineage on for application connect_orders (namespace default); events go to file {events} "
        f"(spooled in {spool})"
    )


def test_a_client_write_is_reported_under_its_connect_sessions_run(
    client_write: tuple[list[dict[str, Any]], Path, Path],
) -> None:
    events, orders, output = client_write
    _, end = only_run(events, WRITE)
    assert end["eventType"] == "COMPLETE"
    assert end["job"]["name"] == f"connect_orders.{WRITE}.{output.parent.name}_{output.name}"
    assert datasets(end, "inputs") == [("file", str(orders))]
    assert datasets(end, "outputs") == [("file", str(output))]
    assert_parents(events, end, "connect_orders.connect_session")


def assert_parents(events: list[dict[str, Any]], query: dict[str, Any], session_job: str) -> None:
    """``query``'s parent is its Connect session's run (job ``session_job``), whose parent is the server's
    application run."""
    (session_start,) = [e for e in events if e["job"]["name"] == session_job and e["eventType"] == "START"]
    parent = query["run"]["facets"]["parent"]
    assert (parent["job"]["name"], parent["run"]["runId"]) == (session_job, session_start["run"]["runId"])
    assert session_start["run"]["facets"]["parent"]["run"]["runId"] == events[0]["run"]["runId"]


ENABLE_JOB = """
import json, logging, sys
from pyspark.sql import SparkSession
from pyspark.sql.session import SparkSession as ClassicSession
import spark_lineage

logging.basicConfig(format="%(levelname)s %(message)s")
spark = SparkSession.builder.remote("local[2]").appName("Connect Enable").getOrCreate()
# Settings of the client's own session: they reach the server's Connect session, not its classic one.
spark.conf.set("spark.openlineage.transport.type", "file")
spark.conf.set("spark.openlineage.transport.location", sys.argv[1])
spark.conf.set("spark.openlineage.appName", "client_app")  # names the client session's run, not the server's
handle = spark_lineage.enable(spark)
spark.range(3).write.parquet(sys.argv[2])
result = {
    "enabled": handle.enabled,
    "app_run_id": handle.app_run_id,
    "again": spark_lineage.enable(spark) is handle,
    "server_session": spark_lineage.enable(ClassicSession._instantiatedSession) is handle,
    "flushed": handle.flush(60),
}
spark.stop()
print("RESULT " + json.dumps(result))
"""


def test_enable_on_a_connect_session_turns_lineage_on_for_its_in_process_server(tmp_path: Path) -> None:
    events, output = tmp_path / "events.jsonl", tmp_path / "numbers"
    with local_connect_server_turn():
        result = run_python(ENABLE_JOB, str(events), str(output))
    found = output_of(result)
    assert found == {
        "enabled": True,
        "app_run_id": found["app_run_id"],
        "again": True,
        "server_session": True,
        "flushed": True,
    }
    assert lineage_lines(result) == []  # the client's transport is the server's own now: nothing refused
    written = read_events(events)
    assert_application_run(written, "connect_enable")
    assert written[0]["run"]["runId"] == found["app_run_id"]
    # The client's appName names its session's run and its queries
    _, end = only_run(written, WRITE)
    assert end["job"]["name"] == f"client_app.{WRITE}.{tmp_path.name}_numbers"
    assert datasets(end, "outputs") == [("file", str(output))]
    assert_parents(written, end, "client_app")


# A Connect server in a process of its own: a classic session with Spark Connect's plugin, no lineage.
SERVER = """
import sys, time
from pyspark.sql import SparkSession

SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").config("spark.plugins", sys.argv[2]).config(
    "spark.connect.grpc.binding.port", sys.argv[1]
).getOrCreate()
print("serving", flush=True)
time.sleep(3600)
"""

REMOTE_CLIENT = """
import json, logging, sys
from pyspark.sql import SparkSession
import spark_lineage

logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
handle = spark_lineage.enable(spark, transport={"type": "file", "log_file_path": sys.argv[2]})
result = {"enabled": handle.enabled, "flushed": handle.flush(5), "rows": spark.range(3).count()}
handle.disable()
spark.stop()
print("RESULT " + json.dumps(result))
"""
CLIENT_SIDE = "INFO spark_lineage: lineage on for Spark Connect session "
"""How the line saying a client reports its own session's lineage starts (tests/integration/
test_connect_client.py holds what it reports to the server side's lineage)."""


@pytest.fixture(scope="module")
def remote_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """The port of a Spark Connect server running in another process."""
    port = free_port()
    log = tmp_path_factory.mktemp("connect_server") / "server.log"
    command = [sys.executable, "-c", textwrap.dedent(SERVER), str(port), CONNECT_PLUGIN]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENLINEAGE", "SPARK_CONNECT"))}
    with child_process(command, log, env) as server:
        wait_until(lambda: listens(port), server, log, f"Spark Connect listens on port {port}", timeout=180)
        yield port


def test_enable_on_a_session_of_a_server_elsewhere_reports_it_from_the_client(
    remote_server: int, tmp_path: Path
) -> None:
    url, events = f"sc://127.0.0.1:{remote_server}", tmp_path / "events.jsonl"
    result = run_python(REMOTE_CLIENT, url, str(events))
    assert output_of(result) == {"enabled": True, "flushed": True, "rows": 3}
    (line,) = [line for line in lineage_lines(result) if line.startswith(CLIENT_SIDE)]
    assert ", derived on the client; events go to file " in line
    # A count writes nothing: the session's run alone.
    run = read_events(events)
    assert [e["eventType"] for e in run] == ["START", "COMPLETE"]
    assert run[0]["job"]["name"].endswith(".connect_session")
    assert run[0]["run"]["facets"]["spark_connect"]["derivedOnClient"] is True


MIXED_CLIENT = """
import json, logging, sys
from pyspark.sql import SparkSession
import spark_lineage

logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
local = SparkSession.builder.remote("local[2]").getOrCreate()
# PySpark gives every client of this process the local server's token: a loopback host name takes it plainly.
elsewhere = SparkSession.builder.remote(sys.argv[1]).create()
result = {
    "elsewhere": spark_lineage.enable(elsewhere, transport={"type": "console"}).enabled,
    "local": spark_lineage.enable(local, transport={"type": "console"}).enabled,
    "rows": elsewhere.range(3).count() + local.range(2).count(),
}
local.stop()  # first: stopping any Connect session stops PySpark's local server, which local's release needs
elsewhere.stop()
print("RESULT " + json.dumps(result))
"""


def test_enable_tells_the_in_process_server_from_one_elsewhere_in_the_same_process(remote_server: int) -> None:
    url = f"sc://localhost:{remote_server}"
    with local_connect_server_turn():
        result = run_python(MIXED_CLIENT, url)
    assert output_of(result) == {"elsewhere": True, "local": True, "rows": 5}
    # The session elsewhere is reported by its client; the local one by the server this process runs.
    assert len([line for line in lineage_lines(result) if line.startswith(CLIENT_SIDE)]) == 1
    assert len([line for line in lineage_lines(result) if "spark_lineage: lineage on for application " in line]) == 1
    assert not [line for line in lineage_lines(result) if line.startswith("WARNING")]


FAILING_CLIENT = """
import sys
from pyspark.sql import SparkSession
import spark_lineage

spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
spark_lineage.enable(spark, transport={"type": "file", "log_file_path": sys.argv[2]})
spark.range(3).write.mode("overwrite").parquet(sys.argv[3])
raise RuntimeError("the job broke after its write")
"""


def test_a_client_that_dies_of_an_exception_ends_its_session_run_fail_with_it(
    remote_server: int, tmp_path: Path
) -> None:
    """The client's own lineage ends with the process, as a driver's does (:mod:`spark_lineage.endings`): its
    write is reported, and its session's run ends FAIL with the exception that ended the process."""
    events, output = tmp_path / "events.jsonl", tmp_path / "out"
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(FAILING_CLIENT),
            f"sc://127.0.0.1:{remote_server}",
            str(events),
            str(output),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if not k.startswith("OPENLINEAGE")},
        check=False,
    )
    assert result.returncode == 1 and "RuntimeError: the job broke after its write" in result.stderr
    read = read_events(events)
    session = [e for e in read if e["job"]["facets"]["jobType"]["jobType"] == "APPLICATION"]
    assert [e["eventType"] for e in session] == ["START", "FAIL"]
    assert session[1]["run"]["facets"]["errorMessage"]["message"] == "RuntimeError: the job broke after its write"
    writes = [e for e in read if e["job"]["facets"]["jobType"]["jobType"] == "SQL_JOB"]
    assert [e["eventType"] for e in writes] == ["START", "COMPLETE"]
    assert [(d["namespace"], d["name"]) for d in writes[1]["outputs"]] == [("file", str(output))]
    assert writes[1]["job"]["name"].endswith(f".execute_insert_into_hadoop_fs_relation_command.{tmp_path.name}_out")
