"""Kafka sends that count only once the broker has acknowledged them.

openlineage-python's Kafka transport hands an event to confluent-kafka's producer and then waits for the
producer's queue to drain, without end (``flush()``), and a delivery that failed is only logged: the spool would
count a lost event as delivered, or the sender would wait for a dead broker forever. This transport is the same
transport (its ``emit`` does the sending: message key, serialization, settings), with these changes:

- the wait is bounded by ``timeout`` (seconds, default 5; the sender doubles it for a slow backend, as for HTTP);
- ``emit`` raises unless the broker acknowledged the event within that time: the event stays in the spool.
  A message not acknowledged in time, or by ``close()``, is purged from the producer's queue, so it does not
  reach the broker later behind the spool's back (delivery stays at least once: a broker that stored it
  without answering in time gets it again);
- the message key follows the ``parent`` facet of the spool's events too, whose facets are plain mappings;
- a spooled event's JSON is sent as it is (:meth:`AcknowledgedKafkaTransport.emit_json`), with the key ``emit``
  gives the event, read from the JSON.

The spool's transports are made through :func:`acknowledged`, which names this class for every ``kafka``
transport (also inside composite and transform transports); openlineage-python's own ``kafka`` transport is
left as it is for anyone else in the process. librdkafka's log lines go to the ``spark_lineage.kafka`` logger
at DEBUG (secrets redacted like every log line of this library), not to the job's stderr, where a broker that
is down would print one per reconnection: the sender reports a failed send once, with librdkafka's last error.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import attr
from openlineage.client.transport.kafka import KafkaConfig, KafkaTransport

from spark_lineage.delivery.payloads import from_payload
from spark_lineage.errors import KafkaDeliveryError, KafkaDeliveryTimeoutError
from spark_lineage.extras import install_hint
from spark_lineage.transports import rewritten

DEFAULT_TIMEOUT_SECONDS = 5.0
TRANSPORT_CLASS = f"{__name__}.AcknowledgedKafkaTransport"
"""How openlineage-python's transport factory finds this transport (a dotted class path is a transport type)."""

librdkafka_log = logging.getLogger("spark_lineage.kafka")


@attr.define
class AcknowledgedKafkaConfig(KafkaConfig):
    timeout: float = attr.field(default=DEFAULT_TIMEOUT_SECONDS, converter=float)
    """Seconds the broker has to acknowledge one event."""


