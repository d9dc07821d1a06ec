"""Every ``spark.openlineage.*`` key this library reads, what it accepts, and the setting it makes: the one
table that turns flat keys (from any reader) into :class:`~spark_lineage.config.settings.LineageConfig`."""

from __future__ import annotations

import difflib
import os
import re
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from spark_lineage.conf_values import boolean, finite, integer, optional_text, text_list
from spark_lineage.config import datasets, transports
from spark_lineage.config.settings import (
    DEFAULT_CAPTURED_PROPERTIES,
    DISABLED_BY_DEFAULT,
    ColumnLineageConfig,
    JobOwner,
    LineageConfig,
    ParentJob,
)
from spark_lineage.config.tags import parse_tags
from spark_lineage.errors import ConfigError

NameOf = Callable[[str], str]
"""How the user spelled a key (``spark.openlineage.x`` for a Spark conf, an option name for a Python API)."""


@dataclass(frozen=True)
class Key:
    """One key: the setting it fills, how its value is read, and its default."""

    name: str
    setting: str
    read: Callable[[str, Any], Any]
    default: Any


def _min(minimum: float) -> Callable[[str, Any], float]:
    return lambda key, value: finite(key, value, minimum=minimum)


def _at_least(minimum: int) -> Callable[[str, Any], int]:
    return lambda key, value: integer(key, value, minimum=minimum)


def _text(key: str, value: Any) -> str | None:
    return optional_text(value)


def _run_id(key: str, value: Any) -> str | None:
    return _uuid(key, value) if optional_text(value) else None


def _uri(key: str, value: Any) -> str | None:
    """An absolute URI (scheme and more), as OpenLineage's schema requires of a ``producer``; unset: ``None``."""
    uri = (optional_text(value) or "").strip()
    if not uri:
        return None
    parsed = urllib.parse.urlsplit(uri)
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", parsed.scheme) or not (parsed.netloc or parsed.path):
        raise ConfigError(f"{key}={value!r} is not valid; accepted values: an absolute URI (https://...).")
    return uri


def _simple_class_names(key: str, value: Any) -> frozenset[str]:
    """Plan node classes, as openlineage-spark names them (fully qualified), or by their simple names: the
    capture sees a node's simple name."""
    return frozenset(name.rsplit(".", 1)[-1] for name in text_list(value))


SETTINGS: tuple[Key, ...] = (
    Key("applicationRunId", "application_run_id", _run_id, None),
    Key("jobName.appendDatasetName", "append_dataset_name", boolean, True),
    Key("jobName.replaceDotWithUnderscore", "replace_dot_with_underscore", boolean, False),
    Key("job.tags", "job_tags", lambda key, value: parse_tags(value), ()),
    Key("run.tags", "run_tags", lambda key, value: parse_tags(value), ()),
    Key("facets.custom_environment_variables", "environment_variables", lambda key, value: tuple(text_list(value)), ()),
    Key("filter.allowedSparkNodes", "allowed_spark_nodes", _simple_class_names, frozenset()),
    Key("filter.deniedSparkNodes", "denied_spark_nodes", _simple_class_names, frozenset()),
    Key("disabled", "disabled", boolean, False),
    Key("enabled", "enabled", boolean, False),
    Key("filter.rddEventsDisabled", "rdd_events_disabled", boolean, False),
    Key("vendors.iceberg.metricsReporterDisabled", "iceberg_metrics_reporter_disabled", boolean, False),
    Key("python.filterReadOnlyActions", "filter_read_only_actions", boolean, True),
    Key("python.queueSize", "queue_size", _at_least(1), 1000),
    Key("python.allSessions", "all_sessions", boolean, True),
    Key("python.shutdownTimeoutSeconds", "shutdown_timeout", _min(0), 10.0),
    Key("python.spool.dir", "spool_dir", _text, None),
    Key("python.spool.disabled", "spool_disabled", boolean, False),
    Key("python.spool.maxBytes", "spool_max_bytes", _at_least(1), 256 * 1024 * 1024),
    Key("python.delivery.concurrency", "delivery_concurrency", _at_least(1), 4),
    Key("python.producer", "producer", _uri, None),
    Key("python.console.everyEvent", "console_every_event", boolean, False),
    Key("python.connect.resolveSchemas", "connect_resolve_schemas", boolean, False),
    Key("python.connect.startDelayMillis", "connect_start_delay_millis", _min(0), 1000.0),
    Key("python.connect.sendDelayMillis", "connect_send_delay_millis", _min(0), 1000.0),
    Key("python.connect.spoolDelayMillis", "connect_spool_delay_millis", _min(0), 1000.0),
)
COLUMN_LINEAGE: tuple[Key, ...] = (
    Key("columnLineage.datasetLineageEnabled", "dataset_lineage", boolean, True),
    Key("columnLineage.descriptionsEnabled", "descriptions", boolean, False),
    Key("columnLineage.schemaSizeLimit", "schema_size_limit", _at_least(0), 1000),
    Key("python.columnLineage.maxPlanChars", "max_plan_chars", _at_least(1), 2_000_000),
    Key("python.columnLineage.budgetMillis", "budget_millis", _min(0), 1000.0),
)
PARENT_KEYS = tuple(f"{run}{part}" for run in ("parent", "rootParent") for part in ("JobNamespace", "JobName", "RunId"))
"""The keys naming a parent run and a root parent run."""
OTHER_KEYS = ("appName", "overriddenAppName", "namespace", "capturedProperties", "facets.disabled", *PARENT_KEYS)
KNOWN = (
    tuple(key.name for key in (*SETTINGS, *COLUMN_LINEAGE))
    + OTHER_KEYS
    + (datasets.REMOVE_PATH, datasets.DISABLED_TRIMMERS, datasets.EXTRA_TRIMMERS)
)
_FACET_DISABLED = re.compile(r"facets\.(.+)\.disabled")
_JOB_OWNER = re.compile(r"job\.owners\.(.+)")


