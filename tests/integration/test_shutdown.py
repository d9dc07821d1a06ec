"""The application run ends with the process: COMPLETE at spark.stop() or exit, FAIL on an uncaught exception.

Each case runs a real job in its own process (plain ``python`` or ``spark-submit``) that sends its events to a
receiver in this test process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support import LineageReceiver, app_events, only_run

pytestmark = pytest.mark.spark

JOB = """
import sys
from pyspark.sql import SparkSession
import spark_lineage

spark = SparkSession.builder.master("local[1]").appName("Exit Job").config("spark.ui.enabled", "false").getOrCreate()
spark_lineage.enable(spark, transport={{"type": "http", "url": sys.argv[1]}})
spark.range(4).write.parquet(sys.argv[2])
{ending}
"""

ENDINGS = {
    "spark_stop": "spark.stop()\nprint('stopped')",
    "no_stop": "print('leaving without spark.stop()')",
    "uncaught_exception": "raise RuntimeError('job exploded')",
}


def _run_job(tmp_path: Path, ending: str, receiver: LineageReceiver, submit: bool) -> subprocess.CompletedProcess[str]:
    import pyspark

    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(JOB.format(ending=ENDINGS[ending])))
    output = tmp_path / "out"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    if submit:
        spark_submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
        command = [str(spark_submit), "--master", "local[1]", str(script), receiver.url, str(output)]
    else:
        command = [sys.executable, str(script), receiver.url, str(output)]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, check=False)


@pytest.mark.parametrize(
    ("ending", "submit", "final_state"),
    [
        ("spark_stop", False, "COMPLETE"),
        ("no_stop", True, "COMPLETE"),
        ("uncaught_exception", True, "FAIL"),
    ],
)
def test_application_run_ends_with_the_process(
    tmp_path: Path, receiver: LineageReceiver, ending: str, submit: bool, final_state: str
) -> None:
    result = _run_job(tmp_path, ending, receiver, submit)
    assert (result.returncode == 0) == (final_state == "COMPLETE"), result.stderr[-3000:]

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
