"""The ``kafka`` transport: openlineage-spark's ``topicName``, ``properties.*`` and ``timeoutInMillis`` as
openlineage-python's settings, where events go without a secret (no SASL password, no key), and ``doctor``'s
check: the brokers are asked for their topics with the transport's own settings. How an event counts as sent
(once the broker acknowledged it) is :mod:`spark_lineage.delivery.kafka`'s."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from openlineage.client.transport.kafka import KafkaConfig

from spark_lineage.conf_values import boolean, positive_seconds
from spark_lineage.errors import ConfigError
from spark_lineage.extras import install_hint
from spark_lineage.findings import OK, PROBLEM, Finding
from spark_lineage.transports.base import CHECK_TIMEOUT_SECONDS, ConfKeys, Destination, TransportKind, short_reason
from spark_lineage.transports.registry import register

if TYPE_CHECKING:
    from openlineage.client.transport.transport import Transport

_SECRET = re.compile(r"(?i)secret|password|passwd|token|key|credential|auth|sasl|header|cookie")
"""Producer settings that never leave the process (the spool keeps the others, to reach the brokers again)."""


@register
class KafkaKind(TransportKind):
    """openlineage-python's Kafka transport (made as :class:`~spark_lineage.delivery.kafka.AcknowledgedKafkaTransport`
    for the spool)."""

    names = ("kafka",)
    config_class = KafkaConfig
    conf_keys = ("topicName", "topic", "properties.", "config.", "messageKey", "timeoutInMillis", "timeout", "flush")

    def translate(self, spec: dict[str, Any], where: str) -> dict[str, Any]:
        """``topicName`` → ``topic``; ``properties.<kafka key>`` → ``config`` (the producer's settings, keys with
        their dots, as confluent-kafka takes them); ``timeoutInMillis`` → ``timeout`` (seconds the broker has to
        acknowledge an event); ``messageKey`` as it is."""
        if "topicName" in spec:
            spec["topic"] = spec.pop("topicName")
        if not spec.get("topic"):
            raise ConfigError(f"{where}.topicName is required for the kafka transport.")
        producer: dict[str, Any] = {}
        for setting in ("config", "properties"):  # openlineage-python's spelling, then openlineage-spark's
            value = spec.pop(setting, None)
            if value is None:
                continue
            if not isinstance(value, Mapping):
                raise ConfigError(f"{where}.{setting} must be a mapping of Kafka producer settings, got {value!r}.")
            producer.update({str(k): v for k, v in value.items()})
        if not (producer.get("bootstrap.servers") or producer.get("metadata.broker.list")):
            raise ConfigError(
                f"{where}.properties.bootstrap.servers is required for the kafka transport, e.g. localhost:9092."
            )
        spec["config"] = producer
        if "timeoutInMillis" in spec:
            spec["timeout"] = positive_seconds(f"{where}.timeoutInMillis", spec.pop("timeoutInMillis"), 1000.0)
        elif "timeout" in spec:
            spec["timeout"] = positive_seconds(f"{where}.timeout", spec["timeout"], 1.0)
        if "flush" in spec:
            spec["flush"] = boolean(f"{where}.flush", spec["flush"])
        return spec

    def describe(self, transport: Transport, inner: list[Destination]) -> Destination:
        kafka: Any = transport
        config = producer_settings(kafka)
        public = {key: value for key, value in config.items() if not _SECRET.search(key)}
        settings: dict[str, Any] = {"type": "kafka", "topic": kafka.topic, "config": public}
        if kafka.message_key:
            settings["messageKey"] = kafka.message_key
        if isinstance(getattr(kafka, "timeout", None), (int, float)):
            settings["timeout"] = kafka.timeout
        return Destination(f"kafka {config.get('bootstrap.servers', '')}/{kafka.topic}", settings)

    def target(self, transport: Transport) -> str | None:
        servers = producer_settings(transport).get("bootstrap.servers")
        return str(servers) if servers else None

    def check(self, transport: Transport, keys: ConfKeys, probe: Any) -> list[Finding]:
        """Asks the brokers for their topics (confluent-kafka's AdminClient, with the transport's own settings:
        servers, security, SASL), within :data:`~spark_lineage.transports.base.CHECK_TIMEOUT_SECONDS`."""
        return [_check(transport, keys)]


def producer_settings(transport: Any) -> dict[str, Any]:
    """The producer settings of a kafka transport (confluent-kafka's keys), else ``{}``."""
    for holder in (getattr(transport, "kafka_config", None), getattr(transport, "config", None)):
        for attribute in ("config", "properties"):
            settings = getattr(holder, attribute, None)
            if isinstance(settings, Mapping) and settings:
                return dict(settings)
    return {}


def _check(transport: Any, keys: ConfKeys) -> Finding:
    settings = producer_settings(transport)
    servers = settings.get("bootstrap.servers") or settings.get("metadata.broker.list") or "?"
    topic = getattr(transport, "topic", None)
    try:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient
    except ImportError:
        return Finding(
            PROBLEM,
            f"backend: kafka {servers} cannot be checked: confluent-kafka is not installed here, and the kafka "
            f"transport needs it ({install_hint('kafka')})",
        )
    errors: list[str] = []
    silent = logging.getLogger("spark_lineage.doctor.librdkafka")
    silent.propagate, silent.disabled = False, True
    admin_settings = {key: value for key, value in settings.items() if not callable(value)}
    admin_settings.update({"logger": silent, "error_cb": lambda error: errors.append(error.str())})
    try:
        admin = AdminClient(admin_settings)
    except (KafkaException, ValueError, TypeError) as error:
        return Finding(PROBLEM, f"backend: kafka {servers}: confluent-kafka does not take the settings ({error})")
    try:
        cluster = admin.list_topics(timeout=CHECK_TIMEOUT_SECONDS)
    except KafkaException as error:
        cause: Any = error.args[0] if error.args else None
        reason = errors[0] if errors else cause.str() if hasattr(cause, "str") else short_reason(error)
        return Finding(
            PROBLEM,
            f"backend: kafka {servers} does not answer within {CHECK_TIMEOUT_SECONDS:g} s ({reason}); "
            f"check {keys.of('properties.bootstrap.servers')}",
        )
    brokers = len(cluster.brokers)
    if not topic:
        found = ""
    elif topic in cluster.topics:
        found = f"; topic {topic} exists"
    else:
        found = (
            f"; topic {topic} does not exist yet (the first event creates it only if the brokers auto-create topics)"
        )
    return Finding(OK, f"backend: kafka {servers} answers ({brokers} broker{'s' if brokers != 1 else ''}){found}")
