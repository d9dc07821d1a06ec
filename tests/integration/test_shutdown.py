"""The application run ends with the process: COMPLETE at spark.stop() or exit, FAIL on an uncaught exception,
a non-zero ``sys.exit``, SIGTERM, or the JVM ending first, ABORT on Ctrl-C.

Each case runs a real job in its own process (plain ``python`` or ``spark-submit``) that sends its events to a
receiver in this test process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from spark_lineage.delivery.spool import SPOOL_FILE, Spool
from tests.support import LineageReceiver, app_events, only_run, query_events, replay

pytestmark = pytest.mark.spark

JOB = """
import os, sys, time
from pyspark.sql import SparkSession
import spark_lineage

spark = SparkSession.builder.master("local[1]").appName("Exit Job").config("spark.ui.enabled", "false").getOrCreate()
spark_lineage.enable(spark, transport={{"type": "http", "url": sys.argv[1]}})
spark.range(4).write.parquet(sys.argv[2])
{ending}
"""

ENDINGS = {
    "spark_stop": """
spark.stop()
try:
    spark_lineage.enable(spark)
except spark_lineage.StoppedSessionError as error:
    print(error)
""",
    "no_stop": "print('leaving without spark.stop()')",
    "uncaught_exception": "raise RuntimeError('job exploded')",
    "sys_exit_3": "sys.exit(3)",
    # Waits for a signal from the test: Ctrl-C (SIGINT) or SIGTERM.
    "signal": "print('written', flush=True)\ntime.sleep(120)",
    # Waits for the test to end the JVM (under spark-submit, its parent), and outlives it.
    "outlive_the_jvm": "print('written', os.getpid(), os.getppid(), flush=True)\ntime.sleep(600)",
}


def _start_job(tmp_path: Path, ending: str, url: str, submit: bool) -> subprocess.Popen[str]:
    import pyspark

    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(JOB.format(ending=ENDINGS[ending])))
    output = tmp_path / "out"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    if submit:
        spark_submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
        command = [str(spark_submit), "--master", "local[1]", str(script), url, str(output)]
    else:
        command = [sys.executable, str(script), url, str(output)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _run_job(
    tmp_path: Path, ending: str, url: str, submit: bool, send: signal.Signals | None = None
) -> subprocess.CompletedProcess[str]:
    process = _start_job(tmp_path, ending, url, submit)
    assert process.stdout is not None
    if send is not None:
        line = process.stdout.readline()
        assert line == "written\n", line + (process.stderr.read() if process.stderr else "")
        process.send_signal(send)
    try:
        out, err = process.communicate(timeout=300)
    finally:
        process.kill()
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


@pytest.mark.parametrize(
    ("ending", "submit", "final_state"),
    [
        ("spark_stop", False, "COMPLETE"),
        # How the process ends is Python's business, not the PySpark line's: run these once.
        # Under spark-submit the JVM watch runs too, and neither a stop nor an exit is the JVM ending first.
        pytest.param("spark_stop", True, "COMPLETE", marks=pytest.mark.once),
        pytest.param("no_stop", True, "COMPLETE", marks=pytest.mark.once),
        pytest.param("uncaught_exception", True, "FAIL", marks=pytest.mark.once),
    ],
)
def test_application_run_ends_with_the_process(
    tmp_path: Path, receiver: LineageReceiver, ending: str, submit: bool, final_state: str
) -> None:
    result = _run_job(tmp_path, ending, receiver.url, submit)
    assert (result.returncode == 0) == (final_state == "COMPLETE"), result.stderr[-3000:]
    if ending == "spark_stop":
        assert "enable() was given a SparkSession whose SparkContext is stopped" in result.stdout

    start, end = app_events(receiver.events)
    assert (start["eventType"], end["eventType"]) == ("START", final_state)
    assert receiver.events[-1] is end
    assert start["job"]["name"] == "exit_job"
    _, query_end = only_run(receiver.events, "execute_insert_into_hadoop_fs_relation_command")
    assert query_end["eventType"] == "COMPLETE"
    assert query_end["outputs"][0]["name"] == str(tmp_path / "out")
    assert query_end["run"]["facets"]["parent"]["run"]["runId"] == start["run"]["runId"]
    if final_state == "FAIL":
        error = end["run"]["facets"]["errorMessage"]
        assert error["message"] == "RuntimeError: job exploded"
        assert error["programmingLanguage"] == "PYTHON"
        assert "raise RuntimeError('job exploded')" in error["stackTrace"]


@pytest.mark.once
@pytest.mark.parametrize(
    ("ending", "send", "returncode", "final_state", "message"),
    [
        ("sys_exit_3", None, 3, "FAIL", "the application exited with code 3 (sys.exit)"),
        ("signal", signal.SIGINT, -signal.SIGINT, "ABORT", "the application was interrupted (KeyboardInterrupt)"),
    ],
)
def test_exit_code_and_ctrl_c_end_the_application_run_honestly(
    tmp_path: Path,
    receiver: LineageReceiver,
    ending: str,
    send: signal.Signals | None,
    returncode: int,
    final_state: str,
    message: str,
) -> None:
    result = _run_job(tmp_path, ending, receiver.url, submit=False, send=send)
    assert result.returncode == returncode, result.stderr[-3000:]
    start, end = app_events(receiver.events)
    assert (start["eventType"], end["eventType"]) == ("START", final_state)
    assert end["run"]["facets"]["errorMessage"]["message"] == message
    _, query_end = only_run(receiver.events, "execute_insert_into_hadoop_fs_relation_command")
    assert query_end["eventType"] == "COMPLETE"


@pytest.mark.once
def test_sigterm_ends_the_application_run_even_with_the_backend_down(
    tmp_path: Path, receiver: LineageReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A killed driver's application run always ends: the FAIL is spooled inside the signal handler before
    anything is sent, so with the backend down at that moment a later replay still delivers it."""
    receiver.stop()
    spool = tmp_path / "spool"
    monkeypatch.setenv("SPARK_LINEAGE_SPOOL_DIR", str(spool))
    result = _run_job(tmp_path, "signal", receiver.url, submit=False, send=signal.SIGTERM)
    assert result.returncode == -signal.SIGTERM, result.stderr[-3000:]
    assert f"spark-lineage replay --spool {spool}" in result.stderr
    _replay_all(receiver, spool)
    _assert_whole_runs_and_a_failed_application(receiver, "the application was terminated by SIGTERM")


