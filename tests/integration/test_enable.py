"""enable() / disable() / flush(), configuration errors, and sessions lineage cannot attach to."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import spark_lineage
from tests.support import LineageReceiver, app_events, query_events

pytestmark = pytest.mark.spark


def _jvm_listener_count(spark: Any) -> int:
    return len(spark._jsparkSession.listenerManager().listListeners())


def test_enable_twice_returns_the_same_handle_and_disable_really_unregisters(
    spark: Any, receiver: LineageReceiver, data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    baseline = _jvm_listener_count(spark)
    handle = spark_lineage.enable(spark, transport={"type": "http", "url": receiver.url})
    assert spark_lineage.enable(spark) is handle

    def ours() -> list[Any]:
        return [record for record in caplog.records if record.name == "spark_lineage"]

    assert ours() == []
    assert spark_lineage.enable(spark, namespace="other", appName="x") is handle
    (warning,) = ours()
    assert "the settings given now are not applied: appName, namespace" in warning.getMessage()
    assert _jvm_listener_count(spark) == baseline + 1
    listener = handle._runtime.listener
    spark.range(2).write.parquet(str(data_dir / "while_on"))
    assert handle.flush(60)
    calls_while_on = listener.calls
    assert calls_while_on >= 1

    handle.disable(timeout=30)
    assert not handle.enabled
    assert _jvm_listener_count(spark) == baseline
    spark.range(2).write.parquet(str(data_dir / "while_off"))
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(10_000)
    assert listener.calls == calls_while_on  # Spark no longer calls it
    assert not [e for e in receiver.events if "while_off" in e["job"]["name"]]

    again = spark_lineage.enable(spark, transport={"type": "http", "url": receiver.url})
    assert again is not handle and again.app_run_id != handle.app_run_id
    again.disable(timeout=30)
    assert [e["eventType"] for e in app_events(receiver.events)] == ["START", "COMPLETE", "START", "COMPLETE"]


@pytest.mark.parametrize("how", ["spark_conf", "environment"])
def test_disabled_by_configuration_is_a_no_op(
    spark: Any, receiver: LineageReceiver, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    if how == "spark_conf":
        spark.conf.set("spark.openlineage.disabled", "true")
    else:
        monkeypatch.setenv("OPENLINEAGE_DISABLED", "true")
    baseline = _jvm_listener_count(spark)
    try:
        handle = spark_lineage.enable(spark, transport={"type": "http", "url": receiver.url})
        spark.range(2).count()
        assert not handle.enabled
        assert handle.flush(5)
        assert _jvm_listener_count(spark) == baseline
    finally:
        spark.conf.unset("spark.openlineage.disabled")
    assert receiver.events == []


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"transport": {"type": "htp"}},
            "spark.openlineage.transport.type='htp' is not a known transport; accepted values: ",
        ),
        ({"transport": {"type": "http"}}, "spark.openlineage.transport.url is required for the http transport"),
        ({"transport": {"type": "file"}}, "spark.openlineage.transport.location is required"),
        (
            {"python": {"queue_size": "0"}},
            "spark.openlineage.python.queueSize='0' is not valid; accepted values: integers >= 1",
        ),
        ({"parent_job_name": "dag.task"}, "spark.openlineage.parentRunId must be set together with"),
    ],
)
def test_invalid_configuration_raises_naming_the_key(spark: Any, overrides: dict[str, Any], message: str) -> None:
    baseline = _jvm_listener_count(spark)
    with pytest.raises(spark_lineage.ConfigError) as raised:
        spark_lineage.enable(spark, **overrides)
    assert message in str(raised.value)
    assert _jvm_listener_count(spark) == baseline


def test_invalid_spark_conf_raises_naming_the_key(spark: Any) -> None:
    spark.conf.set("spark.openlineage.jobName.appendDatasetName", "maybe")
    try:
        with pytest.raises(
            spark_lineage.ConfigError,
            match=r"spark\.openlineage\.jobName\.appendDatasetName='maybe' "
            r"is not a boolean; accepted values: true, false",
        ):
            spark_lineage.enable(spark)
    finally:
        spark.conf.unset("spark.openlineage.jobName.appendDatasetName")


def test_flush_delivers_everything_queued(spark: Any, lineage: Any, receiver: LineageReceiver, data_dir: Path) -> None:
    for index in range(5):
        spark.range(index + 1).write.parquet(str(data_dir / f"flushed_{index}"))
    assert lineage.flush(60)
    names = {e["job"]["name"] for e in query_events(receiver.events) if e["eventType"] == "COMPLETE"}
    assert names >= {f"lineage_tests.execute_insert_into_hadoop_fs_relation_command.data_flushed_{i}" for i in range(5)}
