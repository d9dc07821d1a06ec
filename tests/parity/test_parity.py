"""openlineage-spark as the oracle: every scenario in ``scenarios.py`` runs once under its jar and once under
spark_lineage, on the same local Spark, and the events must agree but for the differences listed, with
their reasons, in ``allowed_differences.toml``."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.parity.compare import Difference, differences, judge, load_allowed
from tests.parity.scenarios import SCENARIOS, SERVICE_NEEDED
from tests.postgres_server import Postgres
from tests.support import REPO_ROOT, validate_event

pytestmark = pytest.mark.spark


def _spark_line() -> str:
    import pyspark

    return ".".join(pyspark.__version__.split(".")[:2])


def servers(postgres: Postgres | None, kafka: Any) -> dict[str, str | None]:
    """The servers scenarios need, by service: ``None`` where one does not run here."""
    return {"postgres": postgres.jdbc_url if postgres else None, "kafka": kafka.bootstrap if kafka else None}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, postgres: Postgres | None, kafka: Any) -> dict[str, dict[str, Any]]:
    """Both runs of every scenario, each in a Spark application of its own (the reference's listener can only
    be loaded at start-up), one after the other in the same directory so that paths are the same."""
    pytest.importorskip("pyspark")
    work = tmp_path_factory.mktemp("parity")
    results = {}
    for agent in ("java", "python"):
        out = work / f"{agent}.json"
        command = [sys.executable, "-m", "tests.parity.driver", "--agent", agent, "--base", str(work / "data")]
        command += ["--out", str(out)]
        command += [arg for service, url in servers(postgres, kafka).items() if url for arg in (f"--{service}", url)]
        finished = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=1500, check=False)
        assert finished.returncode == 0, f"the {agent} run failed:\n{finished.stderr[-4000:]}"
        results[agent] = json.loads(out.read_text())
    return results


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_scenario_matches_the_reference(
    scenario: str, runs: dict[str, dict[str, Any]], postgres: Postgres | None, kafka: Any
) -> None:
    service = SERVICE_NEEDED.get(scenario)
    if service is not None and servers(postgres, kafka)[service] is None:
        pytest.skip(f"no {service} server here (scripts/test installs and starts one)")
    reference, ours = runs["java"][scenario], runs["python"][scenario]
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


def test_every_allowed_difference_still_shows(runs: dict[str, dict[str, Any]]) -> None:
    """An entry that no longer matches anything is a difference fixed, or a test that would not notice one."""
    spark = _spark_line()
    found: list[Difference] = []
    for scenario in SCENARIOS:
        if scenario in runs["java"] and scenario in runs["python"]:
            found.extend(differences(scenario, runs["java"][scenario], runs["python"][scenario]))
    stale = [
        entry
        for entry in load_allowed()
        if spark in entry.spark
        and entry.concerns(SCENARIOS)  # the Delta suite's entries: tests/parity/test_delta_parity.py
        and not any(entry.matches(difference, spark) for difference in found)
    ]
    assert not stale, f"allowed differences that no longer show on PySpark {spark}:\n" + "\n".join(
        entry.summary or entry.reason for entry in stale
    )


def test_readme_lists_the_allowed_differences() -> None:
    from tests.parity.compare import README, README_END, README_START, readme_section

    text = README.read_text()
    shown = text[text.index(README_START) : text.index(README_END) + len(README_END)]
    assert shown == readme_section(load_allowed()), "run `python -m tests.parity.compare --readme` and paste it"
