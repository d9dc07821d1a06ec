"""openlineage-spark as the oracle for Delta Lake: every scenario in ``delta_scenarios.py`` runs once under its
jar and once under spark_lineage, each in a Spark application of its own with Delta's extension and catalog
(the main suite's application has neither), and the events are compared as the main suite's are, with the
same list of accepted differences."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.jars import delta_spark
from tests.parity.compare import Difference, differences, judge, load_allowed
from tests.parity.delta_scenarios import DELTA_SCENARIOS
from tests.support import REPO_ROOT, validate_event

pytestmark = pytest.mark.spark


def _spark_line() -> str:
    import pyspark

    return ".".join(pyspark.__version__.split(".")[:2])


@pytest.fixture(scope="module")
def delta_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Both runs of every Delta scenario, one after the other in the same directory so that paths are the
    same."""
    pyspark = pytest.importorskip("pyspark")
    if delta_spark(pyspark.__version__) is None:
        pytest.skip(f"no Delta Lake release supports Spark {_spark_line()} (tests/jars.py DELTA_VERSIONS)")
    work = tmp_path_factory.mktemp("delta_parity")
    results = {}
    for agent in ("java", "python"):
        out = work / f"{agent}.json"
        command = [sys.executable, "-m", "tests.parity.driver", "--agent", agent, "--suite", "delta"]
        command += ["--base", str(work / "data"), "--out", str(out)]
        finished = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=1500, check=False)
        assert finished.returncode == 0, f"the {agent} run failed:\n{finished.stderr[-4000:]}"
        results[agent] = json.loads(out.read_text())
    return results


@pytest.mark.parametrize("scenario", sorted(DELTA_SCENARIOS))
def test_delta_scenario_matches_the_reference(scenario: str, delta_runs: dict[str, dict[str, Any]]) -> None:
    reference, ours = delta_runs["java"][scenario], delta_runs["python"][scenario]
    assert not reference["error"] and not ours["error"], (reference["error"], ours["error"])
    assert any(e["job"]["facets"]["jobType"]["jobType"] == "SQL_JOB" for e in reference["events"]), (
        "openlineage-spark reported nothing for this scenario: it would compare nothing"
    )
    for event in ours["events"]:
        validate_event(event)
    verdict = judge(differences(scenario, reference, ours), load_allowed(), _spark_line())
    assert not verdict.unexplained, "differences from openlineage-spark not in allowed_differences.toml:\n" + "\n".join(
        str(d) for d in verdict.unexplained
    )


def test_every_allowed_delta_difference_still_shows(delta_runs: dict[str, dict[str, Any]]) -> None:
    """An entry about a Delta scenario that no longer matches anything is a difference fixed, or a test that
    would not notice one."""
    spark = _spark_line()
    found: list[Difference] = []
    for scenario in DELTA_SCENARIOS:
        found.extend(differences(scenario, delta_runs["java"][scenario], delta_runs["python"][scenario]))
    stale = [
        entry
        for entry in load_allowed()
        if spark in entry.spark
        and entry.concerns(DELTA_SCENARIOS)
        and not any(entry.matches(difference, spark) for difference in found)
    ]
    assert not stale, f"allowed differences that no longer show on PySpark {spark}:\n" + "\n".join(
        entry.summary or entry.reason for entry in stale
    )
