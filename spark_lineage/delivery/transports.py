"""Transports as the spool knows them: a name for where events go (the spool files events under it, and a
process only sends what was meant for its own destination), the settings to reach it again without any
secret (for ``spark-lineage replay``), and retries left to the spool.

openlineage-python's HTTP transport retries a failed request five times with backoff inside ``emit``; with a
spool that would send a slow backend a flood of copies and hold the sender for seconds per event, so its
retries are turned off: the spool retries, once per backend.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

from openlineage.client.transport import get_default_factory
from openlineage.client.transport.transport import Transport, TransportFactory

from spark_lineage.delivery.console import visible
from spark_lineage.delivery.kafka import acknowledged
from spark_lineage.redaction import Redactor

if TYPE_CHECKING:
    from openlineage.client import OpenLineageClient

    from spark_lineage.config import LineageConfig

NO_RETRIES = {"total": 0, "connect": 0, "read": 0, "redirect": 0, "status": 0}
_SECRET = re.compile(r"(?i)secret|password|passwd|token|key|credential|auth|sasl|header|cookie")


def make_transport(settings: dict[str, Any] | None) -> Transport:
    """The transport ``settings`` describe, as the spool sends through it: openlineage-python's transport
    factory, with a ``kafka`` transport that counts an event as sent only once the broker acknowledged it
    (:mod:`spark_lineage.delivery.kafka`), and a ``console`` one that prints (:mod:`spark_lineage.delivery.console`)."""
    return visible(get_default_factory().create(acknowledged(settings) if settings else settings))


class SecretLearningFactory(TransportFactory):
    """openlineage-python's transport factory (through :func:`make_transport`), teaching a
    :class:`~spark_lineage.redaction.Redactor` the secrets of each transport's settings before the transport is
    made (and logs its settings at DEBUG), wherever the settings came from: ``spark.openlineage.*``,
    ``openlineage.yml`` or ``OPENLINEAGE__*``."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor

    def create(self, config: dict[str, str] | None = None) -> Transport:
        if config:
            self.redactor.learn_from_transport(config)
        return make_transport(config)


def create_client(config: LineageConfig, redactor: Redactor) -> OpenLineageClient:
    """The client ``config`` describes, with ``redactor`` knowing every secret of its transport."""
    redactor.learn([os.environ.get("OPENLINEAGE_API_KEY") or ""])  # the OPENLINEAGE_URL shortcut's key
    redactor.learn_from_transport(config.transport or {})
    client = config.create_client(SecretLearningFactory(redactor))
    # with nothing configured, openlineage-python makes its console transport without asking the factory
    client.transport = visible(client.transport)
    return client


def describe(transport: Any) -> tuple[str, dict[str, Any]]:
    """``(destination, settings)``: where ``transport`` sends, and how to make it again without secrets."""
    kind = getattr(transport, "kind", None) or type(transport).__name__
    if kind == "http":
        # Credentials in the url stay out of the spool; replay gets them from its own configuration.
        public_url = Redactor().text(transport.url)
        url = urljoin(public_url, transport.endpoint)
        settings: dict[str, Any] = {"type": "http", "url": public_url, "endpoint": transport.endpoint}
        settings["timeout"] = transport.timeout
        if type(getattr(transport.config, "auth", None)).__name__ == "ApiKeyTokenProvider":
            settings["auth"] = {"type": "api_key"}  # the key itself comes from the replaying user
        if transport.compression:
            settings["compression"] = str(getattr(transport.compression, "value", transport.compression))
        return f"http {url}", settings
    if kind == "file":
        config = transport.config
        return f"file {config.log_file_path}", {
            "type": "file",
            "log_file_path": config.log_file_path,
            "append": config.append,
        }
    if kind == "kafka":
        config = dict(getattr(transport.kafka_config, "config", {}) or {})
        servers = config.get("bootstrap.servers", "")
        public = {key: value for key, value in config.items() if not _SECRET.search(key)}
        settings = {"type": "kafka", "topic": transport.topic, "config": public}
        if transport.message_key:
            settings["messageKey"] = transport.message_key
        if isinstance(getattr(transport, "timeout", None), (int, float)):
            settings["timeout"] = transport.timeout
        return f"kafka {servers}/{transport.topic}", settings
    if kind == "composite":
        parts = [describe(child) for child in transport.transports]
        return "composite(" + ", ".join(name for name, _ in parts) + ")", {
            "type": "composite",
            "transports": [settings for _, settings in parts],
        }
    if kind == "transform":
        inner, settings = describe(transport.transport)
        return f"transform {inner}", {"type": "transform", "transport": settings}
    if kind in ("console", "noop"):
        return kind, {"type": kind}
    cls = type(transport)
    return f"{kind} {cls.__module__}.{cls.__qualname__}", {"type": f"{cls.__module__}.{cls.__qualname__}"}


API_KEY_ENV = "OPENLINEAGE_API_KEY"


def needs_api_key(settings: dict[str, Any]) -> bool:
    """Whether a destination kept in the spool was reached with an api key (which the spool does not keep)."""
    if (settings.get("auth") or {}).get("type") == "api_key":
        return True
    return any(needs_api_key(child) for child in settings.get("transports") or [])


def with_api_key(settings: dict[str, Any], api_key: str) -> dict[str, Any]:
    """``settings`` with the api key put back where it was used."""
    settings = dict(settings)
    if (settings.get("auth") or {}).get("type") == "api_key":
        settings["auth"] = {"type": "api_key", "apiKey": api_key}
    if settings.get("transports"):
        settings["transports"] = [with_api_key(child, api_key) for child in settings["transports"]]
    return settings


def leave_retries_to_the_spool(transport: Any) -> None:
    """Turn off a transport's own retries (HTTP, also inside composite and transform transports)."""
    kind = getattr(transport, "kind", None)
    if kind == "http":
        transport.config.retry = dict(NO_RETRIES)
        if transport._session is not None:  # made already: mount an adapter without retries
            transport._prepare_session(transport._session)
    elif kind == "composite":
        for child in transport.transports:
            leave_retries_to_the_spool(child)
    elif kind == "transform":
        leave_retries_to_the_spool(transport.transport)
