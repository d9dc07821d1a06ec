"""openlineage-spark as the oracle: every scenario in ``scenarios.py`` runs once under its jar and once under
spark_lineage, on the same local Spark, and the events must agree but for the differences listed, with
their reasons, in ``allowed_differences.toml``."""

from __future__ import annotations

from typing import Any

import pytest

from tests.parity.compare import load_allowed
from tests.parity.scenarios import SCENARIOS
from tests.parity.suite import Runs, assert_main_scenario, assert_no_stale_allowances, run_main_suite
from tests.postgres_server import Postgres

# The first test waits for both Spark applications of the suite (tests.parity.suite bounds each run).
pytestmark = [pytest.mark.spark, pytest.mark.parity, pytest.mark.timeout(3600)]


@pytest.fixture(scope="module")
def runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, postgres: Postgres | None, kafka: Any
) -> Runs:
    """Both runs of every scenario, each in a Spark application of its own (the reference's listener can only
    be loaded at start-up)."""
    return run_main_suite(request, tmp_path_factory, postgres, kafka)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_scenario_matches_the_reference(scenario: str, runs: Runs, postgres: Postgres | None, kafka: Any) -> None:
    assert_main_scenario(scenario, runs, postgres, kafka)


def test_every_allowed_difference_still_shows(runs: Runs) -> None:
    """The Delta suite's entries are checked by tests/parity/test_delta_parity.py."""
    assert_no_stale_allowances(runs, SCENARIOS)


def test_the_compared_page_lists_the_allowed_differences() -> None:
    from tests.parity.compare import PAGE, TABLE_END, TABLE_START, page_section

    text = PAGE.read_text()
    shown = text[text.index(TABLE_START) : text.index(TABLE_END) + len(TABLE_END)]
    assert shown == page_section(load_allowed()), "run `python -m tests.parity.compare --page` and paste it"
