"""openlineage-spark's ``spark.openlineage.transport.*`` keys as openlineage-python transport settings: one
translation per transport type, each validating what would otherwise fail only when the first event is
sent."""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from spark_lineage.config.values import boolean, number, python_class, text_list
from spark_lineage.errors import ConfigError
from spark_lineage.registry import Registry

MAP_SETTINGS = frozenset({"properties", "headers", "urlParams", "config"})
"""Settings whose keys are names of their own (``properties.bootstrap.servers``): the rest of the key after
them is one name, dots and all."""

Translation = Callable[[dict[str, Any], str], dict[str, Any]]

_SSL_CONTEXT = tuple(
    f"sslContext.{name}"
    for name in (
        "caCertPath", "ca_cert_path", "cacertpath",
        "clientCertPath", "client_cert_path", "clientcertpath",
        "clientKeyPath", "client_key_path", "clientkeypath",
    )
)  # fmt: skip
_HTTP = (
    "url", "endpoint", "timeout", "timeoutInMillis", "verify", "compression",
    "auth.", "headers.", "custom_headers.", "urlParams.", "retry.", *_SSL_CONTEXT,
)  # fmt: skip
SETTINGS_BY_TYPE: dict[str, tuple[str, ...]] = {
    "http": _HTTP,
    "async_http": (*_HTTP, "max_queue_size", "max_concurrent_requests"),
    "file": ("location", "log_file_path", "append"),
    "kafka": ("topicName", "topic", "properties.", "config.", "messageKey", "timeoutInMillis", "timeout", "flush"),
    "console": (),
    "noop": (),
}
"""The ``spark.openlineage.transport.*`` keys (after ``transport.``, besides ``type``) each transport type reads,
in openlineage-spark's spelling and openlineage-python's; one ending in ``.`` is a group of keys of their own
(``headers.X-Team``). Other types (composite, transform, custom classes) are not listed: what they read is
theirs."""


def unknown_keys(flat: Mapping[str, Any]) -> list[tuple[str, str | None]]:
    """The keys of flat transport settings (``url``, ``auth.apiKey``, without ``transport.``) that their
    transport type does not read, which openlineage-python ignores without a word, each with the known key it is
    closest to (or ``None``). Empty for a type not in :data:`SETTINGS_BY_TYPE`."""
    kind = str(flat.get("type") or ("http" if "url" in flat else "")).strip()
    known = SETTINGS_BY_TYPE.get(kind)
    if known is None:
        return []
    names = [name for name in known if not name.endswith(".")]
    groups = [name for name in known if name.endswith(".")]
    unknown = []
    for key in sorted(flat):
        if key in ("", "type") or key in names or any(key.startswith(group) and key != group for group in groups):
            continue
        rest = key.split(".", 1)[1] if "." in key else ""  # a misspelt group: ``header.X-Team``
        candidates = [*names, *(group + rest for group in groups if rest)]
        close = difflib.get_close_matches(key, candidates, n=1, cutoff=0.6)
        unknown.append((key, close[0] if close else None))
    return unknown


TRANSLATIONS: Registry[Translation] = Registry("transport settings translation")


def translation(*kinds: str) -> Callable[[Translation], Translation]:
    """Decorator: how the settings of these transport kinds are translated for openlineage-python."""

    def register(function: Translation) -> Translation:
        TRANSLATIONS.add(kinds, function)
        return function

    return register


