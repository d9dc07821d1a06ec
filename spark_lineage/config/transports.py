"""openlineage-spark's flat ``spark.openlineage.transport.*`` keys as nested transport settings for
openlineage-python. What each kind of transport reads, and how, is its kind's
(:mod:`spark_lineage.transports`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spark_lineage.errors import ConfigError

MAP_SETTINGS = frozenset({"properties", "headers", "urlParams", "config"})
"""Settings whose keys are names of their own (``properties.bootstrap.servers``): the rest of the key after
them is one name, dots and all."""


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
    from spark_lineage import transports  # openlineage-python's transports: not on the start-up hook's path

    return transports.translate(nested, where)


def unknown_key_lines(flat: Mapping[str, Any], where: str) -> list[str]:
    """One line per flat transport key (``url``, ``auth.apiKey``) that the transport's kind does not read, with
    the known key it is closest to; ``where`` is the prefix of the keys (``spark.openlineage.transport``)."""
    from spark_lineage import transports

    kind = str(flat.get("type") or ("http" if "url" in flat else "?")).strip()
    return [
        f"{where}.{key} is not a key the {kind} transport reads: it is ignored"
        + (f"; did you mean {where}.{close}?" if close else "")
        for key, close in transports.unknown_keys(flat)
    ]


def _split(key: str) -> list[str]:
    parts = key.split(".")
    for index, part in enumerate(parts[:-1]):
        if part in MAP_SETTINGS:
            return [*parts[: index + 1], ".".join(parts[index + 1 :])]
        if part == "transports" and index + 2 < len(parts):  # composite: transports.<name>.<setting>
            return [*parts[: index + 2], *_split(".".join(parts[index + 2 :]))]
    return parts
