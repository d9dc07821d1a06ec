"""The generic probe evaluator: handlers say, as :class:`~spark_lineage.plan.Probe` accessor chains, which
values they want from which classes; this evaluates the chains on JVM objects with as few round trips as it
can, and knows nothing about what the values mean.

- collections and maps are joined JVM-side with ``mkString`` and cross in one call;
- a Scala ``Option`` is unwrapped with ``orNull`` in one call;
- chains that share a prefix share its calls.

Kinds that need more than accessor chains (a catalog lookup, a nested plan) are resolved by the functions
the caller passes in ``resolvers``: the Spark reader (:mod:`spark_lineage.jvm.spark`) supplies them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from spark_lineage.jvm.values import ITEM_SEP, JvmClasses, JvmError, message, parse_map, parse_metrics, unwrap_option
from spark_lineage.plan import CapturedNode, CatalystNode, Probe

_FIELD_UTILS = "org.apache.commons.lang3.reflect.FieldUtils"

ProbeLookup = Callable[[str], Mapping[str, Probe]]
"""Given a simple class name, the probes its handler wants (empty when none)."""

Resolver = Callable[[Any], Any]
"""Turns the JVM value at the end of a probe's path into plain data, for kinds that need Spark knowledge."""


class ProbeEvaluator:
    """Evaluates probes on JVM objects. One per JVM session; not thread-safe (the analysis thread uses it)."""

    def __init__(self, classes: JvmClasses, probes_for: ProbeLookup) -> None:
        self._classes = classes
        self._probes_for = probes_for
        self._resolvers: dict[str, Resolver] = {}
        self._option_evidence: Any = None

    def add_resolver(self, kind: str, resolver: Resolver) -> None:
        self._resolvers[kind] = resolver

    def wants(self, simple_class_name: str) -> bool:
        return bool(self._probes_for(simple_class_name))

    def capture(self, obj: Any, class_name: str | None = None, tree: CatalystNode | None = None) -> CapturedNode:
        """``obj`` reduced to its class name and the values its class's handler probes; ``tree`` is the plan
        node ``obj`` is, when it is one. A probe that fails is recorded in ``errors``; the others are still
        read."""
        class_name = class_name or str(obj.getClass().getName())
        node = CapturedNode(class_name=class_name, tree=tree)
        cache: dict[tuple[str, ...], Any] = {(): obj}
        for name, spec in self._probes_for(node.simple_name).items():
            if spec.if_field is not None and tree is not None and tree.fields.get(spec.if_field) in (None, False):
                continue
            try:
                node.props[name] = self._evaluate(obj, spec, cache)
            except Exception as error:  # noqa: BLE001 - one missing value must not lose the query
                node.errors[name] = message(error)
        return node

    def option(self, option: Any) -> Any:
        """A Scala ``Option`` as its value or ``None``."""
        if self._option_evidence is None:
            self._option_evidence = getattr(self._classes("scala.Predef"), "$conforms")()
        return unwrap_option(option, self._option_evidence)

    def _evaluate(self, obj: Any, spec: Probe, cache: dict[tuple[str, ...], Any]) -> Any:
        value = obj
        for depth in range(1, len(spec.path) + 1):
            prefix = spec.path[:depth]
            if prefix in cache:
                value = cache[prefix]
                continue
            step = spec.path[depth - 1]
            if step == "?":
                value = self.option(value)
            elif step.startswith("@"):
                # commons-lang3 ships with Spark: one call finds the field up the class hierarchy and reads it.
                value = self._classes(_FIELD_UTILS).readField(value, step[1:], True)
            elif step.endswith(")"):  # a one-string-argument call, e.g. get(format)
                name, argument = step[:-1].split("(", 1)
                value = getattr(value, name)(argument)
            else:
                value = getattr(value, step)()
            cache[prefix] = value
            if value is None:
                return None
        return self._convert(value, spec)

    def _convert(self, value: Any, spec: Probe) -> Any:
        if value is None:
            return None
        kind = spec.kind
        if kind == "value":
            return value if isinstance(value, (str, int, float, bool)) else str(value.toString())
        if kind == "strings":
            joined = str(value.mkString(ITEM_SEP))
            return joined.split(ITEM_SEP) if joined else []
        if kind == "map":
            entries = parse_map(str(value.mkString(ITEM_SEP)))
            if spec.keys is None:
                return entries
            return {key: text for key, text in entries.items() if key.lower() in spec.keys}
        if kind == "metrics":
            return parse_metrics(str(value.mkString(ITEM_SEP)))
        if kind == "count":
            from py4j.java_collections import JavaArray

            return len(value) if isinstance(value, JavaArray) else int(value.size())
        if kind == "node":
            return self.capture(value)
        resolver = self._resolvers.get(kind)
        if resolver is None:
            raise JvmError(f"unknown probe kind {kind!r}")
        return resolver(value)
