"""The main suite's scenarios once more, with ``spark.openlineage.columnLineage.descriptionsEnabled=true`` under
both agents: each transformation's description (Spark's SQL of the expression or clause it comes from) must
be the reference's too, but for the differences ``allowed_differences.toml`` lists for runs with descriptions.

The reference's transformation types depend on its descriptions (two steps that describe the same thing
merge differently), so this is a run of its own, on one line (``ONE_LINE_SUITES`` in scripts/test): 4.0,
where the main suite does not run (this run holds that line's plans to the reference's as the main suite
would, and each description besides)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.parity.scenarios import SCENARIOS
from tests.parity.suite import Runs, assert_main_scenario, assert_no_stale_allowances, run_main_suite
from tests.postgres_server import Postgres

pytestmark = [pytest.mark.spark, pytest.mark.parity, pytest.mark.timeout(3600)]


@pytest.fixture(scope="module")
def described_runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, postgres: Postgres | None, kafka: Any
) -> Runs:
    descriptions = "spark.openlineage.columnLineage.descriptionsEnabled=true"
    return run_main_suite(request, tmp_path_factory, postgres, kafka, "--conf", descriptions, name="described")


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_scenario_is_described_as_the_reference_describes_it(
    scenario: str, described_runs: Runs, postgres: Postgres | None, kafka: Any
) -> None:
    assert_main_scenario(scenario, described_runs, postgres, kafka, described=True)


def test_every_allowed_difference_with_descriptions_still_shows(described_runs: Runs) -> None:
    assert_no_stale_allowances(described_runs, SCENARIOS, described=True)
