"""The application run ends with the process: COMPLETE at spark.stop() or exit, FAIL on an uncaught exception,
a non-zero ``sys.exit`` or SIGTERM, ABORT on Ctrl-C.

Each case runs a real job in its own process (plain ``python`` or ``spark-submit``) that sends its events to a
receiver in this test process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support import LineageReceiver, app_events, only_run, query_events, replay

pytestmark = pytest.mark.spark

JOB = """
import sys, time
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
}


def _run_job(
    tmp_path: Path, ending: str, url: str, submit: bool, send: signal.Signals | None = None
) -> subprocess.CompletedProcess[str]:
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
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert process.stdout is not None
    if send is not None:
        line = process.stdout.readline()
        assert line == "written\n", line + (process.stderr.read() if process.stderr else "")
        process.send_signal(send)
    try:
        out, err = process.communicate(timeout=300)
    finally:
        process.kill()
    return subprocess.CompletedProcess(command, process.returncode, out, err)


@pytest.mark.parametrize(
    ("ending", "submit", "final_state"),
    [
        ("spark_stop", False, "COMPLETE"),
        # How the process ends is Python's business, not the PySpark line's: run these once.
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
    assert receiver.events == []

    receiver.start()
    result = replay(spool)
    assert result.returncode == 0, result.stdout + result.stderr
    # The application's START and FAIL; the write's START, RUNNING as its job starts and ends, COMPLETE.
    assert result.stdout.strip() == f"spark-lineage replay: 6 of 6 events delivered from {spool}"
    start, end = app_events(receiver.events)
    assert (start["eventType"], end["eventType"]) == ("START", "FAIL")
    assert end["run"]["facets"]["errorMessage"]["message"] == "the application was terminated by SIGTERM"
    assert [e["eventType"] for e in query_events(receiver.events)] == ["START", "RUNNING", "RUNNING", "COMPLETE"]
    assert set(receiver.copies().values()) == {1}
