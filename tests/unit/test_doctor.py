"""``spark-lineage doctor``, run as users run it: the installed command, in its own process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from spark_lineage.config import JAVA_AGENT_LISTENER
from tests.support import LineageReceiver


def doctor(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENLINEAGE", "SPARK_CONF_DIR", "PYSPARK"))}
    command = [sys.executable, "-m", "spark_lineage.cli", "doctor", *args]
    return subprocess.run(command, capture_output=True, text=True, env={**clean, **env}, timeout=60, check=False)


def lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    return result.stdout.splitlines()


def test_configured_and_answering(receiver: LineageReceiver) -> None:
    result = doctor(
        "--conf", "spark.openlineage.transport.type=http", "--conf", f"spark.openlineage.transport.url={receiver.url}"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert lines(result)[0].startswith("[ok]  start-up hook installed: ")
    assert lines(result)[0].endswith("spark_lineage.pth")
    assert lines(result)[1:] == [
        "[--]  Spark confs read from: --conf",
        "[ok]  spark-submit jobs here get lineage: spark.openlineage.transport.type is set",
        f"[--]  transport: http to {receiver.url} (from spark.openlineage.transport.*)",
        f"[ok]  backend: {receiver.url}/api/v1/lineage answers (HTTP 501 to a GET; events are POSTed there)",
    ]
    assert receiver.events == []


def test_enabled_flag_with_the_client_configuration_pointing_nowhere() -> None:
    result = doctor("--conf", "spark.openlineage.enabled=true", OPENLINEAGE_URL="http://127.0.0.1:9")
    assert result.returncode == 1
    assert lines(result)[2:] == [
        "[ok]  spark-submit jobs here get lineage: spark.openlineage.enabled=true",
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
    assert lines(result)[1:3] == [
        f"[--]  Spark confs read from: {tmp_path / 'spark-defaults.conf'}, PYSPARK_SUBMIT_ARGS",
        f"[--]  spark-submit jobs here get no lineage: spark.extraListeners loads openlineage-spark "
        f"({JAVA_AGENT_LISTENER}), which already reports this application; spark_lineage stays off so no event "
        "is sent twice",
    ]


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
