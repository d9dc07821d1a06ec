"""The handler registry: plan-node class name -> handler. Adding a node type means adding one handler."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from spark_lineage.handlers.base import NodeHandler
from spark_lineage.plan import Probe

_HANDLERS: dict[str, NodeHandler] = {}
H = TypeVar("H", bound=type[NodeHandler])


def register(handler_class: H) -> H:
    """Class decorator: serve every class name the handler lists. A later registration for the same name
    replaces an earlier one, which is how a user overrides a built-in handler."""
    instance = handler_class()
    for name in handler_class.class_names:
        _HANDLERS[name] = instance
    return handler_class


def handler_for(simple_class_name: str) -> NodeHandler | None:
    return _HANDLERS.get(simple_class_name)


def probes_for(simple_class_name: str) -> Mapping[str, Probe]:
    handler = _HANDLERS.get(simple_class_name)
    return handler.probes if handler is not None else {}
