"""The ``spark_unknown`` run facet (``facets.spark_unknown.disabled=false``), from Hive plans recorded on real
Spark with the facet on (their output columns read with their types, and the plan as Spark's JSON): the
leaves and roots no handler knows, with the columns they read and make, as openlineage-spark lists them (the
Hive parity suite compares the two on real Spark)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openlineage.client.serde import Serde

from spark_lineage.analysis import analyze
from spark_lineage.config import resolve
from spark_lineage.events import EventBuilder
from spark_lineage.lineage import AnalysisContext, QueryLineage
from spark_lineage.plan import Attribute, CatalystNode
from spark_lineage.unknown_nodes import find_unknown
from tests.fixtures.recorded import recorded_query, recorded_session
from tests.support import validate_event

HIVE_PLANS = Path(__file__).parent.parent / "fixtures" / "hive_plans"
VERSIONS = sorted(p.name for p in HIVE_PLANS.iterdir() if p.is_dir())
RUN_ID = "01930000-0000-7000-8000-000000000000"


ON = {"spark.openlineage.facets.spark_unknown.disabled": "false"}


def _events(version: str, name: str, conf: dict[str, str] = ON) -> tuple[QueryLineage, list[dict[str, Any]]]:
    session = recorded_session(HIVE_PLANS / version)
    config = resolve({**session.conf, **conf})
    query = recorded_query(HIVE_PLANS / version, name)
    lineage = analyze(query, AnalysisContext(session=session), unknown=config.facet_enabled("spark_unknown"))
    events = [json.loads(Serde.to_json(e)) for e in EventBuilder(config, session, RUN_ID).query_events(query, lineage)]
    for event in events:
        validate_event(event)
    return lineage, events


@pytest.mark.parametrize("version", VERSIONS)
def test_rows_of_a_values_list_are_an_unknown_input_with_their_columns(version: str) -> None:
    """OpenLineage's own Hive test expects this entry (pysparkHiveCompleteEvent.json): the ``LocalRelation`` of
    ``INSERT INTO … VALUES``, its two columns typed, the write itself known."""
    _, events = _events(version, "hive_table_insert-2")
    facets = [event["run"]["facets"].get("spark_unknown") for event in events]
    assert all(facets) and len({json.dumps(f, sort_keys=True) for f in facets}) == 1  # on every event, the same
    facet = facets[-1]
    assert facet["_schemaURL"] == "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunFacet"
    assert "output" not in facet
    (entry,) = facet["inputs"]
    assert entry["inputAttributes"] == []
    assert entry["outputAttributes"] == [
        {"name": "a", "type": "integer", "metadata": {}},
        {"name": "d", "type": "string", "metadata": {}},
    ]
    description = entry["description"]
    assert description["class"] == "org.apache.spark.sql.catalyst.plans.logical.LocalRelation"
    assert description["num-children"] == 0 and [c[0]["name"] for c in description["output"]] == ["a", "d"]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_plan_whose_nodes_are_all_known_has_no_facet(version: str) -> None:
    lineage, events = _events(version, "hive_table_insert-1")  # INSERT … SELECT from a parquet view
    assert lineage.unknown is None
    assert all("spark_unknown" not in event["run"]["facets"] for event in events)


@pytest.mark.parametrize("version", VERSIONS)
def test_off_by_default_as_in_the_reference(version: str) -> None:
    lineage, events = _events(version, "hive_table_insert-2", {})
    assert lineage.unknown is None
    assert all("spark_unknown" not in event["run"]["facets"] for event in events)


def test_an_unknown_root_reads_its_childrens_columns_and_makes_its_own() -> None:
    """The root is listed when no handler claims it, with its children's output as the columns it reads (each
    once, by expression id), and each leaf no handler names datasets with; without the plan's JSON a node is
    described by its class."""
    leaf = CatalystNode(
        "org.apache.spark.sql.catalyst.plans.logical.LocalRelation",
        is_plan=True,
        output=(Attribute(1, "a", "integer", "{}"), Attribute(2, "b", "decimal(10,2)", '{"comment":"c"}')),
    )
    other = CatalystNode("org.apache.spark.sql.catalyst.plans.logical.OneRowRelation", is_plan=True)
    root = CatalystNode(
        "com.example.SomeCommand",
        {"left": leaf, "right": other},
        is_plan=True,
        output=(Attribute(3, "n", "long", "{}"),),
        children=(leaf, other, leaf),
    )
    found = find_unknown(root, None)
    assert found is not None and found.output is not None
    assert found.output.description == {"class": "com.example.SomeCommand"}
    assert [a.name for a in found.output.inputs] == ["a", "b"] and [a.name for a in found.output.outputs] == ["n"]
    assert [node.description["class"] for node in found.inputs] == [leaf.class_name, other.class_name, leaf.class_name]
    plan_json = json.dumps(
        [
            {"class": root.class_name, "num-children": 3},
            {"class": leaf.class_name, "num-children": 0, "data": None},
            {"class": other.class_name, "num-children": 0},
            {"class": leaf.class_name, "num-children": 0},
        ]
    )
    described = find_unknown(root, plan_json)
    assert described is not None and described.output is not None
    assert described.output.description == {"class": root.class_name, "num-children": 3}
    assert described.inputs[0].description == {"class": leaf.class_name, "num-children": 0, "data": None}
