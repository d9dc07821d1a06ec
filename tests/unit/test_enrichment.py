"""What openlineage-python's client adds to each event before it is spooled (``delivery.prepare``): its steps
run as its own ``emit`` runs them, and one that would do nothing is not run."""

from __future__ import annotations

import pytest


def test_the_environment_variables_openlineage_python_is_configured_with_are_added_and_none_without(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from openlineage.client import OpenLineageClient
    from openlineage.client.event_v2 import Job, Run, RunEvent, RunState

    from spark_lineage.delivery import prepare

    monkeypatch.setenv("SPARK_LINEAGE_TEST_CLUSTER", "c1")

    def event() -> RunEvent:
        return RunEvent(
            eventType=RunState.START,
            eventTime="2026-12-05T00:00:00.000+00:00",
            run=Run(runId="01930000-0000-7000-8000-000000000000"),
            job=Job(namespace="n", name="j"),
            producer="https://example.com/p",
        )

    configured = OpenLineageClient(
        config={"transport": {"type": "noop"}, "facets": {"environment_variables": ["SPARK_LINEAGE_TEST_CLUSTER"]}}
    )
    plain = OpenLineageClient(config={"transport": {"type": "noop"}})

    with_variables = prepare(configured, event())
    without = prepare(plain, event())

    assert with_variables is not None and without is not None
    facet = with_variables.run.facets["environmentVariables"]
    assert [(v.name, v.value) for v in facet.environmentVariables] == [("SPARK_LINEAGE_TEST_CLUSTER", "c1")]
    assert "environmentVariables" not in (without.run.facets or {})