class AcknowledgedKafkaTransport(KafkaTransport):
    """openlineage-python's Kafka transport, whose ``emit`` returns only once the broker acknowledged the event,
    within ``timeout`` seconds, and raises otherwise."""

    kind = "kafka"
    config_class = AcknowledgedKafkaConfig

    def __init__(self, config: AcknowledgedKafkaConfig) -> None:
        self.timeout = float(config.timeout)
        self._librdkafka = _LibrdkafkaCallbacks(config.config.get("error_cb"))
        super().__init__(config)

    def _setup_producer(self, config: dict[str, Any]) -> None:
        try:
            import confluent_kafka  # noqa: F401
        except ImportError:
            raise ModuleNotFoundError(f"the kafka transport needs confluent-kafka: {install_hint('kafka')}") from None
        callbacks = self._librdkafka
        super()._setup_producer({"logger": callbacks, **config, "error_cb": callbacks.error})
        if self.producer is not None:
            self.producer = _ReportingProducer(self.producer)  # type: ignore[assignment]

    def emit(self, event: Any) -> None:
        # openlineage-python's emit produces through _ReportingProducer and, with ``flush`` (the default), waits.
        self._acknowledged(lambda: KafkaTransport.emit(self, event))

    def emit_json(self, text: str) -> None:
        """Send a spooled event: its JSON as it is, keyed as :meth:`emit` keys the event it holds."""
        if self._is_airflow_sqlalchemy:  # openlineage-python closes its producer after each event there
            self.emit(from_payload(text))
            return
        key = self.message_key or self._message_key_of(json.loads(text))

        def produce() -> None:
            assert self.producer is not None
            self.producer.produce(topic=self.topic, key=key, value=text.encode("utf-8"))

        self._acknowledged(produce)

    def _acknowledged(self, produce: Callable[[], object]) -> None:
        """``produce`` one message, then wait for the broker's acknowledgement until the timeout: raise unless it
        came, and purge the message when it did not."""
        deadline = time.monotonic() + self.timeout
        self._librdkafka.last_error = None
        if self.producer is None:
            self._setup_producer(self.kafka_config.config)
        producer = self.producer
        assert isinstance(producer, _ReportingProducer)
        produce()
        report = producer.last
        if report is None:
            raise KafkaDeliveryError("the Kafka producer was not asked to send the event")
        remaining = deadline - time.monotonic()
        if not report.done and remaining > 0:
            producer.flush(remaining)
        if not report.done:
            producer.purge_unacknowledged()
            last_error = self._librdkafka.last_error
            raise KafkaDeliveryTimeoutError(
                f"not acknowledged within {self.timeout:g} s" + (f"; last error: {last_error}" if last_error else "")
            )
        if report.error is not None:
            raise KafkaDeliveryError(f"the broker refused the event: {report.error}")

    def _message_key_of(self, document: Mapping[str, Any]) -> str | None:
        """The message key openlineage-python gives the event ``document`` holds (``_get_message_key``): its
        dataset, its job, or for a run its root or parent job when it has one, else its own job."""
        dataset = document.get("dataset")
        if isinstance(dataset, Mapping):
            return f"dataset:{dataset.get('namespace')}/{dataset.get('name')}"
        job = document.get("job") or {}
        run = document.get("run")
        if not isinstance(run, Mapping):
            return f"job:{job.get('namespace')}/{job.get('name')}"
        parent = (run.get("facets") or {}).get("parent")
        namespace, name = self._get_run_message_key_args_from_parent_run_facet(parent) if parent else (None, None)
        if namespace and name:
            return f"run:{namespace}/{name}"
        return f"run:{job.get('namespace')}/{job.get('name')}"

    def close(self, timeout: float = -1) -> bool:
        """Wait (bounded, as :meth:`wait_for_completion`) for what is in flight, then drop what the broker has not
        acknowledged: it is back in the spool, and must not reach the broker later behind the spool's back."""
        producer = self.producer
        delivered = super().close(timeout)
        if not delivered and isinstance(producer, _ReportingProducer):
            producer.purge_unacknowledged()
        return delivered

    def wait_for_completion(self, timeout: float = -1) -> bool:
        """openlineage-python waits without end for ``timeout < 0``; here that means ``self.timeout``."""
        return super().wait_for_completion(self.timeout if timeout < 0 else timeout)

    def _get_run_message_key_args_from_parent_run_facet(self, parent_run_facet: Any) -> tuple[str | None, str | None]:
        """The job a run event's message key names, from its ``parent`` facet: the spool's events keep their
        facets as plain mappings (see :mod:`~spark_lineage.delivery.payloads`), which openlineage-python reads
        only as typed facets. As it does: the root job if there is one, else the parent job."""
        if isinstance(parent_run_facet, Mapping):
            root = parent_run_facet.get("root")
            job = (root.get("job") if isinstance(root, Mapping) else None) or parent_run_facet.get("job") or {}
            return job.get("namespace"), job.get("name")
        return super()._get_run_message_key_args_from_parent_run_facet(parent_run_facet)


class _LibrdkafkaCallbacks:
    """librdkafka's log lines, at DEBUG on ``spark_lineage.kafka``, and its last error (a broker that is down, a
    failed authentication), for the failure the sender reports; a user's own ``error_cb`` is called too."""

    def __init__(self, user_error_cb: Any = None) -> None:
        self.last_error: str | None = None
        self._user_error_cb = user_error_cb if callable(user_error_cb) else None

    def log(self, level: int, message: str, *args: Any) -> None:
        librdkafka_log.debug(message, *args)

    def error(self, error: Any) -> None:
        text = getattr(error, "str", None)
        self.last_error = str(text() if callable(text) else error)
        if self._user_error_cb is not None:
            self._user_error_cb(error)


class _DeliveryReport:
    """One message's delivery report, as confluent-kafka calls it back (from ``flush``/``poll``)."""

    def __init__(self) -> None:
        self.done = False
        self.error: Any = None

    def __call__(self, error: Any, message: Any) -> None:
        self.error = error
        self.done = True


class _ReportingProducer:
    """confluent-kafka's producer, keeping the delivery report of the last message it was asked to send."""

    def __init__(self, producer: Any) -> None:
        self._producer = producer
        self.last: _DeliveryReport | None = None

    def produce(self, *args: Any, **kwargs: Any) -> None:
        kwargs.pop("callback", None)
        kwargs.pop("on_delivery", None)  # openlineage-python's only logs failures
        self.last = report = _DeliveryReport()
        self._producer.produce(*args, on_delivery=report, **kwargs)

    def purge_unacknowledged(self) -> None:
        """Drop what the producer still holds: the spool sends it again."""
        try:
            self._producer.purge(in_queue=True, in_flight=True, blocking=False)
            self._producer.poll(0)
        except Exception as error:  # noqa: BLE001 - the event is failed either way
            librdkafka_log.debug("purging the Kafka producer's queue failed: %s", error)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._producer, name)

    def __len__(self) -> int:
        return len(self._producer)


def acknowledged(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Transport settings with every ``kafka`` transport, also inside composite and transform transports, made
    as :class:`AcknowledgedKafkaTransport`."""

    def made_here(level: dict[str, Any]) -> dict[str, Any]:
        if level.get("type") == "kafka":
            level["type"] = TRANSPORT_CLASS
        return level

    return rewritten(settings, made_here)
