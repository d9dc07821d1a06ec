"""Event shape: the application run, query runs, parent linkage, ids, times, facets and filtering."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

import spark_lineage
from tests.support import LineageReceiver, app_events, only_run, query_events

pytestmark = pytest.mark.spark


def _ms(event: dict[str, Any]) -> float:
    return dt.datetime.fromisoformat(event["eventTime"].replace("Z", "+00:00")).timestamp() * 1000


def _parent(event: dict[str, Any]) -> tuple[str, ...]:
    """(run id, job namespace, job name) of the parent, then of the root, from a ``parent`` run facet."""
    facet = event["run"]["facets"]["parent"]
    root = facet["root"]
    return (
        facet["run"]["runId"],
        facet["job"]["namespace"],
        facet["job"]["name"],
        root["run"]["runId"],
        root["job"]["namespace"],
        root["job"]["name"],
    )


def test_application_and_query_runs(spark: Any, receiver: LineageReceiver, data_dir: Path) -> None:
    before = time.time() * 1000
    handle = spark_lineage.enable(spark, transport={"type": "http", "url": receiver.url})
    spark.read.option("header", True).csv(str(data_dir / "people.csv")).write.parquet(str(data_dir / "out"))
    handle.disable(timeout=30)
    after = time.time() * 1000

    app_start, app_complete = app_events(receiver.events)
    assert receiver.events[0] is app_start and receiver.events[-1] is app_complete
    assert (app_start["eventType"], app_complete["eventType"]) == ("START", "COMPLETE")
    app_run = app_start["run"]["runId"]
    assert app_run == handle.app_run_id == app_complete["run"]["runId"]
    assert uuid.UUID(app_run).version == 7
    assert app_start["job"] == {**app_start["job"], "namespace": "default", "name": "lineage_tests"}
    assert app_start["job"]["facets"]["jobType"] == {
        **app_start["job"]["facets"]["jobType"],
        "integration": "SPARK",
        "jobType": "APPLICATION",
        "processingType": "NONE",
    }
    details = app_start["run"]["facets"]["spark_applicationDetails"]
    assert (details["appName"], details["master"], details["applicationId"]) == (
        "Lineage Tests",
        "local[2]",
        spark.sparkContext.applicationId,
    )

    start, complete = only_run(receiver.events, "data_out")
    run_id = start["run"]["runId"]
    assert complete["run"]["runId"] == run_id and uuid.UUID(run_id).version == 7
    assert receiver.events.index(start) < receiver.events.index(complete)
    assert before - 1 <= _ms(start) <= _ms(complete) <= after + 1
    engine = complete["run"]["facets"]["processing_engine"]
    assert (engine["name"], engine["version"], engine["openlineageAdapterVersion"]) == (
        "spark",
        spark.version,
        spark_lineage.__version__,
    )
    assert complete["run"]["facets"]["spark_properties"]["properties"] == {
        "spark.master": "local[2]",
        "spark.app.name": "Lineage Tests",
    }
    assert _parent(complete) == (app_run, "default", "lineage_tests", app_run, "default", "lineage_tests")
    assert complete["job"]["facets"]["jobType"] == {
        **complete["job"]["facets"]["jobType"],
        "integration": "SPARK",
        "jobType": "SQL_JOB",
        "processingType": "BATCH",
    }
    assert complete["producer"] == spark_lineage.facets.PRODUCER


def test_read_only_actions_are_filtered_and_the_switch_turns_that_off(
    spark: Any, receiver: LineageReceiver, data_dir: Path
) -> None:
    people = spark.read.option("header", True).csv(str(data_dir / "people.csv"))
    handle = spark_lineage.enable(spark, transport={"type": "http", "url": receiver.url})
    people.count()
    people.groupBy("city").count().collect()
    spark.sql("SET spark.sql.shuffle.partitions=1")
    handle.disable(timeout=30)
    assert query_events(receiver.events) == []

    receiver.clear()
    handle = spark_lineage.enable(
        spark, transport={"type": "http", "url": receiver.url}, python={"filter_read_only_actions": False}
    )
    people.count()
    handle.disable(timeout=30)
    _, complete = only_run(receiver.events, "")
    assert complete["inputs"][0]["name"] == str(data_dir / "people.csv")


def test_spark_confs_and_overrides_take_precedence_in_order(
    spark: Any, receiver: LineageReceiver, data_dir: Path
) -> None:
    parent_run = "0190c3a8-6c4d-7d2e-9f3b-2a5e8c1d4f60"
    confs = {
        "spark.openlineage.namespace": "from_conf",
        "spark.openlineage.transport.type": "http",
        "spark.openlineage.transport.url": receiver.url,
        "spark.openlineage.parentJobNamespace": "airflow",
        "spark.openlineage.parentJobName": "dag.task",
        "spark.openlineage.parentRunId": parent_run,
        "spark.openlineage.capturedProperties": "spark.app.name",
        "spark.openlineage.facets.spark_applicationDetails.disabled": "true",
    }
    for key, value in confs.items():
        spark.conf.set(key, value)
    try:
        handle = spark_lineage.enable(spark, appName="Renamed App")
        spark.range(3).write.parquet(str(data_dir / "range"))
        handle.disable(timeout=30)
        overridden = spark_lineage.enable(spark, namespace="from_override")
        overridden.disable(timeout=30)
    finally:
        for key in confs:
            spark.conf.unset(key)

    app_start = receiver.events[0]
    assert app_start["job"]["namespace"] == "from_conf"
    assert app_start["job"]["name"] == "renamed_app"
    assert "spark_applicationDetails" not in app_start["run"]["facets"]
    assert _parent(app_start) == (parent_run, "airflow", "dag.task", parent_run, "airflow", "dag.task")
    _, complete = only_run(receiver.events, "data_range")
    assert complete["job"]["name"] == "renamed_app.execute_insert_into_hadoop_fs_relation_command.data_range"
    assert complete["run"]["facets"]["spark_properties"]["properties"] == {"spark.app.name": "Lineage Tests"}
    app_run = app_start["run"]["runId"]
    assert _parent(complete) == (app_run, "from_conf", "renamed_app", parent_run, "airflow", "dag.task")
    assert app_events(receiver.events)[-1]["job"]["namespace"] == "from_override"