@dataclass(frozen=True)
class NotApplicable:
    """openlineage-spark keys (one, or a group: ``circuitBreaker.``) that cannot mean anything to a Python
    listener, and why: set, they are reported once at WARNING and by ``spark-lineage doctor``."""

    key: str
    reason: str

    def matches(self, key: str) -> bool:
        return key == self.key or (self.key.endswith(".") and key.startswith(self.key))


NOT_APPLICABLE: tuple[NotApplicable, ...] = (
    NotApplicable(
        "circuitBreaker.",
        "it guards the JVM the Java agent runs in (heap, GC time, its task queue); here the analysis runs on a "
        "bounded Python worker (python.queueSize), column lineage within python.columnLineage.budgetMillis",
    ),
    NotApplicable(
        "timeout.",
        "its percentages are shares of a circuitBreaker timeout, which does not apply here; "
        "python.columnLineage.budgetMillis bounds the analysis instead",
    ),
    NotApplicable(
        "debugFacet",
        "openlineage-spark 1.53 no longer reads it: its debug run facet is off by default and turned on with "
        "facets.debug.disabled=false (configured under debug.*), which does not apply here either",
    ),
    NotApplicable(
        "facets.debug.disabled",
        "the debug run facet describes the Java agent itself (its version and parsed configuration, its "
        "Micrometer metrics, which of its optional integrations' classes the JVM has, the JVM's memory) and has "
        "no published schema; it is not emitted here. The plan is in the spark.logicalPlan facet "
        "(facets.spark.logicalPlan.disabled=false), and spark-lineage doctor shows this library's state",
    ),
    NotApplicable(
        "debug.",
        "it configures the debug run facet (smart mode, payload size, metrics), which describes the Java agent "
        "itself and has no published schema; it is not emitted here (see facets.debug.disabled)",
    ),
    NotApplicable(
        "facets.variables",
        "openlineage-spark documents it but reads nothing under it; the environment variables it describes are "
        "spark.openlineage.facets.custom_environment_variables",
    ),
    NotApplicable("metrics.", "it configures the Java client's Micrometer metrics registry"),
    NotApplicable(
        "transport.sslContext.keyStorePath",
        "a Java KeyStore; openlineage-python takes PEM files: transport.sslContext.caCertPath, "
        "clientCertPath, clientKeyPath",
    ),
)
JAVA_KEYSTORE_SETTINGS = ("keyStoreType", "storePassword", "keyPassword")
"""The other ``transport.sslContext`` settings of a Java KeyStore, reported with ``keyStorePath``."""


def not_applicable(key: str) -> NotApplicable | None:
    """Why an openlineage-spark key does not apply here, or ``None`` when it does (or is no such key)."""
    if key.startswith("transport.") and key.rsplit(".", 1)[-1] in JAVA_KEYSTORE_SETTINGS and ".sslContext." in key:
        return NOT_APPLICABLE[-1]
    return next((entry for entry in NOT_APPLICABLE if entry.matches(key)), None)


