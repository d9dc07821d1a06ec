"""Configuration: the one place where ``enable()`` overrides, ``spark.openlineage.*`` confs and the
openlineage-python client's own configuration are merged, validated and turned into a client.

Precedence, highest first:

1. keyword overrides given to :func:`spark_lineage.enable`;
2. ``spark.openlineage.*`` Spark confs, with the keys openlineage-spark documents;
3. the client's own configuration (``OPENLINEAGE_CONFIG``, ``openlineage.yml``, ``OPENLINEAGE__*``,
   ``OPENLINEAGE_URL``), resolved by openlineage-python itself;
4. the console transport.

Keys this library adds, for things the Java agent does not have, live under ``spark.openlineage.python.``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openlineage.client import OpenLineageClient

CONF_PREFIX = "spark.openlineage."
DEFAULT_CAPTURED_PROPERTIES = ("spark.master", "spark.app.name")
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


class ConfigError(ValueError):
    """A configuration value that cannot work. The message names the key and what it accepts."""


class SparkConnectNotSupportedError(ConfigError):
    """``enable()`` was given a Spark Connect session, which has no JVM in this process to listen to."""


@dataclass(frozen=True)
class ParentJob:
    """A run that is a parent of ours (``parentJob*`` / ``rootParentJob*`` keys)."""

    namespace: str
    name: str
    run_id: str


@dataclass(frozen=True)
class ColumnLineageConfig:
    """Column lineage settings: openlineage-spark's ``columnLineage.*`` keys, and this library's budget."""

    dataset_lineage: bool = True
    """``columnLineage.datasetLineageEnabled``: joins, filters, grouping and sorting go into the facet's
    ``dataset`` list (true), or into every field's input fields (false)."""
    descriptions: bool = False
    """``columnLineage.descriptionsEnabled``: accepted; descriptions are not produced (they stay empty)."""
    schema_size_limit: int = 1000
    """``columnLineage.schemaSizeLimit``: outputs with more columns get no column lineage."""
    max_plan_chars: int = 2_000_000
    """``python.columnLineage.maxPlanChars``: a plan larger than this (as the py4j edge writes it) is read as
    its shape only; its datasets are reported without column lineage."""
    budget_millis: float = 1000.0
    """``python.columnLineage.budgetMillis``: analysis time a query's column lineage may take."""


@dataclass(frozen=True)
class LineageConfig:
    """Resolved, validated settings for one ``enable()``."""

    namespace: str = "default"
    app_name: str | None = None
    parent: ParentJob | None = None
    root_parent: ParentJob | None = None
    transport: dict[str, Any] | None = None
    """openlineage-python transport config from layers 1-2; ``None`` lets the client resolve layers 3-4."""
    disabled_facets: frozenset[str] = frozenset()
    captured_properties: tuple[str, ...] = DEFAULT_CAPTURED_PROPERTIES
    append_dataset_name: bool = True
    filter_read_only_actions: bool = True
    queue_size: int = 1000
    shutdown_timeout: float = 10.0
    disabled: bool = False
    enabled: bool = False
    """``spark.openlineage.enabled``: turns lineage on from configuration alone; see :func:`auto_activation`."""
    iceberg_metrics_reporter_disabled: bool = False
    spool_dir: str | None = None
    """``python.spool.dir`` (or ``$SPARK_LINEAGE_SPOOL_DIR``, else the user's state directory)."""
    spool_disabled: bool = False
    """``python.spool.disabled``: events are held in memory only, and lost with the process."""
    spool_max_bytes: int = 256 * 1024 * 1024
    """``python.spool.maxBytes``: when full, the oldest query-run events are dropped first."""
    column_lineage: ColumnLineageConfig | None = ColumnLineageConfig()
    """``None`` when the ``columnLineage`` facet is disabled: plans are then read without expressions."""
    unknown_keys: tuple[str, ...] = field(default=())

    def facet_enabled(self, name: str) -> bool:
        return name not in self.disabled_facets

    def create_client(self) -> OpenLineageClient:
        """An openlineage-python client for this configuration: our transport if layers 1-2 named one, else
        whatever the client resolves from its own configuration, else the console."""
        from openlineage.client import OpenLineageClient
        from openlineage.client.transport import get_default_factory

        if self.transport is None:
            return OpenLineageClient()
        try:
            transport = get_default_factory().create(dict(self.transport))
        except Exception as error:  # the factory raises several types; all mean the same to a user
            raise ConfigError(
                f"{CONF_PREFIX}transport.* does not make a working '{self.transport.get('type')}' transport: {error}"
            ) from error
        return OpenLineageClient(transport=transport)


