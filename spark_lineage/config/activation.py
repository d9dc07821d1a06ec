"""The rule that decides whether a session that never called ``enable()`` gets lineage from its
configuration alone (``spark-submit --conf ...``); :mod:`spark_lineage.activation` applies it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spark_lineage.conf_values import boolean
from spark_lineage.config.readers import overrides as read_overrides
from spark_lineage.config.settings import CONF_PREFIX
from spark_lineage.errors import ConfigError

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


DISABLED_ENV = "OPENLINEAGE_DISABLED"
"""openlineage-python's switch, which turns every OpenLineage client of the process off, this library too."""


def is_disabled(spark_conf: Mapping[str, str], overrides: Mapping[str, Any] | None = None) -> bool:
    """``spark.openlineage.disabled=true`` or ``OPENLINEAGE_DISABLED=true`` turns ``enable()`` into a no-op."""
    return disabled_by(spark_conf, overrides) is not None


def disabled_by(spark_conf: Mapping[str, str], overrides: Mapping[str, Any] | None = None) -> str | None:
    """What turns lineage off, as the user set it (``OPENLINEAGE_DISABLED=true in the environment``,
    ``spark.openlineage.disabled=true``), or ``None``."""
    switch = os.environ.get(DISABLED_ENV, "")
    if switch.strip().lower() == "true":
        return f"{DISABLED_ENV}={switch} in the environment"
    flat = read_overrides(overrides or {})
    value = flat.get("disabled", spark_conf.get(CONF_PREFIX + "disabled"))
    if value is not None and boolean(CONF_PREFIX + "disabled", value):
        return f"{CONF_PREFIX}disabled={value}"
    return None


def java_agent_configured(spark_conf: Mapping[str, str]) -> bool:
    """openlineage-spark's listener is loaded by ``spark.extraListeners``: it reports this application already."""
    listeners = spark_conf.get("spark.extraListeners", "")
    return JAVA_AGENT_LISTENER in (name.strip() for name in listeners.split(","))


def auto_activation(spark_conf: Mapping[str, str]) -> Activation:
    """On when ``spark.openlineage.enabled=true`` or any ``spark.openlineage.transport.*`` key is set; off when
    openlineage-spark's Java listener is configured too, so no event is sent twice, when lineage is disabled,
    or when ``spark.openlineage.enabled=false``."""
    if java_agent_configured(spark_conf):
        return Activation(False, JAVA_AGENT_REASON)
    try:
        switch = disabled_by(spark_conf)
        if switch is not None:
            return Activation(False, f"lineage is disabled: {switch}")
        enabled = spark_conf.get(CONF_PREFIX + "enabled")
        if enabled is not None:
            return Activation(boolean(CONF_PREFIX + "enabled", enabled), f"{CONF_PREFIX}enabled={enabled}")
    except ConfigError as error:
        return Activation(False, str(error))
    transport_keys = sorted(key for key in spark_conf if key.startswith(CONF_PREFIX + "transport."))
    if transport_keys:
        return Activation(True, f"{transport_keys[0]} is set")
    return Activation(False, f"neither {CONF_PREFIX}enabled=true nor any {CONF_PREFIX}transport.* key is set")
