"""What every parity suite does: run its scenarios under the reference's jar and under spark_lineage, one
application each, then hold our events to the reference's through ``allowed_differences.toml``. A suite
(``test_parity.py``, ``test_delta_parity.py``) says only which scenarios, which driver arguments and which
servers it needs."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Collection
from pathlib import Path
from typing import Any

from tests.parity.compare import Difference, differences, judge, load_allowed
from tests.support import REPO_ROOT, validate_event

Runs = dict[str, dict[str, Any]]


def spark_line() -> str:
    """The installed PySpark's ``major.minor``, as ``allowed_differences.toml`` lists lines."""
    import pyspark

    return ".".join(pyspark.__version__.split(".")[:2])


def selected_scenarios(request: Any, scenarios: Collection[str]) -> list[str]:
    """The driver arguments that run only the scenarios this pytest session selected (``-k``): a run of the
    whole suite takes minutes per agent. Every scenario when a test about the whole suite is selected."""
    chosen: set[str] = set()
    for item in request.session.items:
        if item.module is not request.module or request.fixturename not in item.fixturenames:
            continue
        callspec = getattr(item, "callspec", None)
        if callspec is None or "scenario" not in callspec.params:
            return []
        chosen.add(callspec.params["scenario"])
    return ["--only", ",".join(sorted(chosen))] if chosen and chosen != set(scenarios) else []


def run_both(work: Path, driver_args: list[str]) -> Runs:
    """Both runs of a suite, one after the other in the same directory so that paths are the same."""
    results = {}
    for agent in ("java", "python"):
        out = work / f"{agent}.json"
        command = [sys.executable, "-m", "tests.parity.driver", "--agent", agent, "--base", str(work / "data")]
        command += ["--out", str(out), *driver_args]
        finished = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=1500, check=False)
        assert finished.returncode == 0, f"the {agent} run failed:\n{finished.stderr[-4000:]}"
        results[agent] = json.loads(out.read_text())
    return results


def run_suite(request: Any, tmp_path_factory: Any, suite: str, scenarios: Collection[str]) -> Runs:
    """Both runs of a suite whose scenarios need a Spark application of their own (the driver's ``--suite``),
    of the scenarios this pytest session selected, in a directory of their own."""
    import pytest

    pytest.importorskip("pyspark")
    return run_both(
        tmp_path_factory.mktemp(f"{suite}_parity"), ["--suite", suite, *selected_scenarios(request, scenarios)]
    )


def assert_matches_reference(scenario: str, runs: Runs, facets: tuple[str, ...] = ()) -> None:
    """Our events for ``scenario`` are valid and differ from the reference's only as allowed; ``facets``: the
    dataset facets compared as well."""
    reference, ours = runs["java"][scenario], runs["python"][scenario]
    assert not reference["error"] and not ours["error"], (reference["error"], ours["error"])
    assert any(e["job"]["facets"]["jobType"]["jobType"] in ("SQL_JOB", "RDD_JOB") for e in reference["events"]), (
        "openlineage-spark reported nothing for this scenario: it would compare nothing"
    )
    for event in ours["events"]:
        validate_event(event)
    verdict = judge(differences(scenario, reference, ours, facets), load_allowed(), spark_line())
    assert not verdict.unexplained, "differences from openlineage-spark not in allowed_differences.toml:\n" + "\n".join(
        str(d) for d in verdict.unexplained
    )


def assert_no_stale_allowances(runs: Runs, scenarios: Collection[str], facets: tuple[str, ...] = ()) -> None:
    """An allowed difference about these scenarios that no longer shows is a difference fixed, or a test that
    would not notice one."""
    spark = spark_line()
    ran = [scenario for scenario in scenarios if scenario in runs["java"] and scenario in runs["python"]]
    found: list[Difference] = []
    for scenario in ran:
        found.extend(differences(scenario, runs["java"][scenario], runs["python"][scenario], facets))
    stale = [
        entry
        for entry in load_allowed()
        if entry.shows_on(spark)
        and not entry.intermittent
        and entry.concerns(ran)
        and not any(entry.matches(difference, spark) for difference in found)
    ]
    assert not stale, f"allowed differences that no longer show on PySpark {spark}:\n" + "\n".join(
        entry.summary or entry.reason for entry in stale
    )
