"""Where settings come from, each read into flat keys (``namespace``, ``transport.url``) that
:mod:`~spark_lineage.config.keys` turns into settings: Spark confs, and keyword overrides of a Python API."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spark_lineage.config.settings import CONF_PREFIX


def spark_confs(conf: Mapping[str, str]) -> dict[str, Any]:
    """The ``spark.openlineage.*`` confs of a session, without the prefix."""
    return {key[len(CONF_PREFIX) :]: value for key, value in conf.items() if key.startswith(CONF_PREFIX)}


def overrides(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Keyword overrides, nested or dotted, in camelCase or snake_case: ``{"python": {"queue_size": 10}}`` is
    ``{"python.queueSize": 10}``. Keys inside ``transport`` are kept as written: they go to
    openlineage-python, whose own settings are snake_case (``backoff_factor``); so are those inside
    ``facets``, which name facets as events name them (``{"facets": {"spark_unknown": {"disabled": False}}}``
    is ``facets.spark_unknown.disabled``)."""
    flat: dict[str, Any] = {}
    for key, value in values.items():
        name = str(key)
        if not prefix and name.startswith(CONF_PREFIX):  # the conf's own name, copied from spark-defaults.conf
            name = name[len(CONF_PREFIX) :]
        # Keys inside ``transport`` (nested, or dotted: ``transport.headers.X_Team``) and ``facets`` go on as
        # written.
        as_written = (prefix or name).startswith(_AS_WRITTEN)
        dotted = name if as_written else ".".join(_camel(part) for part in name.split("."))
        full = f"{prefix}{dotted}"
        if isinstance(value, Mapping):
            flat.update(overrides(value, full + "."))
        else:
            flat[full] = value
    return flat


_AS_WRITTEN = ("transport.", "facets.")


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)
