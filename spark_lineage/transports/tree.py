"""The walks over transports and their settings, written once: every transport inside a composite or transform
transport (made already, or as settings) is visited here, each by its own kind
(:class:`~spark_lineage.transports.base.TransportKind`)."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from spark_lineage.errors import ConfigError
from spark_lineage.transports.base import ConfKeys, Destination
from spark_lineage.transports.registry import kind_named, kind_of, kind_of_settings

if TYPE_CHECKING:
    from openlineage.client.transport.transport import Transport

    from spark_lineage.findings import Finding
    from spark_lineage.redaction import Redactor

Settings = Mapping[str, Any]


def walk(transport: Transport) -> Iterator[Transport]:
    """The transport and every transport inside it, depth first."""
    stack = [transport]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(kind_of(current).children(current)))


def describe(transport: Transport) -> Destination:
    """Where ``transport`` sends, and how to make it again without a secret."""
    kind = kind_of(transport)
    return kind.describe(transport, [describe(child) for child in kind.children(transport)])


def learn_secrets(redactor: Redactor, transport: Transport) -> None:
    """Teach ``redactor`` the secrets a transport holds, and those inside it, however it was made (a client
    passed in, too)."""
    for each in walk(transport):
        kind_of(each).learn_secrets(redactor, each)


def leave_retries_to_the_spool(transport: Transport) -> None:
    """Turn off the own retries of a transport and of those inside it: the spool retries, once per backend."""
    for each in walk(transport):
        kind_of(each).leave_retries_to_the_spool(each)


def target(transport: Transport) -> str | None:
    """Where ``transport`` sends, for ``doctor``'s summary line, without a secret."""
    return kind_of(transport).target(transport)


def warnings(transport: Transport) -> list[str]:
    """What is wrong with the settings of ``transport`` and of those inside it, told without contacting
    anything (:meth:`~spark_lineage.transports.base.TransportKind.warnings`)."""
    return [warning for each in walk(transport) for warning in kind_of(each).warnings(each)]


def check(transport: Transport, keys: ConfKeys, probe: Any) -> list[Finding]:
    """``doctor``'s checks of the backends ``transport`` reaches (every transport inside it, each named by the
    keys it was set with). Nothing is written to a backend unless ``probe`` is given: the one event the
    checks may send (``doctor --send-test-event``)."""
    kind = kind_of(transport)
    inside = kind.children(transport)
    if not inside:
        return kind.check(transport, keys, probe)
    return [
        finding
        for index, child in enumerate(inside)
        for finding in check(child, kind.child_keys(keys, child, index), probe)
    ]


def translate(spec: Settings, where: str) -> dict[str, Any]:
    """A transport's settings (and those inside it), in openlineage-spark's spelling or openlineage-python's, for
    openlineage-python: translated by its kind, then held to the kind's typed settings class.
    :class:`~spark_lineage.errors.ConfigError` names the key to fix (``where`` is the prefix)."""
    spec = dict(spec)
    kind_name = spec.get("type")
    if kind_name is None:
        if "url" not in spec:
            raise ConfigError(
                f"{where}.type is missing; accepted values: {', '.join(known_types())} "
                "(or a dotted Python class path of a custom transport)."
            )
        kind_name = "http"
    kind_name = str(kind_name).strip()
    if kind_name not in known_types() and "." not in kind_name:
        raise ConfigError(
            f"{where}.type={kind_name!r} is not a known transport; accepted values: {', '.join(known_types())} "
            "(or a dotted Python class path of a custom transport)."
        )
    spec["type"] = kind_name
    kind = kind_named(kind_name)
    spec = kind.translate(spec, where)
    for place, inner in kind.inner_settings(spec):
        spec = place.replaced(spec, translate(inner, place.where(where)))
    kind.typed(spec, where)
    return spec


def known_types() -> list[str]:
    """The transport types openlineage-python's factory makes."""
    from openlineage.client.transport import get_default_factory

    return sorted(getattr(get_default_factory(), "transports", {}).keys())


def rewritten(settings: Settings, rewrite: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    """``settings`` with ``rewrite`` applied to them and to the settings of every transport inside them (those
    inside first): each call gets a copy of its own level, with the inner settings rewritten already."""
    result = dict(settings)
    for place, inner in kind_of_settings(result).inner_settings(result):
        result = place.replaced(result, rewritten(inner, rewrite))
    return rewrite(result)


def walk_settings(settings: Settings) -> Iterator[Settings]:
    """Settings, and those of every transport inside them, depth first."""
    yield settings
    for _, inner in kind_of_settings(settings).inner_settings(settings):
        yield from walk_settings(inner)


def unknown_keys(flat: Mapping[str, Any]) -> list[tuple[str, str | None]]:
    """The keys of flat transport settings (``url``, ``auth.apiKey``, without ``transport.``) that their
    transport's kind does not read, which openlineage-python ignores without a word, each with the known key
    it is closest to (or ``None``). Empty for a kind that does not list its keys."""
    known = kind_of_settings({key: value for key, value in flat.items() if key in ("type", "url")}).conf_keys
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
