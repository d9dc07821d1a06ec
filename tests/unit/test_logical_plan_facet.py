"""The ``spark.logicalPlan`` run facet: off by default, as in openlineage-spark 1.53; when turned on, the plan
Spark's ``toJSON`` gave, on the query's START and COMPLETE events, valid, and never with a secret in it."""

from __future__ import annotations

import json
from typing import Any

from spark_lineage.config import LineageConfig, resolve
from spark_lineage.delivery.payloads import to_payload
from spark_lineage.events import EventBuilder
from spark_lineage.lineage import QueryLineage
from spark_lineage.plan import CapturedQuery, SessionInfo
from spark_lineage.redaction import Redactor
from tests.support import validate_event

SESSION = SessionInfo(app_name="Plan App", app_id="local-1", spark_version="3.5.3", master="local[1]", warehouse=None)
PLAN = [
    {
        "class": "org.apache.spark.sql.execution.datasources.SaveIntoDataSourceCommand",
        "num-children": 0,
        "query": 0,
        "options": {"url": "jdbc:postgresql://db:5432/shop", "dbtable": "orders", "password": "hunter2"},
        "mode": "Append",
    }
]


def _events(config: LineageConfig, plan_json: str | None) -> list[dict[str, Any]]:
    query = CapturedQuery(func_name="command", start_ms=1_000, end_ms=2_000, tree=None, logical_plan=plan_json)
    query.executed_node = "Execute SaveIntoDataSourceCommand"
    builder = EventBuilder(config, SESSION, "01930000-0000-7000-8000-000000000000")
    events = [json.loads(to_payload(e, Redactor()).json) for e in builder.query_events(query, QueryLineage())]
    for event in events:
        validate_event(event)
    return events


def test_the_plan_goes_on_start_and_complete_when_turned_on() -> None:
    config = resolve({"spark.openlineage.facets.spark.logicalPlan.disabled": "false"})
    events = _events(config, json.dumps(PLAN))
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
    for event in events:
        facet = event["run"]["facets"]["spark.logicalPlan"]
        assert facet["_schemaURL"] == "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunFacet"
        (node,) = facet["plan"]
        assert node["class"] == PLAN[0]["class"] and node["options"]["dbtable"] == "orders"
        # Redacted as everything else in an event is, before it is spooled or sent.
        assert node["options"]["password"] != "hunter2"
        assert "hunter2" not in json.dumps(event)


def test_no_facet_by_default_or_without_a_plan() -> None:
    config = resolve({})
    assert not config.facet_enabled("spark.logicalPlan")
    on = resolve({"spark.openlineage.facets.spark.logicalPlan.disabled": "false"})
    for events in (_events(on, None), _events(on, "not json {")):
        assert all("spark.logicalPlan" not in e["run"]["facets"] for e in events)


def test_a_disabled_facet_is_left_out_even_when_a_plan_was_read() -> None:
    """The capture reads the plan only when the facet is on; a plan recorded otherwise is still not sent."""
    events = _events(resolve({}), json.dumps(PLAN))
    assert all("spark.logicalPlan" not in e["run"]["facets"] for e in events)
