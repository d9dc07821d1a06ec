"""The Kafka transport the spool sends through counts an event as sent only once the broker acknowledged it,
within the transport's timeout, without a broker: a real confluent-kafka producer against a port nothing listens
on, and a stand-in producer for the answers only a broker gives (tests/integration/test_kafka_transport.py does
the same against a real broker)."""

from __future__ import annotations

import json
import re
import sys
import threading
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openlineage.client.event_v2 import DatasetEvent, JobEvent, RunEvent, StaticDataset

from spark_lineage.config import ConfigError, resolve
from spark_lineage.delivery import create_client
from spark_lineage.delivery.kafka import AcknowledgedKafkaTransport
from spark_lineage.delivery.payloads import from_payload, to_payload
from spark_lineage.delivery.replay import replay
from spark_lineage.delivery.sender import Backoff, Sender
from spark_lineage.delivery.spool import Spool
from spark_lineage.delivery.transports import make_transport, spooled_emitter
from spark_lineage.errors import KafkaDeliveryError, KafkaDeliveryTimeoutError
from spark_lineage.extras import install_hint
from spark_lineage.redaction import Redactor
from spark_lineage.transports import describe
from spark_lineage.worker import ErrorLog
from tests.support import free_port, minimal_run_event

PRODUCER = "https://github.com/spark-lineage/spark-lineage"


def _event(run: int = 1) -> RunEvent:
    event: RunEvent = minimal_run_event(run)
    return event


class StandInProducer:
    """confluent-kafka's ``Producer`` as far as the transport uses it, answering as its ``broker`` says (the
    class's when it is made): ``ack``, ``refuse`` (an error delivery report) or ``silent`` (no report: the broker
    never answers)."""

    made: list[StandInProducer] = []
    broker = "ack"

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.broker = StandInProducer.broker
        self.queued: list[tuple[str, Any, bytes, Any]] = []
        self.delivered: list[tuple[str, Any, bytes]] = []
        self.purges = 0
        StandInProducer.made.append(self)

    def produce(self, topic: str, key: Any = None, value: bytes = b"", on_delivery: Any = None) -> None:
        self.queued.append((topic, key, value, on_delivery))

    def flush(self, timeout: float = -1) -> int:
        return self.poll(timeout)

    def poll(self, timeout: float = -1) -> int:
        if self.broker == "silent":  # waits the whole timeout, unless the queue is purged meanwhile
            deadline = time.monotonic() + max(timeout, 0)
            while self.queued and time.monotonic() < deadline:
                time.sleep(0.01)
            return len(self.queued)
        for topic, key, value, on_delivery in self.queued:
            if self.broker == "ack":
                self.delivered.append((topic, key, value))
            on_delivery(None if self.broker == "ack" else "KafkaError{code=MSG_SIZE_TOO_LARGE}", None)
        self.queued.clear()
        return 0

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        self.purges += 1
        for *_, on_delivery in self.queued:
            on_delivery("KafkaError{code=_PURGE_QUEUE}", None)
        self.queued.clear()

    def __len__(self) -> int:
        return len(self.queued)


@pytest.fixture()
def stand_in(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[StandInProducer]]:
    """confluent_kafka replaced by :class:`StandInProducer` (this runs where confluent-kafka is not installed)."""
    monkeypatch.setitem(sys.modules, "confluent_kafka", types.SimpleNamespace(Producer=StandInProducer))
    StandInProducer.made = []
    StandInProducer.broker = "ack"
    yield StandInProducer


def _settings(servers: str = "broker:9092", **more: Any) -> dict[str, Any]:
    return {"type": "kafka", "topic": "lineage", "config": {"bootstrap.servers": servers}, **more}


