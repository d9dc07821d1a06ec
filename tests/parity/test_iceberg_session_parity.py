"""openlineage-spark as the oracle for Iceberg's ``SparkSessionCatalog``: every scenario in
``iceberg_session_scenarios.py`` runs once under its jar and once under spark_lineage, each in a Spark
application of its own with Iceberg's catalog as ``spark_catalog`` (the main suite's session catalog is
Spark's own), and the events are compared as the main suite's are, with the ``schema`` and ``version``
dataset facets compared as well."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.parity.iceberg_session_scenarios import ICEBERG_SESSION_SCENARIOS
from tests.parity.suite import Runs, assert_matches_reference, assert_no_stale_allowances, run_suite

COMPARED_FACETS = ("schema", "version")
"""What DDL on an Iceberg table says about it: the schema it leaves, the snapshot it made."""

# The first test waits for both Spark applications of the suite (tests.parity.suite bounds each run).
pytestmark = [pytest.mark.spark, pytest.mark.parity, pytest.mark.iceberg, pytest.mark.timeout(3600)]


@pytest.fixture(scope="module")
def iceberg_session_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    return same_snapshots(run_suite(request, tmp_path_factory, "iceberg_session", ICEBERG_SESSION_SCENARIOS))


@pytest.mark.parametrize("scenario", sorted(ICEBERG_SESSION_SCENARIOS))
def test_iceberg_session_scenario_matches_the_reference(scenario: str, iceberg_session_runs: Runs) -> None:
    assert_matches_reference(scenario, iceberg_session_runs, COMPARED_FACETS)


def test_every_allowed_iceberg_session_difference_still_shows(iceberg_session_runs: Runs) -> None:
    assert_no_stale_allowances(iceberg_session_runs, ICEBERG_SESSION_SCENARIOS, COMPARED_FACETS)


def same_snapshots(runs: Runs) -> Runs:
    """Both runs with each snapshot id written ``SNAPSHOT-<n>``, ``n`` counting the distinct ids of a scenario
    in the order they show: Iceberg draws snapshot ids at random, so the two runs' ``version`` facets can only
    agree on which snapshot each dataset is at, once the ids themselves are taken out."""
    renamed: Runs = {}
    for agent, run in runs.items():
        renamed[agent] = {}
        for scenario, result in run.items():
            ids: dict[str, str] = {}

            def rename(match: re.Match[str], ids: dict[str, str] = ids) -> str:
                return f'"datasetVersion": "SNAPSHOT-{ids.setdefault(match.group(1), str(len(ids) + 1))}"'

            text = re.sub(r'"datasetVersion": "(-?\d+)"', rename, json.dumps(result))
            renamed[agent][scenario] = json.loads(text)
    return renamed


def test_snapshot_ids_are_numbered_in_order_of_appearance() -> None:
    run: dict[str, Any] = {"s": {"events": [{"v": {"datasetVersion": "77"}}, {"v": {"datasetVersion": "-5"}}]}}
    run["s"]["events"].append({"v": {"datasetVersion": "77"}})
    renamed = same_snapshots({"java": run})["java"]["s"]["events"]
    assert [e["v"]["datasetVersion"] for e in renamed] == ["SNAPSHOT-1", "SNAPSHOT-2", "SNAPSHOT-1"]
