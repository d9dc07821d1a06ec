"""openlineage-spark's ``dataset.*`` keys: ``removePath.pattern``, ``namespaceResolvers.<name>.*``,
``disabledTrimmers`` and ``extraTrimmers``, read into :class:`~spark_lineage.config.settings.DatasetNamingConfig`.
What they do to dataset identities is :mod:`spark_lineage.naming`'s business."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from spark_lineage.conf_values import java_regex, python_class, text_list
from spark_lineage.config.settings import DatasetNamingConfig, NamespaceResolver
from spark_lineage.errors import ConfigError

PREFIX = "dataset."
REMOVE_PATH = "dataset.removePath.pattern"
DISABLED_TRIMMERS = "dataset.disabledTrimmers"
EXTRA_TRIMMERS = "dataset.extraTrimmers"
RESOLVERS = "dataset.namespaceResolvers."
RESOLVER_TYPES = ("hostList", "pattern", "patternGroup")
_RESOLVER_SETTINGS = ("type", "hosts", "regex", "matchingGroup", "schema")

JAVA_TRIMMER_PACKAGE = "io.openlineage.client.dataset.partition.trimmer."
PYTHON_TRIMMER_MODULE = "openlineage.client.dataset.trimmers."
BUILT_IN_TRIMMERS = ("DateTrimmer", "KeyValueTrimmer", "MultiDirDateTrimmer", "YearMonthTrimmer")
"""The trimmers both clients have, under the same class names: the Java spelling of one names the Python one."""


def parse(flat: Mapping[str, Any], name_of: Callable[[str], str]) -> tuple[DatasetNamingConfig, set[str]]:
    """The ``dataset.*`` settings in ``flat``, and which keys were read."""
    read = {key for key in flat if key.startswith(PREFIX) and _is_dataset_key(key)}
    pattern = flat.get(REMOVE_PATH)
    config = DatasetNamingConfig(
        remove_path_pattern=java_regex(name_of(REMOVE_PATH), pattern, groups=("remove",)) if pattern else None,
        namespace_resolvers=_resolvers(flat, name_of),
        disabled_trimmers=_trimmers(flat.get(DISABLED_TRIMMERS), name_of(DISABLED_TRIMMERS), built_in_only=True),
        extra_trimmers=_trimmers(flat.get(EXTRA_TRIMMERS), name_of(EXTRA_TRIMMERS), built_in_only=False),
    )
    return config, read


def _is_dataset_key(key: str) -> bool:
    if key in (REMOVE_PATH, DISABLED_TRIMMERS, EXTRA_TRIMMERS):
        return True
    name, _, setting = key[len(RESOLVERS) :].rpartition(".")
    return key.startswith(RESOLVERS) and bool(name) and setting in _RESOLVER_SETTINGS


def _resolvers(flat: Mapping[str, Any], name_of: Callable[[str], str]) -> tuple[NamespaceResolver, ...]:
    groups: dict[str, dict[str, Any]] = {}
    for key, value in flat.items():
        if key.startswith(RESOLVERS) and _is_dataset_key(key):
            name, _, setting = key[len(RESOLVERS) :].rpartition(".")
            groups.setdefault(name, {})[setting] = value
    return tuple(_resolver(name, settings, name_of) for name, settings in groups.items())


def _resolver(name: str, settings: dict[str, Any], name_of: Callable[[str], str]) -> NamespaceResolver:
    def key(setting: str) -> str:
        return name_of(f"{RESOLVERS}{name}.{setting}")

    kind = str(settings.get("type") or "")
    if kind not in RESOLVER_TYPES:
        raise ConfigError(f"{key('type')}={kind!r} is not a namespace resolver; accepted: {', '.join(RESOLVER_TYPES)}.")
    schema = str(settings["schema"]) if settings.get("schema") else None
    if kind == "hostList":
        hosts = tuple(text_list(settings.get("hosts") or ""))
        if not hosts:
            raise ConfigError(f"{key('hosts')} is required for a hostList resolver, e.g. [db1.example.com;db2].")
        return NamespaceResolver(name=name, type=kind, hosts=hosts, schema=schema)
    if not settings.get("regex"):
        raise ConfigError(f"{key('regex')} is required for a {kind} resolver: a regular expression.")
    group = str(settings.get("matchingGroup") or "") or None
    if kind == "patternGroup" and group is None:
        raise ConfigError(f"{key('matchingGroup')} is required for a patternGroup resolver: a named group of regex.")
    regex = java_regex(key("regex"), settings["regex"], groups=(group,) if kind == "patternGroup" and group else ())
    return NamespaceResolver(name=name, type=kind, regex=regex, matching_group=group, schema=schema)


def _trimmers(value: Any, key: str, *, built_in_only: bool) -> tuple[str, ...]:
    """Trimmer classes as openlineage-python dotted paths. The Java name of a built-in trimmer names its Python
    twin; another Java class cannot run here, and is an error rather than a trimmer silently not applied."""
    if not value:
        return ()
    paths = []
    for name in text_list(value):
        simple = name.rsplit(".", 1)[-1]
        if name in (JAVA_TRIMMER_PACKAGE + simple, PYTHON_TRIMMER_MODULE + simple) and simple in BUILT_IN_TRIMMERS:
            paths.append(PYTHON_TRIMMER_MODULE + simple)
        elif built_in_only:
            raise ConfigError(f"{key}: {name!r} is not a built-in trimmer; accepted: {_accepted_trimmers()}.")
        else:
            _check_trimmer_class(key, name)
            paths.append(name)
    return tuple(paths)


def _check_trimmer_class(key: str, path: str) -> None:
    from openlineage.client.dataset.trimmers import DatasetNameTrimmer

    python_class(key, path, DatasetNameTrimmer)


def _accepted_trimmers() -> str:
    return (
        ", ".join(JAVA_TRIMMER_PACKAGE + name for name in BUILT_IN_TRIMMERS)
        + " (or their "
        + PYTHON_TRIMMER_MODULE
        + "* twins)"
    )
