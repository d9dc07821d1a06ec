"""openlineage-spark as the oracle for Spark Connect: the clients of ``connect_scenarios.py`` run the client
pipeline against a Spark Connect server whose listener is the reference's jar, then against one with
spark_lineage enabled on its classic session, each server a Spark application of its own, and the queries'
events are compared as the main suite's are. Datasets and column lineage must be equal; job names differ only
by the application part a client names with its ``spark.openlineage.appName`` (``jobName`` in
``allowed_differences.toml``)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.jars import iceberg_runtime, ships_spark_connect
from tests.parity.connect_scenarios import APPLICATIONS, CLIENTS, CONNECT_SCENARIOS
from tests.parity.driver import APP_NAME
from tests.parity.suite import (
    Runs,
    assert_matches_reference,
    assert_no_stale_allowances,
    run_both,
    selected_scenarios,
    spark_line,
)
from tests.postgres_server import Postgres

# The first test waits for both servers (tests.parity.suite bounds each run).
pytestmark = [pytest.mark.spark, pytest.mark.parity, pytest.mark.timeout(3600)]


@pytest.fixture(scope="module")
def connect_runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, postgres: Postgres | None
) -> Runs:
    """Both servers' runs, one after the other in the same directory: both write the same PostgreSQL tables."""
    pyspark = pytest.importorskip("pyspark")
    if not ships_spark_connect(pyspark.__version__):
        pytest.skip(f"PySpark {spark_line()} ships no Spark Connect server")
    pytest.importorskip("grpc", reason="Spark Connect clients need pyspark[connect]")
    arguments = ["--suite", "connect", *(["--postgres", postgres.jdbc_url] if postgres else [])]
    arguments += selected_scenarios(request, CONNECT_SCENARIOS)
    return run_both(tmp_path_factory.mktemp("connect_parity"), arguments)


@pytest.mark.parametrize("scenario", sorted(CONNECT_SCENARIOS))
def test_connect_client_matches_the_reference(scenario: str, connect_runs: Runs) -> None:
    assert_matches_reference(scenario, connect_runs, applications=APPLICATIONS)


@pytest.mark.parametrize("scenario", sorted(CONNECT_SCENARIOS))
def test_every_write_of_the_pipeline_is_compared(scenario: str, connect_runs: Runs, postgres: Postgres | None) -> None:
    """The comparison holds each write the client pipeline makes, with its column lineage, on both sides: were
    a write reported by neither, it would compare as equal."""
    user = CLIENTS[scenario].user
    written = [
        f"/connect/{user}/people",
        f"/warehouse/{user}_people",
        f"/warehouse/{user}_paris",
        f"/connect/{user}/joined",
    ]
    if iceberg_runtime(pytest.importorskip("pyspark").__version__) is not None:
        written.append(f"/ice/db/{user}_ice")
    if postgres is not None:
        written.append(f".public.{user}_paris")
    for agent, run in connect_runs.items():
        with_lineage = {
            d["name"]
            for e in run[scenario]["events"]
            for d in e.get("outputs") or []
            if (d.get("facets") or {}).get("columnLineage")
        }
        missing = [suffix for suffix in written if not any(name.endswith(suffix) for name in with_lineage)]
        assert not missing, (agent, missing, sorted(with_lineage))


@pytest.mark.parametrize("scenario", sorted(CONNECT_SCENARIOS))
def test_only_spark_lineage_follows_the_clients_parent(scenario: str, connect_runs: Runs) -> None:
    """Why job names may differ: openlineage-spark makes the server's application run the parent of every
    Connect query, whatever the client set; spark_lineage makes it the client's session run, under the parent
    the client set, else under the server's application run as the reference does."""
    client_parent = CLIENTS[scenario].settings.get("spark.openlineage.parentJobName", APP_NAME)
    for agent, root in (("java", APP_NAME), ("python", client_parent)):
        roots = {
            e["run"]["facets"]["parent"]["root"]["job"]["name"]
            for e in connect_runs[agent][scenario]["events"]
            if _job_type(e) == "SQL_JOB"
        }
        assert roots == {root}, agent


def _job_type(event: dict[str, Any]) -> str | None:
    return ((event["job"].get("facets") or {}).get("jobType") or {}).get("jobType")


def test_every_allowed_connect_difference_still_shows(connect_runs: Runs) -> None:
    assert_no_stale_allowances(connect_runs, CONNECT_SCENARIOS, applications=APPLICATIONS)
