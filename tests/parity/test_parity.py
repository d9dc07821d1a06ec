"""openlineage-spark as the oracle: every scenario in ``scenarios.py`` runs once under its jar and once under
spark_lineage, on the same local Spark, and the events must agree but for the differences listed, with
their reasons, in ``allowed_differences.toml``."""

from __future__ import annotations

from typing import Any

import pytest

from tests.jars import iceberg_runtime, spark_kafka
from tests.parity.compare import load_allowed
from tests.parity.scenarios import SCENARIOS, SERVICE_NEEDED
from tests.parity.suite import (
    Runs,
    assert_matches_reference,
    assert_no_stale_allowances,
    run_both,
    selected_scenarios,
    spark_line,
)
from tests.postgres_server import Postgres

# The first test waits for both Spark applications of the suite (tests.parity.suite bounds each run).
pytestmark = [pytest.mark.spark, pytest.mark.parity, pytest.mark.timeout(3600)]


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


@pytest.fixture(scope="module")
def runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, postgres: Postgres | None, kafka: Any
) -> Runs:
    """Both runs of every scenario, each in a Spark application of its own (the reference's listener can only
    be loaded at start-up)."""
    pytest.importorskip("pyspark")
    arguments = [arg for service, url in servers(postgres, kafka).items() if url for arg in (f"--{service}", url)]
    return run_both(tmp_path_factory.mktemp("parity"), arguments + selected_scenarios(request, SCENARIOS))


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_scenario_matches_the_reference(scenario: str, runs: Runs, postgres: Postgres | None, kafka: Any) -> None:
    reason = missing(SERVICE_NEEDED[scenario], postgres, kafka) if scenario in SERVICE_NEEDED else None
    if reason is not None:
        pytest.skip(reason)
    assert_matches_reference(scenario, runs)


def test_every_allowed_difference_still_shows(runs: Runs) -> None:
    """The Delta suite's entries are checked by tests/parity/test_delta_parity.py."""
    assert_no_stale_allowances(runs, SCENARIOS)


def test_the_compared_page_lists_the_allowed_differences() -> None:
    from tests.parity.compare import PAGE, TABLE_END, TABLE_START, page_section

    text = PAGE.read_text()
    shown = text[text.index(TABLE_START) : text.index(TABLE_END) + len(TABLE_END)]
    assert shown == page_section(load_allowed()), "run `python -m tests.parity.compare --page` and paste it"
