"""openlineage-spark keys set as Spark confs on a real session: their effect on the events the receiver gets
(every one validated against the OpenLineage schemas by the receiver)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import spark_lineage
from tests.support import LineageReceiver, app_events, only_run

pytestmark = pytest.mark.spark


def test_reference_keys_as_spark_confs(spark: Any, receiver: LineageReceiver, data_dir: Path) -> None:
    app_run = "0190c3a8-6c4d-7d2e-9f3b-2a5e8c1d4f61"
    confs = {
        "spark.openlineage.transport.type": "http",
        "spark.openlineage.transport.url": receiver.url,
        "spark.openlineage.applicationRunId": app_run,
        "spark.openlineage.overriddenAppName": "Keys App",
        "spark.openlineage.job.owners.team": "Data Platform",
        "spark.openlineage.job.tags": "tier:gold;pii",
        "spark.openlineage.run.tags": "[env:test]",
        "spark.openlineage.dataset.removePath.pattern": r"(.*)(?<remove>\/staging)",
        "spark.openlineage.dataset.namespaceResolvers.local.type": "pattern",
        "spark.openlineage.dataset.namespaceResolvers.local.regex": "^file$",
        "spark.openlineage.dataset.disabledTrimmers": "io.openlineage.client.dataset.partition.trimmer.KeyValueTrimmer",
        "spark.openlineage.circuitBreaker.type": "java",
    }
    for key, value in confs.items():
        spark.conf.set(key, value)
    try:
        handle = spark_lineage.enable(spark)
        spark.range(3).write.parquet(str(data_dir / "keys" / "staging" / "year=2024"))
        handle.disable(timeout=30)
    finally:
        for key in confs:
            spark.conf.unset(key)

    app_start = app_events(receiver.events)[0]
    assert (app_start["run"]["runId"], app_start["job"]["name"]) == (app_run, "keys_app")
    start, complete = only_run(receiver.events, "")
    assert complete["run"]["facets"]["parent"]["run"]["runId"] == app_run
    for event in (app_start, start, complete):
        assert event["job"]["facets"]["ownership"]["owners"] == [{"name": "Data Platform", "type": "team"}]
        assert [(t["key"], t["value"], t["source"]) for t in event["job"]["facets"]["tags"]["tags"]] == [
            ("tier", "gold", "CONFIG"),
            ("pii", "true", "CONFIG"),
        ]
        assert ("env", "test", "CONFIG") in [
            (t["key"], t["value"], t["source"]) for t in event["run"]["facets"]["tags"]["tags"]
        ]
    # The KeyValueTrimmer is off, so "year=2024" stays; removePath cuts "/staging"; "file" is resolved to the
    # pattern resolver's name.
    (output,) = complete["outputs"]
    assert (output["namespace"], output["name"]) == ("local", str(data_dir / "keys" / "year=2024"))
    assert output["facets"]["dataSource"]["name"] == "local"


def test_logical_plan_facet_only_when_turned_on(spark: Any, receiver: LineageReceiver, data_dir: Path) -> None:
    """``facets.spark.logicalPlan.disabled=false``: each query's START and COMPLETE carry the optimized plan as
    Spark's JSON (what openlineage-spark sends, off by default there as here)."""
    source = data_dir / "plan_source"
    spark.range(4).selectExpr("id", "id * 2 AS twice").write.parquet(str(source))
    for turned_on in (False, True):
        receiver.events.clear()
        overrides = {"facets": {"spark": {"logicalPlan": {"disabled": "false"}}}} if turned_on else {}
        handle = spark_lineage.enable(spark, transport={"type": "http", "url": receiver.url}, **overrides)
        try:
            spark.read.parquet(str(source)).where("id > 1").write.parquet(str(data_dir / f"plan_{turned_on}"))
            assert handle.flush(60)
        finally:
            handle.disable(timeout=30)
        start, complete = only_run(receiver.events, "")
        if not turned_on:
            assert all("spark.logicalPlan" not in e["run"]["facets"] for e in (start, complete))
            continue
        for event in (start, complete):
            plan = event["run"]["facets"]["spark.logicalPlan"]["plan"]
            assert plan[0]["class"] == (
                "org.apache.spark.sql.execution.datasources.InsertIntoHadoopFsRelationCommand"
            ), plan[0]
            classes = [node["class"].rsplit(".", 1)[-1] for node in plan]
            assert {"Filter", "LogicalRelation"} <= set(classes), classes
