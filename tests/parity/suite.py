"""What every parity suite does: run its scenarios under the reference's jar and under spark_lineage, one
application each, then hold our events to the reference's through ``allowed_differences.toml``. A suite
(``test_parity.py``, ``test_delta_parity.py``) says only which scenarios, which driver arguments and which
servers it needs."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from tests.jars import iceberg_runtime, spark_kafka
from tests.parity.compare import Difference, differences, judge, load_allowed
from tests.postgres_server import Postgres
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


def run_both(work: Path, driver_args: list[str], *, side_by_side: bool = False) -> Runs:
    """Both runs of a suite. One after the other in the same directory, so that paths are the same; or, for a
    suite whose scenarios use no server (two runs writing one PostgreSQL table or Kafka topic would see each
    other's data), ``side_by_side`` in directories of their own whose paths are then written as the shared
    one: the reference's run starts once ours has resolved the jars both load, so that two Ivy resolutions
    never fill the same cache at once."""
    if not side_by_side:
        return {agent: _finish(*_start(agent, work, work / "data", driver_args)) for agent in ("java", "python")}
    started = {}
    for agent in ("python", "java"):
        started[agent] = _start(agent, work, work / f"{agent}-data", driver_args)
        _wait_until_ready(*started[agent])
    runs = {agent: _finish(*started[agent]) for agent in started}
    return {agent: _with_base(runs[agent], work / f"{agent}-data", work / "data") for agent in runs}


DRIVER_TIMEOUT_SECONDS = 1500


def _start(agent: str, work: Path, base: Path, driver_args: list[str]) -> tuple[str, subprocess.Popen[str], Path]:
    out = work / f"{agent}.json"
    command = [sys.executable, "-m", "tests.parity.driver", "--agent", agent, "--base", str(base)]
    command += ["--out", str(out), "--ready", str(work / f"{agent}.ready"), *driver_args]
    # stderr to a file: Ivy alone can write more than a pipe holds while nobody reads it
    with (work / f"{agent}.stderr").open("w") as stderr:
        process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=stderr, text=True)
    return agent, process, work


def _wait_until_ready(agent: str, process: subprocess.Popen[str], work: Path) -> None:
    """Until the run's Spark session is up (its ``--ready`` file), or the run has ended."""
    deadline = time.monotonic() + DRIVER_TIMEOUT_SECONDS
    while not (work / f"{agent}.ready").exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)