def parse(flat: Mapping[str, Any], name_of: NameOf) -> LineageConfig:
    """Settings from flat keys (``namespace``, ``transport.url``, ...); every error names the key with
    ``name_of``."""
    known: set[str] = set()

    def take(key: str) -> Any:
        known.add(key)
        return flat.get(key)

    values: dict[str, Any] = {}
    for setting in SETTINGS:
        value = take(setting.name)
        values[setting.setting] = setting.default if value is None else setting.read(name_of(setting.name), value)
    column_settings = {}
    for setting in COLUMN_LINEAGE:
        value = take(setting.name)
        column_settings[setting.setting] = (
            setting.default if value is None else setting.read(name_of(setting.name), value)
        )

    # openlineage-spark reads ``appName`` into its ``overriddenAppName`` setting, which is a key of its own too
    # (its YAML and Spark-conf spelling); appName wins when both are set.
    app_name = optional_text(take("appName")) or optional_text(take("overriddenAppName"))
    owners = []
    for key, value in flat.items():
        owner = _JOB_OWNER.fullmatch(key)
        if owner and optional_text(value):
            known.add(key)
            owners.append(JobOwner(type=owner.group(1), name=str(value)))
    dataset_naming, dataset_keys = datasets.parse(flat, name_of)
    known.update(dataset_keys)
    namespace = str(take("namespace") or os.environ.get("OPENLINEAGE_NAMESPACE") or "default")
    captured = take("capturedProperties")
    # As openlineage-spark merges them: its defaults, then each facets.<name>.disabled, true or false.
    disabled_facets = set(DISABLED_BY_DEFAULT) | set(text_list(take("facets.disabled") or ""))
    for key, value in flat.items():
        match = _FACET_DISABLED.fullmatch(key)
        if match and key != "facets.disabled" and not not_applicable(key):
            known.add(key)
            if boolean(name_of(key), value):
                disabled_facets.add(match.group(1))
            else:
                disabled_facets.discard(match.group(1))
    transport_keys = {
        k: v for k, v in flat.items() if (k == "transport" or k.startswith("transport.")) and not not_applicable(k)
    }
    known.update(transport_keys)
    transport = None
    unknown_transport: list[str] = []
    if transport_keys:
        nested = {k[len("transport.") :] if k != "transport" else "": v for k, v in transport_keys.items()}
        unknown_transport = transports.unknown_key_lines(nested, name_of("transport"))
        try:
            transport = transports.from_flat(nested, name_of("transport"))
        except ConfigError as error:  # a misspelt key is often why a required one is missing: both are said
            if not unknown_transport:
                raise
            raise ConfigError(f"{error} Also: {'; '.join(unknown_transport)}") from None
    return LineageConfig(
        namespace=namespace,
        app_name=app_name,
        job_owners=tuple(owners),
        dataset_naming=dataset_naming,
        parent=_parent(flat, known, name_of, "parent", namespace),
        root_parent=_parent(flat, known, name_of, "rootParent", namespace),
        transport=transport,
        disabled_facets=frozenset(disabled_facets),
        captured_properties=tuple(text_list(captured)) if captured else DEFAULT_CAPTURED_PROPERTIES,
        column_lineage=None if "columnLineage" in disabled_facets else ColumnLineageConfig(**column_settings),
        unknown_keys=tuple(sorted(k for k in flat if k not in known and not not_applicable(k))),
        not_applicable_keys=tuple(sorted(k for k in flat if k not in known and not_applicable(k))),
        unknown_transport_keys=tuple(unknown_transport),
        **values,
    )


def not_applicable_warnings(keys: tuple[str, ...], name_of: NameOf) -> list[str]:
    """One line per openlineage-spark key that was set but does not apply here, with why."""
    lines = []
    for key in keys:
        entry = not_applicable(key)
        if entry is not None:
            lines.append(
                f"{name_of(key)} is an openlineage-spark key that does not apply here, so it is ignored: {entry.reason}"
            )
    return lines


def suggestions(unknown: tuple[str, ...], name_of: NameOf) -> list[str]:
    """One line per unknown key, with the known key it is closest to, if any."""
    lines = []
    first_parts = sorted({known.split(".")[0] for known in KNOWN} | {"transport"})
    for key in unknown:
        close = difflib.get_close_matches(key, KNOWN, n=1, cutoff=0.6)
        if not close and "." in key:  # a misspelt group (``trasnport.url``): the group, corrected
            head, rest = key.split(".", 1)
            group = difflib.get_close_matches(head, first_parts, n=1, cutoff=0.7)
            close = [f"{group[0]}.{rest}"] if group else []
        hint = f"; did you mean {name_of(close[0])}?" if close else ""
        lines.append(f"{name_of(key)} is not a key spark_lineage knows: it is ignored{hint}")
    return lines


def _parent(
    flat: Mapping[str, Any], known: set[str], name_of: NameOf, prefix: str, default_ns: str
) -> ParentJob | None:
    ns_key, name_key, run_key = f"{prefix}JobNamespace", f"{prefix}JobName", f"{prefix}RunId"
    known.update((ns_key, name_key, run_key))
    name, run_id = flat.get(name_key), flat.get(run_key)
    if not name and not run_id:
        return None
    if not (name and run_id):
        missing, present = (name_key, run_key) if not name else (run_key, name_key)
        raise ConfigError(
            f"{name_of(missing)} must be set together with {name_of(present)}: "
            "a parent run needs both a job name and a run id (a UUID)."
        )
    return ParentJob(
        namespace=str(flat.get(ns_key) or default_ns), name=str(name), run_id=_uuid(name_of(run_key), run_id)
    )


def _uuid(key: str, value: Any) -> str:
    if not re.fullmatch(r"[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}", str(value).strip()):
        raise ConfigError(
            f"{key}={value!r} is not a UUID; accepted: a run id like '01890f3e-5c2b-7cc1-9f0e-3d0e2b6f1a2c'."
        )
    return str(value).strip().lower()