def test_spark_confs_reach_the_producer_unchanged(stand_in: type[StandInProducer]) -> None:
    prefix = "spark.openlineage.transport."
    config = resolve(
        {
            f"{prefix}type": "kafka",
            f"{prefix}topicName": "lineage.events",
            f"{prefix}messageKey": "nightly.etl",
            f"{prefix}properties.bootstrap.servers": "b1:9092,b2:9092",
            f"{prefix}properties.client.id": "spark-lineage",
            f"{prefix}properties.compression.type": "zstd",
        }
    )
    transport = create_client(config, Redactor()).transport
    assert isinstance(transport, AcknowledgedKafkaTransport)
    (producer,) = stand_in.made
    assert {k: v for k, v in producer.config.items() if k not in ("logger", "error_cb")} == {
        "bootstrap.servers": "b1:9092,b2:9092",
        "client.id": "spark-lineage",
        "compression.type": "zstd",
    }
    transport.emit(_event())
    ((topic, key, value),) = producer.delivered
    assert (topic, key) == ("lineage.events", "nightly.etl")
    assert json.loads(value)["job"]["name"] == "job_1"


def test_without_confluent_kafka_enable_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "confluent_kafka", None)  # import confluent_kafka raises ImportError
    config = resolve({}, {"transport": {"type": "kafka", "topicName": "t", "properties": {"bootstrap.servers": "b:1"}}})
    with pytest.raises(ConfigError, match=re.escape(f"needs confluent-kafka: {install_hint('kafka')}")):
        create_client(config, Redactor())


def test_an_acknowledged_event_is_sent_with_openlineage_pythons_message_key(stand_in: type[StandInProducer]) -> None:
    transport = make_transport(_settings())
    assert isinstance(transport, AcknowledgedKafkaTransport)
    assert transport.timeout == 5.0
    transport.emit(_event(7))
    ((_, key, _),) = stand_in.made[0].delivered
    assert key == "run:default/job_7"


@pytest.mark.parametrize("root", [False, True])
def test_a_spooled_query_event_is_keyed_by_its_application_run(stand_in: type[StandInProducer], root: bool) -> None:
    """The spool gives events back with plain-mapping facets; the key still follows the parent (or root) job."""
    application = {"namespace": "prod", "name": "nightly"}
    parent: dict[str, Any] = {
        "_producer": PRODUCER,
        "_schemaURL": "https://openlineage.io/spec/facets/1-1-0/ParentRunFacet.json#/$defs/ParentRunFacet",
        "run": {"runId": "0195f5b6-0000-7000-8000-000000000001"},
        "job": {"namespace": "prod", "name": "parent" if root else "nightly"},
    }
    if root:
        parent["root"] = {"run": {"runId": "0195f5b6-0000-7000-8000-000000000002"}, "job": application}
    spooled = json.loads(to_payload(_event(3)).json)
    spooled["run"]["facets"] = {"parent": parent}
    event = from_payload(json.dumps(spooled))
    transport = make_transport(_settings())
    transport.emit(event)
    ((_, key, value),) = stand_in.made[0].delivered
    assert key == "run:prod/nightly"
    assert json.loads(value)["run"]["facets"]["parent"] == parent, "the event is sent as it was spooled"


def _spooled_json(kind: str) -> str:
    """A spooled event's JSON: a run's (alone, under a parent, under a root), a job's or a dataset's."""
    if kind == "job":
        return to_payload(JobEvent(eventTime="2026-12-01T10:00:00.000Z", job=_event().job, producer=PRODUCER)).json
    if kind == "dataset":
        dataset = StaticDataset(namespace="kafka://broker:9092", name="orders")
        return to_payload(DatasetEvent(eventTime="2026-12-01T10:00:00.000Z", dataset=dataset, producer=PRODUCER)).json
    document = json.loads(to_payload(_event(3)).json)
    if kind != "run":
        parent: dict[str, Any] = {"run": {"runId": "0195f5b6-0000-7000-8000-000000000001"}}
        parent["job"] = {"namespace": "prod", "name": "nightly"}
        if kind == "run under a root":
            parent["root"] = {"run": parent["run"], "job": {"namespace": "prod", "name": "root"}}
        document["run"]["facets"] = {"parent": parent}
    return json.dumps(document, sort_keys=True)


