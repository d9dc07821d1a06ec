"""openlineage-spark as the oracle for Delta Lake: every scenario in ``delta_scenarios.py`` runs once under its
jar and once under spark_lineage, each in a Spark application of its own with Delta's extension and catalog
(the main suite's application has neither), and the events are compared as the main suite's are, with the
same list of accepted differences."""

from __future__ import annotations

import pytest

from tests.jars import delta_spark
from tests.parity.delta_scenarios import DELTA_SCENARIOS
from tests.parity.suite import Runs, assert_matches_reference, assert_no_stale_allowances, run_both, spark_line

# The first test waits for both Spark applications of the suite (tests.parity.suite bounds each run).
pytestmark = [pytest.mark.spark, pytest.mark.parity, pytest.mark.timeout(3600)]


@pytest.fixture(scope="module")
def delta_runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    pyspark = pytest.importorskip("pyspark")
    if delta_spark(pyspark.__version__) is None:
        pytest.skip(f"no Delta Lake release supports Spark {spark_line()} (tests/jars.py DELTA_VERSIONS)")
    return run_both(tmp_path_factory.mktemp("delta_parity"), ["--suite", "delta"], side_by_side=True)


@pytest.mark.parametrize("scenario", sorted(DELTA_SCENARIOS))
def test_delta_scenario_matches_the_reference(scenario: str, delta_runs: Runs) -> None:
    assert_matches_reference(scenario, delta_runs)


def test_every_allowed_delta_difference_still_shows(delta_runs: Runs) -> None:
    assert_no_stale_allowances(delta_runs, DELTA_SCENARIOS)
