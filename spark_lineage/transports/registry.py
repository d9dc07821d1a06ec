"""The transport kinds, by ``type``: :data:`KINDS`, filled by :func:`register` beside each kind's class."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spark_lineage.registry import Registrar, Registry
from spark_lineage.transports.base import TransportKind

KINDS: Registry[TransportKind] = Registry("transport kind")
"""Each registered kind's support object, under each of its :attr:`~TransportKind.names`."""
FALLBACK = TransportKind()
"""What serves a transport of a kind nobody registered."""

register = Registrar(KINDS, "names")
"""Class decorator: serve the transports of ``kind.names`` with an instance of the kind. A name served already
is an error (:class:`~spark_lineage.errors.DuplicateNameError`), unless ``@register(replace=True)``: how a kind
of one's own takes a built-in one's place."""


def kind_named(name: Any) -> TransportKind:
    """The kind serving transports of type ``name`` (``http``, or a dotted class path)."""
    return KINDS.get(str(name or "")) or FALLBACK


def kind_of(transport: Any) -> TransportKind:
    """The kind serving ``transport`` (made already): by its ``kind``, else by its class's dotted path."""
    found = KINDS.get(str(getattr(transport, "kind", None) or ""))
    if found is None:
        cls = type(transport)
        found = KINDS.get(f"{cls.__module__}.{cls.__qualname__}")
    return found or FALLBACK


def kind_of_settings(settings: Mapping[str, Any]) -> TransportKind:
    """The kind serving the transport ``settings`` describe (``http`` when only a ``url`` is given)."""
    kind = settings.get("type") or ("http" if "url" in settings else "")
    return kind_named(str(kind).strip())