def _finish(agent: str, process: subprocess.Popen[str], work: Path) -> dict[str, Any]:
    try:
        returncode = process.wait(timeout=DRIVER_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    stderr = (work / f"{agent}.stderr").read_text(errors="replace")
    assert returncode == 0, f"the {agent} run failed:\n{stderr[-4000:]}"
    result: dict[str, Any] = json.loads((work / f"{agent}.json").read_text())
    return result


def _with_base(run: dict[str, Any], base: Path, shared: Path) -> dict[str, Any]:
    """The run's events as if its files had been under ``shared``."""
    result: dict[str, Any] = json.loads(json.dumps(run).replace(str(base), str(shared)))
    return result


def run_suite(request: Any, tmp_path_factory: Any, suite: str, scenarios: Collection[str]) -> Runs:
    """Both runs, side by side, of a suite whose scenarios need a Spark application of their own (the driver's
    ``--suite``) and no server, of the scenarios this pytest session selected, in a directory of their own."""
    import pytest

    pytest.importorskip("pyspark")
    return run_both(
        tmp_path_factory.mktemp(f"{suite}_parity"),
        ["--suite", suite, *selected_scenarios(request, scenarios)],
        side_by_side=True,
    )


def assert_matches_reference(
    scenario: str,
    runs: Runs,
    facets: tuple[str, ...] = (),
    applications: Mapping[str, str] | None = None,
    described: bool = False,
) -> None:
    """Our events for ``scenario`` are valid and differ from the reference's only as allowed; ``facets``: the
    dataset facets compared as well; ``applications``: our job names' application parts the reference names
    otherwise (:func:`tests.parity.compare.differences`); ``described``: both ran with column-lineage
    descriptions on."""
    reference, ours = runs["java"][scenario], runs["python"][scenario]
    assert not reference["error"] and not ours["error"], (reference["error"], ours["error"])
    assert any(e["job"]["facets"]["jobType"]["jobType"] in ("SQL_JOB", "RDD_JOB") for e in reference["events"]), (
        "openlineage-spark reported nothing for this scenario: it would compare nothing"
    )
    for event in ours["events"]:
        validate_event(event)
    found = differences(scenario, reference, ours, facets, applications)
    verdict = judge(found, load_allowed(), spark_line(), described)
    assert not verdict.unexplained, "differences from openlineage-spark not in allowed_differences.toml:\n" + "\n".join(
        str(d) for d in verdict.unexplained
    )


def assert_no_stale_allowances(
    runs: Runs,
    scenarios: Collection[str],
    facets: tuple[str, ...] = (),
    applications: Mapping[str, str] | None = None,
    described: bool = False,
) -> None:
    """An allowed difference about these scenarios that no longer shows is a difference fixed, or a test that
    would not notice one."""
    spark = spark_line()
    ran = [scenario for scenario in scenarios if scenario in runs["java"] and scenario in runs["python"]]
    found: list[Difference] = []
    for scenario in ran:
        found.extend(differences(scenario, runs["java"][scenario], runs["python"][scenario], facets, applications))
    stale = [
        entry
        for entry in load_allowed()
        if entry.shows_on(spark, described)
        and not entry.intermittent
        and entry.concerns(ran)
        and not any(entry.matches(difference, spark, described) for difference in found)
    ]
    assert not stale, f"allowed differences that no longer show on PySpark {spark}:\n" + "\n".join(
        entry.summary or entry.reason for entry in stale
    )


def servers(postgres: Postgres | None, kafka: Any) -> dict[str, str | None]:
    """The servers scenarios need, by service: ``None`` where one does not run here, or where this PySpark
    line cannot load the module that talks to it."""
    import pyspark

    kafka_usable = kafka is not None and spark_kafka(pyspark.__version__) is not None
    return {"postgres": postgres.jdbc_url if postgres else None, "kafka": kafka.bootstrap if kafka_usable else None}


def missing(service: str, postgres: Postgres | None, kafka: Any) -> str | None:
    """Why a scenario that needs ``service`` cannot run here, ``None`` where it can."""
    import pyspark

    if service == "iceberg" and iceberg_runtime(pyspark.__version__) is None:
        return f"Iceberg has no Spark runtime for {spark_line()}"
    if service == "kafka" and spark_kafka(pyspark.__version__) is None:
        return f"Maven Central serves no Kafka module for Spark {spark_line()}"
    if service != "iceberg" and servers(postgres, kafka)[service] is None:
        return f"no {service} server here (scripts/test installs and starts one)"
    return None


def run_main_suite(
    request: Any, tmp_path_factory: Any, postgres: Postgres | None, kafka: Any, *extra: str, name: str = "parity"
) -> Runs:
    """Both runs of the main suite's scenarios this pytest session selected, with the servers that run here,
    and ``extra`` driver arguments."""
    import pytest

    from tests.parity.scenarios import SCENARIOS

    pytest.importorskip("pyspark")
    arguments = [arg for service, url in servers(postgres, kafka).items() if url for arg in (f"--{service}", url)]
    return run_both(tmp_path_factory.mktemp(name), [*arguments, *extra, *selected_scenarios(request, SCENARIOS)])


def assert_main_scenario(
    scenario: str, runs: Runs, postgres: Postgres | None, kafka: Any, *, described: bool = False
) -> None:
    """:func:`assert_matches_reference` for a main-suite scenario, skipped where a server it needs is missing."""
    import pytest

    from tests.parity.scenarios import SERVICE_NEEDED

    reason = missing(SERVICE_NEEDED[scenario], postgres, kafka) if scenario in SERVICE_NEEDED else None
    if reason is not None:
        pytest.skip(reason)
    assert_matches_reference(scenario, runs, described=described)
