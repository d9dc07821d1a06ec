"""Configuration: the one place where ``enable()`` overrides, ``spark.openlineage.*`` Spark confs and the
openlineage-python client's own configuration become settings.

Precedence, highest first:

1. keyword overrides given to :func:`spark_lineage.enable`;
2. ``spark.openlineage.*`` Spark confs, with the keys openlineage-spark documents;
3. the client's own configuration (``OPENLINEAGE_CONFIG``, ``openlineage.yml``, ``OPENLINEAGE__*``,
   ``OPENLINEAGE_URL``), which openlineage-python merges in beneath 1-2;
4. the console transport.

- :mod:`~spark_lineage.config.settings`: the typed settings;
- :mod:`~spark_lineage.config.readers`: Spark confs and keyword overrides, read into flat keys;
- :mod:`~spark_lineage.config.keys`: the table of keys, their values and defaults;
- :mod:`~spark_lineage.config.transports`: flat transport keys nested for openlineage-python (each kind
  translates its own: :mod:`spark_lineage.transports`);
- :mod:`~spark_lineage.config.datasets`: the ``dataset.*`` keys (path removal, namespace resolvers, trimmers);
- :mod:`~spark_lineage.config.tags`: ``job.tags`` and ``run.tags``;
- :mod:`~spark_lineage.config.activation`: when configuration alone turns lineage on.

Keys this library adds, for things the Java agent does not have, live under ``spark.openlineage.python.``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from spark_lineage.config import keys, readers
from spark_lineage.config.activation import (
    JAVA_AGENT_LISTENER,
    JAVA_AGENT_REASON,
    Activation,
    auto_activation,
    disabled_by,
    is_disabled,
    java_agent_configured,
)
from spark_lineage.config.settings import (
    CONF_PREFIX,
    DEFAULT_CAPTURED_PROPERTIES,
    ColumnLineageConfig,
    DatasetNamingConfig,
    JobOwner,
    LineageConfig,
    NamespaceResolver,
    ParentJob,
    Tag,
)
from spark_lineage.errors import ConfigError

__all__ = [
    "CONF_PREFIX",
    "DEFAULT_CAPTURED_PROPERTIES",
    "JAVA_AGENT_LISTENER",
    "JAVA_AGENT_REASON",
    "Activation",
    "ColumnLineageConfig",
    "ConfigError",
    "DatasetNamingConfig",
    "JobOwner",
    "LineageConfig",
    "NamespaceResolver",
    "ParentJob",
    "Tag",
    "auto_activation",
    "disabled_by",
    "is_disabled",
    "java_agent_configured",
    "not_applicable_warnings",
    "resolve",
    "resolve_options",
    "unknown_key_warnings",
]


def _spark_name(key: str) -> str:
    return CONF_PREFIX + key


def resolve(spark_conf: Mapping[str, str], overrides: Mapping[str, Any] | None = None) -> LineageConfig:
    """Merge overrides over Spark confs and validate the result.

    ``spark_conf`` holds the session's confs (any keys: ``spark.openlineage.*``, and ``spark.redaction.regex``
    for what counts as secret). ``overrides`` takes the same keys without the prefix, as nested dicts or
    dotted strings, in camelCase or snake_case: ``{"namespace": "prod", "transport": {"type": "file",
    "location": "/tmp/ol.json"}}``.
    """
    flat = readers.spark_confs(spark_conf)
    flat.update(readers.overrides(overrides or {}))
    config = keys.parse(flat, _spark_name)
    pattern = spark_conf.get("spark.redaction.regex")
    return config if pattern is None else _with(config, redaction_pattern=pattern)


def resolve_options(options: Mapping[str, Any], names: Mapping[str, str], caller: str) -> LineageConfig:
    """Settings from keyword options of a Python API (``iceberg_facets.enable``), validated as strictly as Spark
    confs. ``names`` maps each accepted option to its ``spark.openlineage.*`` key (without the prefix);
    ``caller`` names the API in error messages, which name the option as the user spelled it."""
    unknown = sorted(set(options) - set(names))
    if unknown:
        raise ConfigError(f"{caller} got unknown option(s) {', '.join(unknown)}; accepted: {', '.join(sorted(names))}.")
    option_of = {key: option for option, key in names.items()}

    def name_of(key: str) -> str:
        option = option_of.get(key)
        if option is None and key.startswith("transport"):
            option = option_of.get("transport")
            return f"{caller} option {option}{key[len('transport') :]}" if option else _spark_name(key)
        return f"{caller} option {option}" if option else _spark_name(key)

    return keys.parse(readers.overrides({names[key]: value for key, value in options.items()}), name_of)


def unknown_key_warnings(config: LineageConfig) -> list[str]:
    """What to warn about the ``spark.openlineage.*`` keys no setting reads, and the ``transport.*`` keys the
    configured transport does not read, with what may have been meant."""
    return [*keys.suggestions(config.unknown_keys, _spark_name), *config.unknown_transport_keys]


def not_applicable_warnings(config: LineageConfig) -> list[str]:
    """What to warn about the openlineage-spark keys that were set but cannot apply here, with why."""
    return keys.not_applicable_warnings(config.not_applicable_keys, _spark_name)


def _with(config: LineageConfig, **changes: Any) -> LineageConfig:
    return replace(config, **changes)