def resolve(spark_conf: Mapping[str, str], overrides: Mapping[str, Any] | None = None) -> LineageConfig:
    """Merge overrides over Spark confs and validate the result.

    ``spark_conf`` holds the session's confs (any keys; only ``spark.openlineage.*`` are read). ``overrides``
    takes the same keys without the prefix, as nested dicts or dotted strings, in camelCase or snake_case:
    ``{"namespace": "prod", "transport": {"type": "file", "location": "/tmp/ol.json"}}``.
    """
    flat = {k[len(CONF_PREFIX) :]: v for k, v in spark_conf.items() if k.startswith(CONF_PREFIX)}
    flat.update(flatten_overrides(overrides or {}))
    return _parse(flat)


def resolve_options(options: Mapping[str, Any], names: Mapping[str, str], caller: str) -> LineageConfig:
    """Settings from keyword options of a Python API (``iceberg_facets.enable``), validated as strictly as Spark
    confs. ``names`` maps each accepted option to its ``spark.openlineage.*`` key; ``caller`` names the API in
    error messages, which name the option as the user spelled it."""
    unknown = sorted(set(options) - set(names))
    if unknown:
        raise ConfigError(f"{caller} got unknown option(s) {', '.join(unknown)}; accepted: {', '.join(sorted(names))}.")
    flat = flatten_overrides({names[key]: value for key, value in options.items()})
    try:
        return _parse(flat)
    except ConfigError as error:
        message = str(error)
        for option, key in names.items():
            message = message.replace(CONF_PREFIX + key, f"{caller} option {option}")
        raise ConfigError(message) from None


def is_disabled(spark_conf: Mapping[str, str], overrides: Mapping[str, Any] | None = None) -> bool:
    """``spark.openlineage.disabled=true`` or ``OPENLINEAGE_DISABLED=true`` turns ``enable()`` into a no-op."""
    if os.environ.get("OPENLINEAGE_DISABLED", "").strip().lower() == "true":
        return True
    flat = flatten_overrides(overrides or {})
    value = flat.get("disabled", spark_conf.get(CONF_PREFIX + "disabled"))
    return value is not None and _bool("disabled", value)


JAVA_AGENT_LISTENER = "io.openlineage.spark.agent.OpenLineageSparkListener"
JAVA_AGENT_REASON = (
    f"spark.extraListeners loads openlineage-spark ({JAVA_AGENT_LISTENER}), which already reports this "
    "application; spark_lineage stays off so no event is sent twice"
)


@dataclass(frozen=True)
class Activation:
    """Whether a SparkSession that did not call ``enable()`` gets lineage from its configuration, and why."""

    on: bool
    reason: str


def java_agent_configured(spark_conf: Mapping[str, str]) -> bool:
    """openlineage-spark's listener is loaded by ``spark.extraListeners``: it reports this application already."""
    listeners = spark_conf.get("spark.extraListeners", "")
    return JAVA_AGENT_LISTENER in (name.strip() for name in listeners.split(","))


