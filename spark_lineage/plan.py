"""Plain-Python records of what a Spark query looked like.

The py4j edge (:mod:`spark_lineage.jvm`) fills these in; everything downstream (plan handlers, naming, facet
and event building) reads only these records, never a JVM object.  They round-trip through JSON, which is how
plan fixtures for the unit tests are recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

ProbeKind = Literal["value", "strings", "map", "metrics", "node", "plan", "table", "v2table"]


@dataclass(frozen=True)
class Probe:
    """One accessor chain a handler wants evaluated on a JVM object, and how to bring the result back.

    ``path`` is a chain of zero-argument Scala/Java methods called left to right. The step ``"?"`` unwraps a
    Scala ``Option`` (the probe yields ``None`` when it is empty); a step ``name(text)`` calls ``name`` with the
    one string argument ``text``.

    ``kind`` says how the last value crosses into Python, in one round trip where possible:

    - ``value``: a primitive as is, anything else through ``toString()``;
    - ``strings``: a Scala collection, joined JVM-side with ``mkString``;
    - ``map``: a Scala map of strings, joined JVM-side with ``mkString``;
    - ``metrics``: a Scala map of ``SQLMetric``, read as ``{name: value}``;
    - ``node``: an object captured with the probes its own class's handler declares;
    - ``plan``: a logical plan captured like a query's plan (root and leaves);
    - ``table``: a ``TableIdentifier`` (or a table name string) looked up in the session catalog;
    - ``v2table``: a ``ResolvedIdentifier`` whose table is loaded from its V2 catalog.
    """

    path: tuple[str, ...]
    kind: ProbeKind = "value"


def probe(path: str, kind: ProbeKind = "value") -> Probe:
    """Build a probe from a dotted accessor path, e.g. ``probe("relation.location.rootPaths", "strings")``."""
    return Probe(tuple(path.split(".")), kind)


@dataclass
class CapturedNode:
    """A JVM object (plan node, relation, catalog table) reduced to its class name and probed values."""

    class_name: str
    props: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    """Probes that failed, by name, with the JVM's message: analysis reports them, capture goes on."""

    @property
    def simple_name(self) -> str:
        return simple_class_name(self.class_name)

    def get(self, name: str, default: Any = None) -> Any:
        value = self.props.get(name)
        return default if value is None else value

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "class": self.class_name,
            "props": {k: _to_json(v) for k, v in self.props.items()},
        }
        if self.errors:
            out["errors"] = dict(self.errors)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CapturedNode:
        return cls(
            class_name=data["class"],
            props={k: _from_json(v) for k, v in data.get("props", {}).items()},
            errors=dict(data.get("errors", {})),
        )


@dataclass
class CapturedPlan:
    """A logical plan: its root and its leaves. Inner nodes are not captured: no handler needs them, and
    skipping them keeps JVM round trips proportional to the datasets a query touches, not to its size."""

    root: CapturedNode
    leaves: list[CapturedNode] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"root": self.root.to_dict(), "leaves": [leaf.to_dict() for leaf in self.leaves]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CapturedPlan:
        return cls(
            root=CapturedNode.from_dict(data["root"]),
            leaves=[CapturedNode.from_dict(leaf) for leaf in data.get("leaves", [])],
        )


@dataclass
class CapturedQuery:
    """Everything the analysis needs about one finished Spark SQL execution."""

    func_name: str
    start_ms: int
    end_ms: int
    plan: CapturedPlan | None
    executed_node: str | None = None
    """``nodeName`` of the physical plan's root, which names the job the way openlineage-spark does."""
    metrics: dict[str, int] = field(default_factory=dict)
    sql: str | None = None
    error: str | None = None
    error_stack: str | None = None
    capture_errors: list[str] = field(default_factory=list)
    """What could not be read from the JVM: the query is still reported, with an extraction-error facet."""

    @property
    def succeeded(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "funcName": self.func_name,
            "startMs": self.start_ms,
            "endMs": self.end_ms,
            "plan": self.plan.to_dict() if self.plan else None,
            "executedNode": self.executed_node,
            "metrics": dict(self.metrics),
            "sql": self.sql,
            "error": self.error,
            "errorStack": self.error_stack,
            "captureErrors": list(self.capture_errors),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CapturedQuery:
        plan = data.get("plan")
        return cls(
            func_name=data["funcName"],
            start_ms=data["startMs"],
            end_ms=data["endMs"],
            plan=CapturedPlan.from_dict(plan) if plan else None,
            executed_node=data.get("executedNode"),
            metrics=dict(data.get("metrics", {})),
            sql=data.get("sql"),
            error=data.get("error"),
            error_stack=data.get("errorStack"),
            capture_errors=list(data.get("captureErrors", [])),
        )


def simple_class_name(class_name: str) -> str:
    """``org.apache.spark.sql.execution.datasources.LogicalRelation`` -> ``LogicalRelation``; Scala objects'
    trailing ``$`` is dropped."""
    return class_name.rsplit(".", 1)[-1].rstrip("$")


def _to_json(value: Any) -> Any:
    if isinstance(value, (CapturedNode, CapturedPlan)):
        return {"$" + type(value).__name__: value.to_dict()}
    return value


def _from_json(value: Any) -> Any:
    if isinstance(value, dict) and len(value) == 1:
        ((key, inner),) = value.items()
        if key == "$CapturedNode":
            return CapturedNode.from_dict(inner)
        if key == "$CapturedPlan":
            return CapturedPlan.from_dict(inner)
    return value


@dataclass(frozen=True)
class SessionInfo:
    """Facts about the Spark application and session, read once at ``enable()``."""

    app_name: str
    app_id: str
    spark_version: str
    master: str
    warehouse: str | None
    user: str | None = None
    deploy_mode: str | None = None
    driver_host: str | None = None
    ui_url: str | None = None
    session_id: str = ""
    conf: Mapping[str, str] = field(default_factory=dict)
    """Session configuration (SparkConf merged with SQL confs), as strings."""