@pytest.mark.parametrize("kind", ["run", "run under a parent", "run under a root", "job", "dataset"])
@pytest.mark.parametrize("message_key", [None, "fixed"])
def test_a_spooled_event_goes_as_it_is_keyed_as_emit_keys_it(
    stand_in: type[StandInProducer], kind: str, message_key: str | None
) -> None:
    text = _spooled_json(kind)
    transport = make_transport(_settings(**({"messageKey": message_key} if message_key else {})))
    transport.emit(from_payload(text))
    spooled_emitter(transport)(text)
    (_, key, value), (_, spooled_key, spooled_value) = stand_in.made[0].delivered
    assert spooled_value == text.encode(), "byte for byte what the spool holds"
    assert json.loads(value) == json.loads(text)
    assert spooled_key == key
    assert key == message_key or key.startswith(kind.split(" ", maxsplit=1)[0] + ":")


def test_an_event_the_broker_refuses_fails_the_send(stand_in: type[StandInProducer]) -> None:
    stand_in.broker = "refuse"
    transport = make_transport(_settings())
    with pytest.raises(KafkaDeliveryError, match=r"^the broker refused the event: .*MSG_SIZE_TOO_LARGE"):
        transport.emit(_event())


def test_an_unanswered_event_fails_within_the_timeout_and_is_purged(stand_in: type[StandInProducer]) -> None:
    stand_in.broker = "silent"
    transport = make_transport(_settings(timeout=0.5))
    started = time.monotonic()
    with pytest.raises(KafkaDeliveryTimeoutError, match=r"^not acknowledged within 0.5 s$"):
        transport.emit(_event())
    assert 0.4 < time.monotonic() - started < 2
    producer = stand_in.made[0]
    assert (producer.purges, producer.queued) == (1, []), "not delivered later on top of the spool's retry"
    assert isinstance(KafkaDeliveryTimeoutError("x"), TimeoutError), "the sender doubles the timeout after it"


def test_without_flush_the_send_still_waits_for_the_acknowledgement(stand_in: type[StandInProducer]) -> None:
    stand_in.broker = "silent"
    transport = make_transport(_settings(flush=False, timeout=0.3))
    with pytest.raises(KafkaDeliveryTimeoutError):
        transport.emit(_event())
    (producer,) = stand_in.made
    producer.broker = "ack"
    transport.emit(_event())
    assert len(producer.delivered) == 1


def test_a_send_still_in_flight_at_close_fails_instead_of_reaching_the_broker_later(
    stand_in: type[StandInProducer],
) -> None:
    """At shutdown the sender hands its event back to the spool; the send must not go on behind its back."""
    stand_in.broker = "silent"
    transport = make_transport(_settings(timeout=30))
    (producer,) = stand_in.made
    failures: list[BaseException] = []

    def send() -> None:
        try:
            transport.emit(_event())
        except Exception as error:  # noqa: BLE001
            failures.append(error)

    sender = threading.Thread(target=send)
    sender.start()
    time.sleep(0.3)
    started = time.monotonic()
    assert transport.close(0.1) is False
    sender.join(5)
    assert time.monotonic() - started < 3, "the send ends at close, not at its own timeout"
    assert [type(error) for error in failures] == [KafkaDeliveryError]
    producer.broker = "ack"
    producer.flush(0)
    assert producer.delivered == []


