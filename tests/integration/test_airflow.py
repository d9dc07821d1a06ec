"""Airflow runs the two DAGs of ``examples/airflow/`` with its OpenLineage provider, and each Spark run is a
child of the Airflow task that ran it.

A real Airflow (``airflow dags test``, a sqlite metadata database) in an environment of its own
(``scripts/test`` makes ``.venvs/airflow`` and names it in ``SPARK_LINEAGE_AIRFLOW_VENV``), its provider
sending Airflow's events over HTTP to a receiver on loopback, which validates every event against the
OpenLineage schemas. The provider injects the parent and that transport into the ``spark-submit`` of a
``SparkSubmitOperator``; a ``@task.pyspark`` task passes what the provider would inject to
``spark_lineage.enable``. The Spark application run's parent must be the task run Airflow's own events
report, and the root of every Spark run the DAG run.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support import REPO_ROOT, LineageReceiver, datasets, run_ends

pytestmark = [pytest.mark.once, pytest.mark.timeout(900)]

EXAMPLES = REPO_ROOT / "examples" / "airflow"
NAMESPACE = "airflow_example"
"""The OpenLineage namespace Airflow's provider is configured with here."""
COMMAND_TIMEOUT_SECONDS = 600


@dataclass
class Airflow:
    """An Airflow home with its metadata database made, and the environment its commands run with."""

    env: dict[str, str]
    data: Path

    def dags_test(self, dag_id: str) -> None:
        result = subprocess.run(
            [self.env["AIRFLOW_BIN"], "dags", "test", dag_id],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_SECONDS,
            check=False,
        )
        assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
        assert "Marking run" in result.stdout + result.stderr and "successful" in result.stdout + result.stderr


def airflow_venv() -> Path:
    found = os.environ.get("SPARK_LINEAGE_AIRFLOW_VENV")
    if found and (Path(found) / "bin" / "airflow").exists():
        return Path(found)
    if os.environ.get("SPARK_LINEAGE_REQUIRE_AIRFLOW"):
        pytest.fail(f"no Airflow environment at SPARK_LINEAGE_AIRFLOW_VENV={found!r} (scripts/test makes one)")
    pytest.skip("no Airflow environment here (scripts/test makes one and names it in SPARK_LINEAGE_AIRFLOW_VENV)")


@pytest.fixture(scope="module")
def receiver() -> Iterator[LineageReceiver]:
    server = LineageReceiver()
    yield server
    server.close()


@pytest.fixture(scope="module")
def airflow(tmp_path_factory: pytest.TempPathFactory, receiver: LineageReceiver) -> Airflow:
    venv = airflow_venv()
    home = tmp_path_factory.mktemp("airflow_home")
    data = tmp_path_factory.mktemp("airflow_data")
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AIRFLOW", "OPENLINEAGE", "SPARK_LINEAGE_", "PYSPARK", "SPARK_HOME", "PYTHONPATH"))
    }
    env.update(
        AIRFLOW_BIN=str(venv / "bin" / "airflow"),
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",  # spark-submit, and the driver's python
        PYSPARK_PYTHON=str(venv / "bin" / "python"),
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__DAGS_FOLDER=str(EXAMPLES / "dags"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__OPENLINEAGE__NAMESPACE=NAMESPACE,
        AIRFLOW__OPENLINEAGE__SPARK_INJECT_PARENT_JOB_INFO="True",
        AIRFLOW__OPENLINEAGE__SPARK_INJECT_TRANSPORT_INFO="True",
        OPENLINEAGE_URL=receiver.url,
        AIRFLOW_CONN_SPARK_LOCAL='{"conn_type": "spark", "host": "local[1]"}',
        SPARK_LINEAGE_EXAMPLE_DATA=str(data),
        SPARK_LINEAGE_SPOOL_DIR=str(home / "spool"),
    )
    result = subprocess.run(
        [env["AIRFLOW_BIN"], "db", "migrate"],
        env=env,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_SECONDS,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return Airflow(env, data)


def _of_dag(receiver: LineageReceiver, dag_id: str) -> list[dict[str, Any]]:
    """The events of a DAG's run: Airflow's (the DAG run and its tasks') and Spark's, whose root it is."""
    assert not receiver.invalid, receiver.invalid
    found = []
    for event in receiver.events:
        parent = (event["run"].get("facets") or {}).get("parent") or {}
        root = parent.get("root") or parent
        if event["job"]["name"].startswith(f"{dag_id}") or root.get("job", {}).get("name") == dag_id:
            found.append(event)
    return found


def _assert_children_of_the_task(events: list[dict[str, Any]], dag_id: str, task_id: str, app: str) -> None:
    """Airflow reported the DAG run and the task run; the Spark application's run is the task run's child, and
    every Spark run has the DAG run as its root."""
    airflow = [e for e in events if e["job"]["namespace"] == NAMESPACE]
    (task_run,) = {e["run"]["runId"] for e in airflow if e["job"]["name"] == f"{dag_id}.{task_id}"}
    (dag_run,) = {e["run"]["runId"] for e in airflow if e["job"]["name"] == dag_id}
    spark = [e for e in events if e["job"]["namespace"] != NAMESPACE]
    applications = [e for e in spark if e["job"]["facets"]["jobType"]["jobType"] == "APPLICATION"]
    assert run_ends([e["eventType"] for e in applications]) == ("START", "COMPLETE")
    assert {e["job"]["name"] for e in applications} == {app}
    for event in applications:
        parent = event["run"]["facets"]["parent"]
        assert _job_and_run(parent) == (NAMESPACE, f"{dag_id}.{task_id}", task_run)
        assert _job_and_run(parent["root"]) == (NAMESPACE, dag_id, dag_run)
    queries = [e for e in spark if e not in applications]
    assert queries, "the job's queries were reported"
    for event in queries:
        assert _job_and_run(event["run"]["facets"]["parent"]["root"]) == (NAMESPACE, dag_id, dag_run)


def _job_and_run(parent: dict[str, Any]) -> tuple[str, str, str]:
    """A parent facet's (or its root's) job namespace and name, and run id."""
    return parent["job"]["namespace"], parent["job"]["name"], parent["run"]["runId"]


def test_a_spark_submit_operator_s_runs_are_children_of_its_task(airflow: Airflow, receiver: LineageReceiver) -> None:
    airflow.dags_test("spark_lineage_submit")
    events = _of_dag(receiver, "spark_lineage_submit")
    _assert_children_of_the_task(events, "spark_lineage_submit", "revenue_by_city", "revenue_by_city")
    writes = [e for e in events if e["eventType"] == "COMPLETE" and e["outputs"]]
    assert [(datasets(e, "inputs"), datasets(e, "outputs")) for e in writes] == [
        ([], [("file", str(airflow.data / "orders"))]),
        ([("file", str(airflow.data / "orders"))], [("file", str(airflow.data / "revenue_by_city"))]),
    ]


def test_a_pyspark_task_s_runs_are_children_of_its_task(airflow: Airflow, receiver: LineageReceiver) -> None:
    airflow.dags_test("spark_lineage_pyspark_task")
    events = _of_dag(receiver, "spark_lineage_pyspark_task")
    app = "spark_lineage_pyspark_task_big_orders"  # the application name the Spark provider gives the session
    _assert_children_of_the_task(events, "spark_lineage_pyspark_task", "big_orders", app)
    writes = [e for e in events if e["eventType"] == "COMPLETE" and e["outputs"]]
    assert [datasets(e, "outputs") for e in writes] == [[("file", str(airflow.data / "big_orders"))]]
