"""The ``composite`` transport, which sends each event through several others, and the ``transform`` transport,
which changes (or drops) each event before the one it wraps sends it: openlineage-spark's keys
(``transports.<name>.*``, ``continueOnFailure``, ``transformerClass``) as openlineage-python's, and the
transports inside them, for the walks of :mod:`spark_lineage.transports.tree`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from openlineage.client.transport.composite import CompositeConfig
from openlineage.client.transport.transform.transform import EventTransformer, TransformConfig

from spark_lineage.conf_values import boolean, python_class
from spark_lineage.errors import ConfigError
from spark_lineage.transports.base import ConfKeys, Destination, Inner, TransportKind
from spark_lineage.transports.registry import register

if TYPE_CHECKING:
    from openlineage.client.transport.transport import Transport


@register
class CompositeKind(TransportKind):
    """openlineage-python's composite transport: its parts are named (``transports.<name>``) or listed."""

    names = ("composite",)
    config_class = CompositeConfig

    def translate(self, spec: dict[str, Any], where: str) -> dict[str, Any]:
        transports = spec.get("transports")
        if not isinstance(transports, (list, tuple, Mapping)) or not transports:
            raise ConfigError(f"{where}.transports.<name>.type is required for the composite transport.")
        if isinstance(transports, tuple):
            spec["transports"] = list(transports)
        for java_key, python_key in (
            ("continueOnFailure", "continue_on_failure"),
            ("continueOnSuccess", "continue_on_success"),
        ):
            if java_key in spec:
                spec[python_key] = boolean(f"{where}.{java_key}", spec.pop(java_key))
        return spec

    def inner_settings(self, settings: Mapping[str, Any]) -> list[tuple[Inner, Mapping[str, Any]]]:
        transports = settings.get("transports")
        if isinstance(transports, Mapping):
            return [
                (Inner("transports", str(name)), sub) for name, sub in transports.items() if isinstance(sub, Mapping)
            ]
        if isinstance(transports, (list, tuple)):
            return [
                (Inner("transports", index), sub) for index, sub in enumerate(transports) if isinstance(sub, Mapping)
            ]
        return []

    def children(self, transport: Transport) -> list[Transport]:
        return list(getattr(transport, "transports", None) or [])

    def child_keys(self, keys: ConfKeys, child: Transport, index: int) -> ConfKeys:
        return keys.inner(f"transports.{getattr(child, 'name', None) or index}")

    def describe(self, transport: Transport, inner: list[Destination]) -> Destination:
        name = "composite(" + ", ".join(part.name for part in inner) + ")"
        return Destination(name, {"type": "composite", "transports": [part.settings for part in inner]})


@register
class TransformKind(TransportKind):
    """openlineage-python's transform transport: ``transformerClass`` is the dotted path of a Python
    ``EventTransformer`` (openlineage-spark's names a Java class)."""

    names = ("transform",)
    config_class = TransformConfig

    def translate(self, spec: dict[str, Any], where: str) -> dict[str, Any]:
        for java_key, python_key in (
            ("transformerClass", "transformer_class"),
            ("transformerProperties", "transformer_properties"),
        ):
            if java_key in spec:
                spec[python_key] = spec.pop(java_key)
        if not spec.get("transformer_class"):
            raise ConfigError(f"{where}.transformerClass is required for the transform transport.")
        python_class(f"{where}.transformerClass", str(spec["transformer_class"]), EventTransformer)
        if not isinstance(spec.get("transport"), Mapping):
            raise ConfigError(f"{where}.transport.type is required for the transform transport.")
        return spec

    def inner_settings(self, settings: Mapping[str, Any]) -> list[tuple[Inner, Mapping[str, Any]]]:
        inner = settings.get("transport")
        return [(Inner("transport"), inner)] if isinstance(inner, Mapping) else []

    def children(self, transport: Transport) -> list[Transport]:
        inner = getattr(transport, "transport", None)
        return [inner] if inner is not None else []

    def child_keys(self, keys: ConfKeys, child: Transport, index: int) -> ConfKeys:
        return keys.inner("transport")

    def describe(self, transport: Transport, inner: list[Destination]) -> Destination:
        if not inner:
            return super().describe(transport, inner)
        return Destination(f"transform {inner[0].name}", {"type": "transform", "transport": inner[0].settings})