REFUSED_JOB = """
import sys
from pyspark.sql import SparkSession
import spark_lineage

spark = SparkSession.builder.master("local[1]").appName("Exit Job").config("spark.ui.enabled", "false").getOrCreate()
# An hour to deliver at the end: a stop that waited for the refusing backend would outlast the test.
spark_lineage.enable(spark, transport={"type": "http", "url": sys.argv[1]}, python={"shutdownTimeoutSeconds": 3600})
spark.range(4).write.parquet(sys.argv[2])
spark.stop()
"""


@pytest.mark.once
def test_a_refusing_backend_costs_the_stop_no_wait_when_everything_is_spooled(
    tmp_path: Path, receiver: LineageReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every event is on disk: spark.stop() does not wait for a backend that refuses connections (nor its
    backoff), however long python.shutdownTimeoutSeconds allows; the end line says what a replay delivers."""
    receiver.stop()
    spool = tmp_path / "spool"
    monkeypatch.setenv("SPARK_LINEAGE_SPOOL_DIR", str(spool))
    script = tmp_path / "job.py"
    script.write_text(REFUSED_JOB)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    result = subprocess.run(
        [sys.executable, str(script), receiver.url, str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "6 lineage events: 0 delivered, 6 spooled for replay, 0 lost" in result.stderr, result.stderr[-3000:]
    _replay_all(receiver, spool)
    start, end = app_events(receiver.events)
    assert (start["eventType"], end["eventType"]) == ("START", "COMPLETE")


def _replay_all(receiver: LineageReceiver, spool: Path) -> None:
    """With the backend back, replay the spool of a job that sent nothing: its 6 events."""
    assert receiver.events == []
    receiver.start()
    result = replay(spool)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == f"spark-lineage replay: 6 of 6 events delivered from {spool}"


def _assert_whole_runs_and_a_failed_application(receiver: LineageReceiver, message: str) -> None:
    """The application's START and FAIL (with ``message``); the write's START, RUNNING as its job starts and
    ends, COMPLETE; each event once."""
    start, end = app_events(receiver.events)
    assert (start["eventType"], end["eventType"]) == ("START", "FAIL")
    assert end["run"]["facets"]["errorMessage"]["message"] == message
    assert end["run"]["facets"]["errorMessage"]["programmingLanguage"] == "PYTHON"
    assert [e["eventType"] for e in query_events(receiver.events)] == ["START", "RUNNING", "RUNNING", "COMPLETE"]
    assert set(receiver.copies().values()) == {1}


@pytest.mark.once
@pytest.mark.parametrize("send", [signal.SIGTERM, signal.SIGKILL])
def test_the_jvm_ending_first_fails_the_application_run(
    tmp_path: Path, receiver: LineageReceiver, monkeypatch: pytest.MonkeyPatch, send: signal.Signals
) -> None:
    """YARN and Kubernetes stop a spark-submit by signalling its JVM, which sends the Python driver no signal:
    the driver outlives its JVM, sees it end, and ends the application run as FAIL, terminal event spooled
    first. With the JVM SIGKILLed and the backend down, a replay delivers it."""
    spool = tmp_path / "spool"
    monkeypatch.setenv("SPARK_LINEAGE_SPOOL_DIR", str(spool))
    backend_down = send == signal.SIGKILL
    if backend_down:
        receiver.stop()
    jvm = _start_job(tmp_path, "outlive_the_jvm", receiver.url, submit=True)
    assert jvm.stdout is not None and jvm.stderr is not None
    driver = 0
    try:
        # spark-submit gives the driver's stdout and stderr (lineage's log line) to the JVM's stdout.
        lines = [jvm.stdout.readline()]
        while lines[-1] and not lines[-1].startswith("written"):
            lines.append(jvm.stdout.readline())
        assert lines[-1].startswith("written"), "".join(lines)[-3000:]
        driver, parent = map(int, lines[-1].split()[1:])
        # bin/spark-submit execs the JVM: the process started is the JVM, and the Python driver its child.
        assert parent == jvm.pid
        assert b"org.apache.spark.deploy.SparkSubmit" in Path(f"/proc/{jvm.pid}/cmdline").read_bytes()
        # The application's START and the write's START, RUNNING as its job starts and ends, COMPLETE.
        if backend_down:
            _until(lambda: _spooled(spool) == 5, "the write's events in the spool")
        else:
            _until(lambda: len(receiver.events) == 5, "the write's events at the backend")

        jvm.send_signal(send)
        # SIGTERM: the JVM's shutdown hooks run (they stop the SparkContext), then it exits with 128 + 15.
        assert jvm.wait(timeout=120) == (-send if backend_down else 128 + send)
        if backend_down:
            _until(lambda: _spooled(spool) == 6, "the application's terminal event in the spool")
        else:
            _until(lambda: len(receiver.events) == 6, "the application's terminal event at the backend")
        assert _running(driver), "the job goes on (its own next Spark call fails, not a call of lineage's)"
    finally:
        jvm.kill()
        jvm.communicate()
        if driver:
            _kill(driver)

    if backend_down:
        _replay_all(receiver, spool)
    _assert_whole_runs_and_a_failed_application(receiver, "the JVM ended")
    _, query_end = only_run(receiver.events, "execute_insert_into_hadoop_fs_relation_command")
    assert query_end["outputs"][0]["name"] == str(tmp_path / "out")


def _until(done: Callable[[], bool], what: str, seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, f"no {what} after {seconds:.0f} s"
        time.sleep(0.1)


def _spooled(spool: Path) -> int:
    """How many events wait in the spool (none before the job makes it)."""
    if not (spool / SPOOL_FILE).is_file():
        return 0
    store = Spool(spool)
    try:
        return store.pending().count
    finally:
        store.close()


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (a process that ended but was not reaped yet does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _kill(pid: int) -> None:
    """SIGKILL a process that is not this one's child, and wait until it has ended."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    _until(lambda: not _running(pid), f"end of process {pid}")