def from_flat(flat: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Nested transport settings from flat keys (``url``, ``auth.apiKey``, ``properties.bootstrap.servers``),
    translated for openlineage-python. ``where`` is the key prefix, for error messages."""
    nested: dict[str, Any] = {}
    for key, value in flat.items():
        if key == "":
            if not isinstance(value, Mapping):
                raise ConfigError(f"{where} must be a mapping of transport settings, got {value!r}.")
            nested.update(value)
            continue
        parts = _split(key)
        cursor = nested
        for part in parts[:-1]:
            cursor = cursor.setdefault(part, {})
        cursor[parts[-1]] = value
    return translate(nested, where)


def _split(key: str) -> list[str]:
    parts = key.split(".")
    for index, part in enumerate(parts[:-1]):
        if part in MAP_SETTINGS:
            return [*parts[: index + 1], ".".join(parts[index + 1 :])]
        if part == "transports" and index + 2 < len(parts):  # composite: transports.<name>.<setting>
            return [*parts[: index + 2], *_split(".".join(parts[index + 2 :]))]
    return parts


def translate(spec: Mapping[str, Any], where: str) -> dict[str, Any]:
    """One transport's settings, in openlineage-spark's spelling or openlineage-python's, for
    openlineage-python."""
    spec = dict(spec)
    kind = spec.get("type")
    if kind is None:
        if "url" not in spec:
            raise ConfigError(
                f"{where}.type is missing; accepted values: {', '.join(known_types())} "
                "(or a dotted Python class path of a custom transport)."
            )
        kind = "http"
    kind = str(kind).strip()
    if kind not in known_types() and "." not in kind:
        raise ConfigError(
            f"{where}.type={kind!r} is not a known transport; accepted values: {', '.join(known_types())} "
            "(or a dotted Python class path of a custom transport)."
        )
    spec["type"] = kind
    translate_kind = TRANSLATIONS.get(kind)
    return translate_kind(spec, where) if translate_kind is not None else spec


def known_types() -> list[str]:
    from openlineage.client.transport import get_default_factory

    return sorted(getattr(get_default_factory(), "transports", {}).keys())


@translation("http", "async_http")
def _http(spec: dict[str, Any], where: str) -> dict[str, Any]:
    if not spec.get("url"):
        raise ConfigError(f"{where}.url is required for the {spec['type']} transport, e.g. http://localhost:5000.")
    if "timeoutInMillis" in spec:
        spec["timeout"] = _positive_seconds(f"{where}.timeoutInMillis", spec.pop("timeoutInMillis"), 1000.0)
    elif "timeout" in spec:
        spec["timeout"] = _positive_seconds(f"{where}.timeout", spec["timeout"], 1.0)
    if "headers" in spec:
        spec["custom_headers"] = {str(k): str(v) for k, v in dict(spec.pop("headers")).items()}
    if "urlParams" in spec:
        # openlineage-python joins url and endpoint with urljoin, which drops a query on the url: the
        # parameters go on the endpoint, whose query survives.
        query = urlencode({str(k): str(v) for k, v in dict(spec.pop("urlParams")).items()})
        endpoint = str(spec.get("endpoint", "api/v1/lineage"))
        spec["endpoint"] = endpoint + ("&" if "?" in endpoint else "?") + query
    auth = spec.get("auth")
    if isinstance(auth, Mapping):
        auth = dict(auth)
        if str(auth.get("type", "")).replace("-", "_").lower() in ("api_key", "apikey"):
            auth["type"] = "api_key"
            if not (auth.get("apiKey") or auth.get("api_key") or auth.get("apikey")):
                raise ConfigError(f"{where}.auth.apiKey is required when {where}.auth.type=api_key.")
        elif auth.get("type") == "jwt":  # openlineage-python's JWT provider reads the reference's keys as they are
            for required in ("apiKey", "tokenEndpoint"):
                if not auth.get(required):
                    raise ConfigError(f"{where}.auth.{required} is required when {where}.auth.type=jwt.")
            if isinstance(auth.get("tokenFields"), str):  # ``[token;access_token]``, as the Java client takes it
                auth["tokenFields"] = text_list(auth["tokenFields"])
        spec["auth"] = auth
    return spec


@translation("file")
def _file(spec: dict[str, Any], where: str) -> dict[str, Any]:
    location = spec.pop("location", None) or spec.get("log_file_path")
    if not location:
        raise ConfigError(f"{where}.location is required for the file transport: the file to append events to.")
    location = str(location)
    if "://" not in location:  # a local file: its directory must exist, or be made now, not at the first event
        directory = Path(location).expanduser().parent
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise ConfigError(f"{where}.location={location!r}: its directory cannot be created ({error}).") from None
        if not directory.is_dir():
            raise ConfigError(f"{where}.location={location!r}: {directory} is not a directory.")
    spec["log_file_path"] = location
    spec["append"] = boolean(f"{where}.append", spec.get("append", True))
    return spec


@translation("kafka")
def _kafka(spec: dict[str, Any], where: str) -> dict[str, Any]:
    """``topicName`` → ``topic``; ``properties.<kafka key>`` → ``config`` (the producer's settings, keys with
    their dots, as confluent-kafka takes them); ``timeoutInMillis`` → ``timeout`` (seconds the broker has to
    acknowledge an event; see :mod:`spark_lineage.delivery.kafka`); ``messageKey`` as it is."""
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
        spec["timeout"] = _positive_seconds(f"{where}.timeoutInMillis", spec.pop("timeoutInMillis"), 1000.0)
    elif "timeout" in spec:
        spec["timeout"] = _positive_seconds(f"{where}.timeout", spec["timeout"], 1.0)
    if "flush" in spec:
        spec["flush"] = boolean(f"{where}.flush", spec["flush"])
    return spec


@translation("transform")
def _transform(spec: dict[str, Any], where: str) -> dict[str, Any]:
    for java_key, python_key in (
        ("transformerClass", "transformer_class"),
        ("transformerProperties", "transformer_properties"),
    ):
        if java_key in spec:
            spec[python_key] = spec.pop(java_key)
    if spec.get("transformer_class"):
        _check_transformer(f"{where}.transformerClass", str(spec["transformer_class"]))
    if isinstance(spec.get("transport"), Mapping):
        spec["transport"] = translate(spec["transport"], f"{where}.transport")
    return spec


def _check_transformer(key: str, path: str) -> None:
    """openlineage-spark's ``transformerClass`` names a Java class; here it is the dotted path of a Python
    ``EventTransformer``."""
    from openlineage.client.transport.transform.transform import EventTransformer

    python_class(key, path, EventTransformer)


@translation("composite")
def _composite(spec: dict[str, Any], where: str) -> dict[str, Any]:
    transports = spec.get("transports")
    if isinstance(transports, (list, tuple)) and transports:  # openlineage-python's own spelling
        spec["transports"] = [
            translate(dict(sub), f"{where}.transports[{index}]") for index, sub in enumerate(transports)
        ]
    elif isinstance(transports, Mapping) and transports:
        spec["transports"] = {
            name: translate(dict(sub), f"{where}.transports.{name}") for name, sub in transports.items()
        }
    else:
        raise ConfigError(f"{where}.transports.<name>.type is required for the composite transport.")
    for java_key, python_key in (
        ("continueOnFailure", "continue_on_failure"),
        ("continueOnSuccess", "continue_on_success"),
    ):
        if java_key in spec:
            spec[python_key] = boolean(f"{where}.{java_key}", spec.pop(java_key))
    return spec


def _positive_seconds(key: str, value: Any, per_second: float) -> float:
    seconds = number(key, value) / per_second
    if not math.isfinite(seconds) or seconds <= 0:
        raise ConfigError(f"{key}={value!r} is not valid; accepted values: a finite number > 0.")
    return seconds