def auto_activation(spark_conf: Mapping[str, str]) -> Activation:
    """The rule for turning lineage on from configuration alone (``spark-submit --conf ...``): on when
    ``spark.openlineage.enabled=true`` or any ``spark.openlineage.transport.*`` key is set; off when
    openlineage-spark's Java listener is configured too, so no event is sent twice, when lineage is disabled,
    or when ``spark.openlineage.enabled=false``."""
    if java_agent_configured(spark_conf):
        return Activation(False, JAVA_AGENT_REASON)
    try:
        if is_disabled(spark_conf):
            return Activation(False, f"lineage is disabled ({CONF_PREFIX}disabled=true or OPENLINEAGE_DISABLED=true)")
        enabled = spark_conf.get(CONF_PREFIX + "enabled")
        if enabled is not None:
            on = _bool("enabled", enabled)
            return Activation(on, f"{CONF_PREFIX}enabled={enabled}")
    except ConfigError as error:
        return Activation(False, str(error))
    transport_keys = sorted(key for key in spark_conf if key.startswith(CONF_PREFIX + "transport."))
    if transport_keys:
        return Activation(True, f"{transport_keys[0]} is set")
    return Activation(False, f"neither {CONF_PREFIX}enabled=true nor any {CONF_PREFIX}transport.* key is set")


