"""openlineage-spark as the oracle for Hive: every scenario in ``hive_scenarios.py`` runs once under its jar and
once under spark_lineage, each in a Spark application of its own with Hive support (the main suite's
application has an in-memory catalog), and the events are compared as the main suite's are, with the same
list of accepted differences, and the ``symlinks`` and ``catalog`` facets compared as well."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.parity.hive_scenarios import HIVE_SCENARIOS
from tests.parity.suite import Runs, assert_matches_reference, assert_no_stale_allowances, run_suite

COMPARED_FACETS = ("symlinks", "catalog")
"""How a session-catalog table is named and catalogued is what Hive changes: compared here too."""

# The first test waits for both Spark applications of the suite (tests.parity.suite bounds each run). Four
# applications with Hive support are too many for CI's time on every line: the suite runs on the last one
# (it passed on 3.5 and 4.1 alike when it was written).
pytestmark = [pytest.mark.spark, pytest.mark.parity, pytest.mark.once, pytest.mark.timeout(3600)]


@pytest.fixture(scope="module")
def hive_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    return run_suite(request, tmp_path_factory, "hive", HIVE_SCENARIOS)


@pytest.fixture(scope="module")
def metastore_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """The same scenarios with the tables in a metastore server (``spark.hadoop.hive.metastore.uris``), which
    names them ``hive://127.0.0.1:<port>``: each run starts its own, on a port of its own, so the two runs'
    symlinks can only agree once that port is taken out (see :func:`_same_port`)."""
    return _same_port(run_suite(request, tmp_path_factory, "hive_metastore", HIVE_SCENARIOS))


@pytest.mark.parametrize("scenario", sorted(HIVE_SCENARIOS))
def test_hive_scenario_matches_the_reference(scenario: str, hive_runs: Runs) -> None:
    assert_matches_reference(scenario, hive_runs, COMPARED_FACETS, described=True)


@pytest.mark.parametrize("scenario", sorted(HIVE_SCENARIOS))
def test_hive_scenario_with_a_metastore_matches_the_reference(scenario: str, metastore_runs: Runs) -> None:
    assert_matches_reference(scenario, metastore_runs, COMPARED_FACETS, described=True)
    symlinks = {s["namespace"] for e in metastore_runs["python"][scenario]["events"] for s in _symlinks(e)}
    assert symlinks <= {"hive://127.0.0.1:PORT"}, symlinks


def _symlinks(event: dict[str, Any]) -> list[dict[str, Any]]:
    datasets = (event.get("inputs") or []) + (event.get("outputs") or [])
    return [s for d in datasets for s in ((d.get("facets") or {}).get("symlinks") or {}).get("identifiers", [])]


def _same_port(runs: Runs) -> Runs:
    """Both runs with their metastore's port written ``PORT``, wherever it shows."""
    return {
        agent: json.loads(re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", json.dumps(run))) for agent, run in runs.items()
    }


def test_every_allowed_hive_difference_still_shows(hive_runs: Runs) -> None:
    assert_no_stale_allowances(hive_runs, HIVE_SCENARIOS, COMPARED_FACETS, described=True)
