"""Lineage events delivered to a real Kafka broker (KRaft, on loopback) through the Kafka transport: a real
``spark-submit`` configured only by ``--conf spark.openlineage.*``, and a broker that is down while the job runs,
whose events wait in the spool until ``spark-lineage replay`` delivers them once it is up. Each test reads every
message of its topic back with confluent-kafka and validates each event against the OpenLineage schemas."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

import spark_lineage
from spark_lineage.delivery.spool import Spool
from tests.integration.test_spark_submit import spark_submit
from tests.kafka_server import Kafka, KafkaUnavailableError, check_available, kafka_server, read_topic
from tests.support import HeldPort, replay, validate_event

pytestmark = pytest.mark.spark

# The job never imports spark_lineage and never calls spark.stop(): the confs alone turn lineage on.
JOB = """
import sys
from pyspark.sql import SparkSession

spark = SparkSession.builder.appName("Kafka Lineage").getOrCreate()
orders = spark.read.option("header", True).schema("id INT, city STRING").csv(sys.argv[1])  # no header read
orders.write.parquet(sys.argv[2])
orders.where("city = 'paris'").write.parquet(sys.argv[2] + "_paris")
"""

WRITE = "execute_insert_into_hadoop_fs_relation_command"


def _events(server: Kafka, topic: str) -> list[tuple[bytes | None, dict[str, Any]]]:
    """Every message of ``topic`` as (key, event), each event validated."""
    messages = [(key, json.loads(value)) for key, value in read_topic(server, topic)]
    for _, event in messages:
        validate_event(event)
    return messages


def _runs(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(event["eventType"], event["job"]["name"]) for event in events]


@pytest.mark.once
def test_spark_submit_confs_alone_send_every_event_to_a_kafka_topic(tmp_path: Path, kafka: Kafka | None) -> None:
    if kafka is None:
        pytest.skip("no Kafka broker here (scripts/test fetches and starts one)")
    transport = "spark.openlineage.transport."
    confs = {
        f"{transport}type": "kafka",
        f"{transport}topicName": "lineage.submit",
        f"{transport}messageKey": "kafka.lineage",
        f"{transport}properties.bootstrap.servers": kafka.bootstrap,
        f"{transport}properties.client.id": "spark-lineage-test",
        f"{transport}properties.acks": "all",
        f"{transport}properties.linger.ms": "0",
    }
    _, _, output = spark_submit(tmp_path, JOB, confs)

    messages = _events(kafka, "lineage.submit")
    assert {key for key, _ in messages} == {b"kafka.lineage"}, "transport.messageKey keys every message"
    # A write runs one Spark job or more, each with RUNNING events: what is compared is each run's START and end.
    events = [event for _, event in messages if event["eventType"] != "RUNNING"]
    assert any(event["eventType"] == "RUNNING" for _, event in messages)
    suffix = f"{output.parent.name}_rollup"
    assert _runs(events) == [
        ("START", "kafka_lineage"),
        ("START", f"kafka_lineage.{WRITE}.{suffix}"),
        ("COMPLETE", f"kafka_lineage.{WRITE}.{suffix}"),
        ("START", f"kafka_lineage.{WRITE}.{suffix}_paris"),
        ("COMPLETE", f"kafka_lineage.{WRITE}.{suffix}_paris"),
        ("COMPLETE", "kafka_lineage"),
    ]
    application = events[0]["run"]["runId"]
    assert events[-1]["run"]["runId"] == application
    for query in events[1:-1]:
        assert query["run"]["facets"]["parent"]["run"]["runId"] == application
    assert [event["outputs"][0]["name"] for event in events if event["outputs"]] == [
        str(output),
        str(output),
        f"{output}_paris",
        f"{output}_paris",
    ]


@pytest.mark.once
def test_events_wait_in_the_spool_while_the_broker_is_down_and_replay_delivers_them(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    try:
        check_available()
    except KafkaUnavailableError as error:
        pytest.skip(str(error))
    down = HeldPort()  # nothing listens there until the broker starts below
    port = down.port
    spool = tmp_path / "spool"
    handle = spark_lineage.enable(
        spark,
        appName="kafka down",
        transport={
            "type": "kafka",
            "topicName": "lineage.replayed",
            "properties": {"bootstrap.servers": f"127.0.0.1:{port}"},
            "timeoutInMillis": 5000,
        },
        # The deadline bounds the write's analysis too (a slow machine took over 2 s); a broker that refuses is
        # not waited for, so a long one costs nothing here.
        python={"spool": {"dir": str(spool)}, "shutdownTimeoutSeconds": 60},
    )
    output = tmp_path / "written"
    with caplog.at_level(logging.INFO, logger="spark_lineage"):
        spark.range(3).write.parquet(str(output))
        handle.disable()
    # The application run's START and COMPLETE, the write's START, two RUNNING and COMPLETE.
    said = "\n".join(record.getMessage() for record in caplog.records)
    assert Spool(spool).pending().count == 6, f"the application run's and the write's events wait in the spool:\n{said}"

    with kafka_server(tmp_path / "broker", port=down.release()) as broker:
        result = replay(spool)
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout == f"spark-lineage replay: 6 of 6 events delivered from {spool}\n"
        messages = _events(broker, "lineage.replayed")
    events = [event for _, event in messages]
    write = f"kafka_down.{WRITE}.{tmp_path.name}_written"
    assert _runs(events) == [
        ("START", "kafka_down"),
        ("START", write),
        ("RUNNING", write),
        ("RUNNING", write),
        ("COMPLETE", write),
        ("COMPLETE", "kafka_down"),
    ]
    # openlineage-python's message key keeps a run and its parent's on one partition.
    assert {key for key, _ in messages} == {b"run:default/kafka_down"}
    assert Spool(spool).pending().count == 0
