"""What openlineage-python's client adds to a query run's events, asked once per run (``Enricher``): the events
are those the client makes when asked for each one, from plans recorded on real Spark, without a JVM."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import RunState
from openlineage.client.filter import ExactMatchFilter, Filter
from openlineage.client.serde import Serde

from spark_lineage.analysis import analyze
from spark_lineage.config import resolve
from spark_lineage.delivery.enrichment import Enricher, Enrichments, prepare
from spark_lineage.events import EventBuilder
from spark_lineage.lineage import AnalysisContext
from spark_lineage.plan import QueryJob, SparkJobDetails
from tests.fixtures.recorded import recorded_query, recorded_session
from tests.support import validate_event

PLANS = Path(__file__).parent.parent / "fixtures" / "plans"
VERSION = sorted(p.name for p in PLANS.iterdir() if p.is_dir())[-1]
APP_RUN = "01930000-0000-7000-8000-000000000000"
P = "spark.openlineage."


def _query_events(confs: dict[str, str]) -> tuple[OpenLineageClient, list[Any]]:
    """A query run's events (START, three RUNNING, COMPLETE) and the client ``confs`` make."""
    session = recorded_session(PLANS / VERSION)
    query = recorded_query(PLANS / VERSION, "cl_projection")
    lineage = analyze(query, AnalysisContext(session=session))
    jobs = (
        QueryJob(SparkJobDetails(6, "load"), query.start_ms + 5, query.end_ms - 5, True),
        QueryJob(SparkJobDetails(7), query.end_ms - 4, query.end_ms - 2, True),
    )
    query = replace(query, jobs=jobs, metrics={"numOutputRows": 3, "numFiles": 1})
    config = resolve({P + "transport.type": "console", **confs})
    events = EventBuilder(config, session, APP_RUN, {}).query_events(query, lineage)
    return config.create_client(), events


def _texts(events: list[Any]) -> list[str | None]:
    return [None if event is None else Serde.to_json(event) for event in events]


@pytest.fixture
def client_settings(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("SPARK_LINEAGE_TEST_TEAM", "lineage")
    return {P + "run.tags": "env:prod", P + "job.tags": "tier:gold"}


def test_a_runs_later_events_get_the_facets_the_client_gave_its_first(client_settings: dict[str, str]) -> None:
    client, events = _query_events(client_settings)
    client.config.tags.job = {"owner_team": "lineage"}
    client.config.tags.run = {"shift": "night"}
    client.config.facets.environment_variables = ["SPARK_LINEAGE_TEST_TEAM"]
    client.config.facets.source_code_location.disabled = False
    client.config.facets.source_code_location.repo_url = "https://example.com/pipelines.git"
    client.config.facets.source_code_location.version = "abc123"
    one_by_one = [prepare(client, event) for event in copy.deepcopy(events)]
    enrich = Enricher(client)
    together = [enrich(event) for event in events]
    assert len(together) == 5
    assert _texts(together) == _texts(one_by_one)
    for text in _texts(together):
        assert text is not None
        document = json.loads(text)
        validate_event(document)
        run_facets, job_facets = document["run"]["facets"], document["job"]["facets"]
        assert [t["key"] for t in run_facets["tags"]["tags"]] == ["env", "shift", "openlineage_client_version"]
        assert [t["key"] for t in job_facets["tags"]["tags"]] == ["tier", "owner_team"]
        assert job_facets["sourceCodeLocation"]["url"] == "https://example.com/pipelines.git"
        assert "environmentVariables" in run_facets, sorted(run_facets)


def test_a_client_that_filters_or_reduces_datasets_is_asked_for_every_event(client_settings: dict[str, str]) -> None:
    client, events = _query_events(client_settings)
    client._filters.append(ExactMatchFilter(events[0].job.name))
    enrich = Enricher(client)
    assert [enrich(event) for event in events] == [None] * 5

    class NoRunning(Filter):
        """A filter of the user's own, which may look at anything in an event."""

        def filter_event(self, event: Any) -> Any:
            return None if event.eventType == RunState.RUNNING else event

    client, events = _query_events(client_settings)
    client._filters.append(NoRunning())
    enrich = Enricher(client)
    kept = [enrich(event) for event in events]
    assert [None if e is None else e.eventType.value for e in kept] == ["START", None, None, None, "COMPLETE"]

    client, events = _query_events(client_settings)
    client.config.dataset.reducing_enabled = True
    one_by_one = [prepare(client, event) for event in copy.deepcopy(events)]
    enrich = Enricher(client)
    assert _texts([enrich(event) for event in events]) == _texts(one_by_one)


def test_another_runs_event_is_asked_of_the_client_again(client_settings: dict[str, str]) -> None:
    client, first = _query_events(client_settings)
    _, second = _query_events(client_settings)
    interleaved = [first[0], second[0], first[1], second[1], first[-1], second[-1]]
    one_by_one = [prepare(client, event) for event in copy.deepcopy(interleaved)]
    enrich = Enricher(client)
    assert _texts([enrich(event) for event in interleaved]) == _texts(one_by_one)


def test_later_runs_get_what_the_client_gave_the_first_unless_it_reads_the_environment_or_the_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Runs whose events hold no tags or source code location of their own (no ``run.tags``/``job.tags`` set):
    the client is asked for the first run's first event only, and every event is the one it makes when asked;
    a client that collects environment variables is asked for each run (a variable may change between them)."""
    client, first = _query_events({})
    _, second = _query_events({})
    client.config.tags.run = {"shift": "night"}
    client.config.facets.source_code_location.disabled = False
    client.config.facets.source_code_location.repo_url = "https://example.com/pipelines.git"
    asked = []
    monkeypatch.setattr(client, "update_event_tags_facets", _counting(client.update_event_tags_facets, asked))
    runs = [first, second, copy.deepcopy(second)]
    one_by_one = [[prepare(client, event) for event in copy.deepcopy(events)] for events in runs]
    asked.clear()
    enrichments = Enrichments(client)
    together = [[Enricher(client, enrichments)(event) for event in events] for events in runs]
    assert len(asked) == 1, "only the first run's first event is asked of the client"
    assert [_texts(events) for events in together] == [_texts(events) for events in one_by_one]
    for events in together:
        document = json.loads(_texts(events)[-1] or "")
        assert [t["key"] for t in document["run"]["facets"]["tags"]["tags"]] == ["shift", "openlineage_client_version"]
        assert document["job"]["facets"]["sourceCodeLocation"]["url"] == "https://example.com/pipelines.git"

    client.config.facets.environment_variables = ["SPARK_LINEAGE_TEST_TEAM"]
    enrichments = Enrichments(client)
    teams = []
    for team, events in zip(("lineage", "platform"), [_query_events({})[1], _query_events({})[1]]):
        monkeypatch.setenv("SPARK_LINEAGE_TEST_TEAM", team)
        enriched = Enricher(client, enrichments)(events[0])
        document = json.loads(_texts([enriched])[0] or "")
        teams.append(document["run"]["facets"]["environmentVariables"]["environmentVariables"][0]["value"])
    assert teams == ["lineage", "platform"]

    _, tagged = _query_events({P + "run.tags": "env:prod"})
    assert not Enrichments(client).applies(tagged[0]), "a run with tags of its own has them merged: asked per run"


def _counting(method: Any, calls: list[object]) -> Any:
    def counted(event: Any) -> Any:
        calls.append(event)
        return method(event)

    return counted
