"""Every ``spark.openlineage.*`` key this library reads, what it accepts, and the setting it makes: the one
table that turns flat keys (from any reader) into :class:`~spark_lineage.config.settings.LineageConfig`."""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from spark_lineage.config import transports
from spark_lineage.config.settings import (
    DEFAULT_CAPTURED_PROPERTIES,
    ColumnLineageConfig,
    ConfigError,
    LineageConfig,
    ParentJob,
)
from spark_lineage.config.values import boolean, finite, integer, optional_text, text_list

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


SETTINGS: tuple[Key, ...] = (
    Key("appName", "app_name", _text, None),
    Key("jobName.appendDatasetName", "append_dataset_name", boolean, True),
    Key("disabled", "disabled", boolean, False),
    Key("enabled", "enabled", boolean, False),
    Key("filter.rddEventsDisabled", "rdd_events_disabled", boolean, False),
    Key("vendors.iceberg.metricsReporterDisabled", "iceberg_metrics_reporter_disabled", boolean, False),
    Key("python.filterReadOnlyActions", "filter_read_only_actions", boolean, True),
    Key("python.queueSize", "queue_size", _at_least(1), 1000),
    Key("python.shutdownTimeoutSeconds", "shutdown_timeout", _min(0), 10.0),
    Key("python.spool.dir", "spool_dir", _text, None),
    Key("python.spool.disabled", "spool_disabled", boolean, False),
    Key("python.spool.maxBytes", "spool_max_bytes", _at_least(1), 256 * 1024 * 1024),
)
COLUMN_LINEAGE: tuple[Key, ...] = (
    Key("columnLineage.datasetLineageEnabled", "dataset_lineage", boolean, True),
    Key("columnLineage.descriptionsEnabled", "descriptions", boolean, False),
    Key("columnLineage.schemaSizeLimit", "schema_size_limit", _at_least(0), 1000),
    Key("python.columnLineage.maxPlanChars", "max_plan_chars", _at_least(1), 2_000_000),
    Key("python.columnLineage.budgetMillis", "budget_millis", _min(0), 1000.0),
)
OTHER_KEYS = (
    "namespace",
    "capturedProperties",
    "facets.disabled",
    "parentJobNamespace",
    "parentJobName",
    "parentRunId",
    "rootParentJobNamespace",
    "rootParentJobName",
    "rootParentRunId",
)
KNOWN = tuple(key.name for key in (*SETTINGS, *COLUMN_LINEAGE)) + OTHER_KEYS
NOT_YET = re.compile(
    r"^(job\.(owners|tags)|run\.tags|dataset\.|jobName\.replaceDotWithUnderscore|applicationRunId|filter\.|"
    r"facets\.variables|debugFacet|timeout\.|circuitBreaker\.|vendors\.|redact\.|overriddenAppName)"
)
"""openlineage-spark keys this library accepts but does not act on yet: not reported as unknown."""
_FACET_DISABLED = re.compile(r"facets\.(.+)\.disabled")


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

    namespace = str(take("namespace") or os.environ.get("OPENLINEAGE_NAMESPACE") or "default")
    captured = take("capturedProperties")
    disabled_facets = set(text_list(take("facets.disabled") or ""))
    for key, value in flat.items():
        match = _FACET_DISABLED.fullmatch(key)
        if match and key != "facets.disabled":
            known.add(key)
            if boolean(name_of(key), value):
                disabled_facets.add(match.group(1))
    transport_keys = {k: v for k, v in flat.items() if k == "transport" or k.startswith("transport.")}
    known.update(transport_keys)
    transport = None
    if transport_keys:
        nested = {k[len("transport.") :] if k != "transport" else "": v for k, v in transport_keys.items()}
        transport = transports.from_flat(nested, name_of("transport"))
    return LineageConfig(
        namespace=namespace,
        parent=_parent(flat, known, name_of, "parent", namespace),
        root_parent=_parent(flat, known, name_of, "rootParent", namespace),
        transport=transport,
        disabled_facets=frozenset(disabled_facets),
        captured_properties=tuple(text_list(captured)) if captured else DEFAULT_CAPTURED_PROPERTIES,
        column_lineage=None if "columnLineage" in disabled_facets else ColumnLineageConfig(**column_settings),
        unknown_keys=tuple(sorted(k for k in flat if k not in known and not NOT_YET.match(k))),
        **values,
    )


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
    if not re.fullmatch(r"[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}", str(run_id)):
        raise ConfigError(
            f"{name_of(run_key)}={run_id!r} is not a UUID; accepted: a run id like "
            "'01890f3e-5c2b-7cc1-9f0e-3d0e2b6f1a2c'."
        )
    return ParentJob(namespace=str(flat.get(ns_key) or default_ns), name=str(name), run_id=str(run_id).lower())
