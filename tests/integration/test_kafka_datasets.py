"""Kafka topics as datasets in batch jobs, against a real broker (KRaft, on loopback): written with
``format("kafka").save()``, read by ``subscribe`` and by ``assign``, named ``kafka://<first server>`` + topic
as openlineage-spark names them; a ``subscribePattern`` read names no topic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support import LineageReceiver, dataset, datasets, only_run

pytestmark = pytest.mark.spark

KAFKA_COLUMNS = [
    ("key", "binary"),
    ("value", "binary"),
    ("topic", "string"),
    ("partition", "integer"),
    ("offset", "long"),
    ("timestamp", "timestamp"),
    ("timestampType", "integer"),
]


@pytest.fixture()
def servers(kafka: Any) -> str:
    if kafka is None:
        pytest.skip("no Kafka broker here (scripts/test fetches and starts one)")
    return str(kafka.bootstrap)


def _write(spark: Any, servers: str, topic: str) -> None:
    rows = spark.createDataFrame([("1", "ann"), ("2", "bob")], "key string, value string")
    rows.write.format("kafka").option("kafka.bootstrap.servers", servers).option("topic", topic).save()


def _reader(spark: Any, servers: str) -> Any:
    return spark.read.format("kafka").option("kafka.bootstrap.servers", f"{servers},other-broker:9092")


def test_a_topic_written_then_read_into_parquet(
    spark: Any, lineage: Any, receiver: LineageReceiver, servers: str, tmp_path: Path
) -> None:
    namespace = f"kafka://{servers}"
    _write(spark, servers, "orders")
    out = str(tmp_path / "orders_copy")
    _reader(spark, servers).option("subscribe", "orders").load().selectExpr(
        "CAST(key AS STRING) AS id", "CAST(value AS STRING) AS name"
    ).write.parquet(out)
    assert lineage.flush(60)

    start, complete = only_run(receiver.events, "execute_save_into_data_source_command")
    assert complete["job"]["name"].endswith(".execute_save_into_data_source_command")  # as the reference
    assert datasets(complete, "outputs") == [(namespace, "orders")]
    assert dataset(complete, "outputs", "orders")["facets"]["schema"]["fields"] == [
        {"name": "key", "type": "string"},
        {"name": "value", "type": "string"},
    ]
    assert datasets(start, "outputs") == [(namespace, "orders")]

    _, read = only_run(receiver.events, "orders_copy")
    assert datasets(read, "inputs") == [(namespace, "orders")]
    topic = dataset(read, "inputs", "orders")
    assert [(f["name"], f["type"]) for f in topic["facets"]["schema"]["fields"]] == KAFKA_COLUMNS
    lineage_of = dataset(read, "outputs", out)["facets"]["columnLineage"]["fields"]
    assert {column: [(f["name"], f["field"]) for f in spec["inputFields"]] for column, spec in lineage_of.items()} == {
        "id": [("orders", "key")],
        "name": [("orders", "value")],
    }
    assert "extractionError" not in read["run"]["facets"]


def test_assign_names_every_topic_and_a_pattern_names_none(
    spark: Any, lineage: Any, receiver: LineageReceiver, servers: str, tmp_path: Path
) -> None:
    namespace = f"kafka://{servers}"
    _write(spark, servers, "left_topic")
    _write(spark, servers, "right_topic")
    assigned = '{"left_topic":[0],"right_topic":[0]}'
    _reader(spark, servers).option("assign", assigned).load().write.parquet(str(tmp_path / "assigned"))
    _reader(spark, servers).option("subscribePattern", "(left|right)_topic").load().write.parquet(
        str(tmp_path / "patterned")
    )
    assert lineage.flush(60)

    _, complete = only_run(receiver.events, "assigned")
    assert datasets(complete, "inputs") == [(namespace, "left_topic"), (namespace, "right_topic")]
    _, patterned = only_run(receiver.events, "patterned")
    assert datasets(patterned, "inputs") == []
    assert (
        "names no topic (subscribePattern)"
        in patterned["run"]["facets"]["extractionError"]["errors"][0]["errorMessage"]
    )