def test_every_kafka_transport_the_spool_makes_waits_for_acknowledgements(stand_in: type[StandInProducer]) -> None:
    composite = make_transport({"type": "composite", "transports": {"k": _settings(), "c": {"type": "console"}}})
    kinds = [type(child).__name__ for child in composite.transports]
    assert kinds == ["AcknowledgedKafkaTransport", "ConsoleTransport"]
    transform = make_transport(
        {
            "type": "transform",
            "transformer_class": "openlineage.client.transport.transform.transform.EventTransformer",
            "transport": _settings(),
        }
    )
    assert isinstance(transform.transport, AcknowledgedKafkaTransport)
    # What the spool keeps to make the transport again (replay) names no secret, and makes the same transport.
    secret = make_transport(
        _settings(timeout=2, messageKey="k") | {"config": {"bootstrap.servers": "b:1", "sasl.password": "pw"}}
    )
    destination, settings = describe(secret)
    assert (destination, settings) == (
        "kafka b:1/lineage",
        {
            "type": "kafka",
            "topic": "lineage",
            "config": {"bootstrap.servers": "b:1"},
            "messageKey": "k",
            "timeout": 2.0,
        },
    )
    assert isinstance(make_transport(settings), AcknowledgedKafkaTransport)
    from openlineage.client.transport import get_default_factory
    from openlineage.client.transport.kafka import KafkaTransport

    plain = get_default_factory().create(_settings())
    assert type(plain) is KafkaTransport, "openlineage-python's own kafka transport is left as it is"


def test_the_spool_keeps_an_unacknowledged_event_until_the_broker_takes_it(
    stand_in: type[StandInProducer], tmp_path: Path
) -> None:
    spool = Spool(tmp_path)
    payload = to_payload(_event())
    spool.put("kafka broker:9092/lineage", payload.run_id, payload.job, payload.application, payload.json)
    stand_in.broker = "silent"
    transport = make_transport(_settings(timeout=0.2))
    (producer,) = stand_in.made
    sender = Sender(spool, "kafka broker:9092/lineage", transport, ErrorLog(), backoff=Backoff(first=0.1, most=0.2))
    assert not sender.flush(1.0)
    assert spool.pending().count == 1
    producer.broker = "refuse"
    assert not sender.flush(1.0)
    assert spool.pending().count == 1
    producer.broker = "ack"
    assert sender.close(10)
    assert spool.pending().count == 0
    assert len(producer.delivered) == 1, "one copy: the unanswered attempts were purged"


def test_replay_sends_through_an_acknowledging_transport(stand_in: type[StandInProducer], tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    destination, settings = describe(make_transport(_settings(timeout=0.3)))
    spool.remember_destination(destination, json.dumps(settings))
    payload = to_payload(_event())
    spool.put(destination, payload.run_id, payload.job, payload.application, payload.json)
    stand_in.broker = "silent"
    result = replay(spool, None, 1.0)
    assert (result.sent, result.left) == (0, 1)
    stand_in.broker = "ack"
    result = replay(spool, None, 10)
    assert (result.sent, result.left) == (1, 0)


def test_a_real_producer_with_no_broker_fails_within_the_timeout_and_keeps_nothing_queued() -> None:
    pytest.importorskip("confluent_kafka")
    transport = make_transport(_settings(f"127.0.0.1:{free_port()}", timeout=0.5))
    started = time.monotonic()
    with pytest.raises(
        KafkaDeliveryTimeoutError, match=r"^not acknowledged within 0.5 s; last error: .*Connection refused"
    ):
        transport.emit(_event())
    assert time.monotonic() - started < 3
    assert len(transport.producer) == 0
    # openlineage-python's close waits without end for a negative timeout; here it is the transport's timeout.
    producer = transport.producer
    producer.produce(topic="lineage", value=b"x")
    started = time.monotonic()
    assert transport.close() is False
    assert time.monotonic() - started < 3
    assert len(producer) == 0, "what the broker did not take by close is dropped: it is back in the spool"


def test_a_real_producer_reports_a_failed_delivery_as_a_failed_send() -> None:
    pytest.importorskip("confluent_kafka")
    settings = _settings(f"127.0.0.1:{free_port()}", timeout=5)
    settings["config"]["message.timeout.ms"] = 300  # librdkafka gives up on the message and says so
    transport = make_transport(settings)
    started = time.monotonic()
    with pytest.raises(KafkaDeliveryError, match="timed out"):
        transport.emit(_event())
    assert time.monotonic() - started < 4
