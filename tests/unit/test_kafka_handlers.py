"""Kafka reads and saves, from the values the py4j edge captures (no JVM): which options name which topics,
and that no other option reaches a dataset."""

from __future__ import annotations

import json

from spark_lineage.handlers import handler_for, probes_for
from spark_lineage.handlers.datasources import SaveIntoDataSourceCommandHandler
from spark_lineage.lineage import AnalysisContext
from spark_lineage.plan import CapturedNode, SessionInfo

SCHEMA = json.dumps({"type": "struct", "fields": [{"name": "value", "type": "binary", "nullable": True}]})
SERVERS = "b1.example:9092,b2.example:9092"


def _ctx() -> AnalysisContext:
    return AnalysisContext(
        session=SessionInfo(app_name="app", app_id="local-1", spark_version="3.5.9", master="local[1]", warehouse=None)
    )


def _relation(**options: str) -> CapturedNode:
    return CapturedNode("org.apache.spark.sql.kafka010.KafkaRelation", {"options": options, "schema": SCHEMA})


def test_the_relation_options_are_read_through_a_field_and_only_those_naming_topics() -> None:
    probe = probes_for("KafkaRelation")["options"]
    assert probe.path == ("@sourceOptions",)
    assert probe.keys == frozenset({"kafka.bootstrap.servers", "subscribe", "topic", "assign"})


def test_a_subscribed_read_is_each_topic_on_the_first_server() -> None:
    ctx = _ctx()
    handler = handler_for("KafkaRelation")
    assert handler is not None
    inputs = handler.inputs(_relation(**{"kafka.bootstrap.servers": SERVERS, "subscribe": "a,b"}), ctx)
    assert [(d.identifier.namespace, d.identifier.name) for d in inputs] == [
        ("kafka://b1.example:9092", "a"),
        ("kafka://b1.example:9092", "b"),
    ]
    assert [(f.name, f.type) for f in inputs[0].schema or []] == [("value", "binary")]
    assert ctx.errors == []


def test_a_pattern_read_names_no_topic_and_says_so() -> None:
    ctx = _ctx()
    handler = handler_for("KafkaRelation")
    assert handler is not None
    assert handler.inputs(_relation(**{"kafka.bootstrap.servers": SERVERS}), ctx) == []
    assert ctx.errors == ["a Kafka read that names no topic (subscribePattern): its input is not reported"]


def test_a_save_is_its_topic_option_and_without_one_nothing() -> None:
    """Every save mode appends to a topic: none is a lifecycle change (an ``ErrorIfExists`` save creates
    nothing)."""
    handler = SaveIntoDataSourceCommandHandler()
    provider = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
    save = CapturedNode(
        "org.apache.spark.sql.execution.datasources.SaveIntoDataSourceCommand",
        {
            "provider": provider,
            "mode": "ErrorIfExists",
            "options": {"kafka.bootstrap.servers": SERVERS, "topic": "out"},
        },
    )
    ctx = _ctx()
    outputs = handler.outputs(save, ctx)
    assert [(d.identifier.namespace, d.identifier.name, d.lifecycle) for d in outputs] == [
        ("kafka://b1.example:9092", "out", None)
    ]
    assert handler.job_suffix(save, ctx) is None  # as openlineage-spark names the job
    no_topic = CapturedNode(save.class_name, {"provider": provider, "options": {"kafka.bootstrap.servers": SERVERS}})
    assert handler.outputs(no_topic, ctx) == []
    assert ctx.errors == ["a Kafka save without a topic option: its output is not reported"]
    assert "options" in handler.probes and {"topic", "kafka.bootstrap.servers"} <= (
        handler.probes["options"].keys or frozenset()
    )
