"""The ``console`` and ``noop`` transports: nothing to read, nothing to hide, nothing to probe."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from openlineage.client.transport.console import ConsoleConfig
from openlineage.client.transport.noop import NoopConfig

from spark_lineage.transports.base import Destination, TransportKind
from spark_lineage.transports.registry import register

if TYPE_CHECKING:
    from openlineage.client.transport.transport import Config, Transport


@register
class ConsoleKind(TransportKind):
    """openlineage-python's console transport (this library prints each event as one line: see
    :mod:`spark_lineage.delivery.console`)."""

    names = ("console",)
    config_class: ClassVar[type[Config] | None] = ConsoleConfig
    conf_keys = ()

    def describe(self, transport: Transport, inner: list[Destination]) -> Destination:
        return Destination(self.names[0], {"type": self.names[0]})


@register
class NoopKind(ConsoleKind):
    """openlineage-python's transport that sends nothing."""

    names = ("noop",)
    config_class = NoopConfig
    sends = False