def flatten_overrides(overrides: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"python": {"queue_size": 10}}`` -> ``{"python.queueSize": 10}``. Keys inside ``transport`` are kept
    as written: they go to openlineage-python, whose own settings are snake_case (``backoff_factor``)."""
    flat: dict[str, Any] = {}
    for key, value in overrides.items():
        inside_transport = prefix.startswith("transport.")
        dotted = str(key) if inside_transport else ".".join(_camel(part) for part in str(key).split("."))
        full = f"{prefix}{dotted}"
        if isinstance(value, Mapping):
            flat.update(flatten_overrides(value, full + "."))
        else:
            flat[full] = value
    return flat


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _parse(flat: dict[str, Any]) -> LineageConfig:
    known: set[str] = set()

    def take(key: str) -> Any:
        known.add(key)
        return flat.get(key)

    namespace = take("namespace") or os.environ.get("OPENLINEAGE_NAMESPACE") or "default"
    parent = _parent(flat, known, "parentJobNamespace", "parentJobName", "parentRunId", namespace)
    root_parent = _parent(flat, known, "rootParentJobNamespace", "rootParentJobName", "rootParentRunId", namespace)

    captured = take("capturedProperties")
    captured_properties = (
        tuple(p.strip() for p in _split_list(captured) if p.strip()) if captured else DEFAULT_CAPTURED_PROPERTIES
    )

    transport_keys = {k: v for k, v in flat.items() if k == "transport" or k.startswith("transport.")}
    known.update(transport_keys)
    transport = _transport(transport_keys) if transport_keys else None

    disabled_facets = set(_split_list(take("facets.disabled") or ""))
    for key, value in flat.items():
        match = re.fullmatch(r"facets\.(.+)\.disabled", key)
        if match:
            known.add(key)
            if _bool(key, value):
                disabled_facets.add(match.group(1))

    frozen_disabled = frozenset(f.strip() for f in disabled_facets if f.strip())
    column_lineage: ColumnLineageConfig | None = ColumnLineageConfig(
        dataset_lineage=_bool_key(flat, known, "columnLineage.datasetLineageEnabled", True),
        descriptions=_bool_key(flat, known, "columnLineage.descriptionsEnabled", False),
        schema_size_limit=_int_key(flat, known, "columnLineage.schemaSizeLimit", 1000, minimum=0),
        max_plan_chars=_int_key(flat, known, "python.columnLineage.maxPlanChars", 2_000_000, minimum=1),
        budget_millis=_float_key(flat, known, "python.columnLineage.budgetMillis", 1000.0),
    )
    if "columnLineage" in frozen_disabled:
        column_lineage = None
    config = LineageConfig(
        namespace=str(namespace),
        app_name=_opt_str(take("appName")),
        parent=parent,
        root_parent=root_parent,
        transport=transport,
        disabled_facets=frozen_disabled,
        captured_properties=captured_properties,
        append_dataset_name=_bool_key(flat, known, "jobName.appendDatasetName", True),
        filter_read_only_actions=_bool_key(flat, known, "python.filterReadOnlyActions", True),
        queue_size=_int_key(flat, known, "python.queueSize", 1000, minimum=1),
        shutdown_timeout=_float_key(flat, known, "python.shutdownTimeoutSeconds", 10.0),
        disabled=_bool_key(flat, known, "disabled", False),
        enabled=_bool_key(flat, known, "enabled", False),
        iceberg_metrics_reporter_disabled=_bool_key(flat, known, "vendors.iceberg.metricsReporterDisabled", False),
        column_lineage=column_lineage,
        spool_dir=_opt_str(take("python.spool.dir")),
        spool_disabled=_bool_key(flat, known, "python.spool.disabled", False),
        spool_max_bytes=_int_key(flat, known, "python.spool.maxBytes", 256 * 1024 * 1024, minimum=1),
        unknown_keys=tuple(sorted(k for k in flat if k not in known)),
    )
    return config


def _parent(
    flat: Mapping[str, Any], known: set[str], ns_key: str, name_key: str, run_key: str, default_ns: str
) -> ParentJob | None:
    known.update((ns_key, name_key, run_key))
    name, run_id = flat.get(name_key), flat.get(run_key)
    if not name and not run_id:
        return None
    if not (name and run_id):
        missing = name_key if not name else run_key
        raise ConfigError(
            f"{CONF_PREFIX}{missing} must be set together with {CONF_PREFIX}{name_key if name else run_key}: "
            "a parent run needs both a job name and a run id (a UUID)."
        )
    if not re.fullmatch(r"[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}", str(run_id)):
        raise ConfigError(
            f"{CONF_PREFIX}{run_key}={run_id!r} is not a UUID; accepted: a run id like "
            "'01890f3e-5c2b-7cc1-9f0e-3d0e2b6f1a2c'."
        )
    return ParentJob(namespace=str(flat.get(ns_key) or default_ns), name=str(name), run_id=str(run_id).lower())


def _transport(flat: Mapping[str, Any]) -> dict[str, Any]:
    """Turn ``transport.*`` keys (openlineage-spark's spelling) into an openlineage-python transport dict."""
    nested: dict[str, Any] = {}
    for key, value in flat.items():
        parts = key.split(".")[1:]
        if not parts:
            if isinstance(value, Mapping):
                nested.update(value)
                continue
            raise ConfigError(f"{CONF_PREFIX}transport must be a mapping of transport settings, got {value!r}.")
        cursor = nested
        for part in parts[:-1]:
            cursor = cursor.setdefault(part, {})
        cursor[parts[-1]] = value
    return _python_transport(nested, CONF_PREFIX + "transport")


def _python_transport(spec: dict[str, Any], where: str) -> dict[str, Any]:
    spec = dict(spec)
    kind = spec.get("type")
    if kind is None:
        if "url" not in spec:
            raise ConfigError(
                f"{where}.type is missing; accepted values: {', '.join(_transport_types())} "
                "(or a dotted Python class path of a custom transport)."
            )
        kind = "http"
    kind = str(kind).strip()
    if kind not in _transport_types() and "." not in kind:
        raise ConfigError(
            f"{where}.type={kind!r} is not a known transport; accepted values: {', '.join(_transport_types())} "
            "(or a dotted Python class path of a custom transport)."
        )
    spec["type"] = kind
    if kind in ("http", "async_http"):
        if not spec.get("url"):
            raise ConfigError(f"{where}.url is required for the {kind} transport, e.g. http://localhost:5000.")
        if "timeoutInMillis" in spec:
            spec["timeout"] = _float(f"{where}.timeoutInMillis", spec.pop("timeoutInMillis")) / 1000.0
        elif "timeout" in spec:
            spec["timeout"] = _float(f"{where}.timeout", spec["timeout"])
        if "headers" in spec:
            spec["custom_headers"] = dict(spec.pop("headers"))
        if "urlParams" in spec:
            params = spec.pop("urlParams")
            query = "&".join(f"{k}={v}" for k, v in dict(params).items())
            spec["url"] = spec["url"] + ("&" if "?" in spec["url"] else "?") + query
        auth = spec.get("auth")
        if isinstance(auth, Mapping):
            auth = dict(auth)
            if str(auth.get("type", "")).replace("-", "_").lower() in ("api_key", "apikey"):
                auth["type"] = "api_key"
                if not (auth.get("apiKey") or auth.get("api_key") or auth.get("apikey")):
                    raise ConfigError(f"{where}.auth.apiKey is required when {where}.auth.type=api_key.")
            spec["auth"] = auth
    elif kind == "file":
        location = spec.pop("location", None) or spec.get("log_file_path")
        if not location:
            raise ConfigError(f"{where}.location is required for the file transport: the file to append events to.")
        spec["log_file_path"] = str(location)
        spec["append"] = _bool(f"{where}.append", spec.get("append", True))
    elif kind == "kafka":
        if "topicName" in spec:
            spec["topic"] = spec.pop("topicName")
        if "properties" in spec:
            spec["config"] = dict(spec.pop("properties"))
        if not spec.get("topic"):
            raise ConfigError(f"{where}.topicName is required for the kafka transport.")
    elif kind == "composite":
        transports = spec.get("transports")
        if isinstance(transports, (list, tuple)) and transports:  # openlineage-python's own spelling
            spec["transports"] = [
                _python_transport(dict(sub), f"{where}.transports[{index}]") for index, sub in enumerate(transports)
            ]
        elif isinstance(transports, Mapping) and transports:
            spec["transports"] = {
                name: _python_transport(dict(sub), f"{where}.transports.{name}") for name, sub in transports.items()
            }
        else:
            raise ConfigError(f"{where}.transports.<name>.type is required for the composite transport.")
        for java_key, py_key in (
            ("continueOnFailure", "continue_on_failure"),
            ("continueOnSuccess", "continue_on_success"),
        ):
            if java_key in spec:
                spec[py_key] = _bool(f"{where}.{java_key}", spec.pop(java_key))
    return spec


def _transport_types() -> list[str]:
    from openlineage.client.transport import get_default_factory

    factory = get_default_factory()
    return sorted(getattr(factory, "transports", {}).keys())


def _split_list(value: Any) -> list[str]:
    if isinstance(value, (list, tuple, set, frozenset)):
        return [str(v) for v in value]
    return [part for part in re.split(r"[;,]", str(value).strip("[] ")) if part]


def _opt_str(value: Any) -> str | None:
    return None if value in (None, "") else str(value)


def _bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ConfigError(f"{CONF_PREFIX}{key}={value!r} is not a boolean; accepted values: true, false.")


def _float(key: str, value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key}={value!r} is not a number.") from None


def _bool_key(flat: Mapping[str, Any], known: set[str], key: str, default: bool) -> bool:
    known.add(key)
    return default if flat.get(key) is None else _bool(key, flat[key])


def _int_key(flat: Mapping[str, Any], known: set[str], key: str, default: int, minimum: int) -> int:
    known.add(key)
    if flat.get(key) is None:
        return default
    try:
        value = int(str(flat[key]))
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise ConfigError(f"{CONF_PREFIX}{key}={flat[key]!r} is not valid; accepted values: integers >= {minimum}.")
    return value


def _float_key(flat: Mapping[str, Any], known: set[str], key: str, default: float) -> float:
    known.add(key)
    if flat.get(key) is None:
        return default
    value = _float(CONF_PREFIX + key, flat[key])
    if value < 0:
        raise ConfigError(f"{CONF_PREFIX}{key}={flat[key]!r} is not valid; accepted values: numbers >= 0.")
    return value
