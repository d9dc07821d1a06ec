"""Plain-Python records of what a Spark query looked like.

The py4j edge (:mod:`spark_lineage.jvm`) fills these in; everything downstream (plan handlers, naming, facet
and event building) reads only these records, never a JVM object.  They round-trip through JSON, which is how
plan fixtures for the unit tests are recorded.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Union

ProbeKind = Literal[
    "value",
    "strings",
    "map",
    "metrics",
    "node",
    "table",
    "v2table",
    "tree",
    "cached_plan",
    "qualified_path",
    "rdd_graph",
    "count",
]


@dataclass(frozen=True)
class Probe:
    """One accessor chain a handler wants evaluated on a JVM object, and how to bring the result back.

    ``path`` is a chain of zero-argument Scala/Java methods called left to right. The step ``"?"`` unwraps a
    Scala ``Option`` (the probe yields ``None`` when it is empty); a step ``name(text)`` calls ``name`` with the
    one string argument ``text``; a step ``@name`` reads the field ``name`` where a class keeps a constructor
    argument without an accessor (Kafka's relation keeps its options so).

    ``kind`` says how the last value crosses into Python, in one round trip where possible:

    - ``value``: a primitive as is, anything else through ``toString()``;
    - ``strings``: a Scala collection, joined JVM-side with ``mkString``;
    - ``map``: a Scala map of strings, joined JVM-side with ``mkString``; with ``keys``, only those entries
      (matched without regard to case) are kept, so that options such as passwords never reach a record;
    - ``metrics``: a Scala map of ``SQLMetric``, read as ``{name: value}``;
    - ``node``: an object captured with the probes its own class's handler declares;
    - ``table``: a ``TableIdentifier`` (or a table name string) looked up in the session catalog;
    - ``v2table``: a ``ResolvedIdentifier`` whose table is loaded from its V2 catalog;
    - ``tree``: a plan that is not part of the query's own tree, read like it (:class:`CatalystNode`);
    - ``cached_plan``: the logical plan a cached relation (``InMemoryRelation``) holds, as a ``tree``;
    - ``qualified_path``: a Hadoop path (or its text) qualified by its file system, as Spark writes to it.
    - ``rdd_graph``: an RDD and every RDD it depends on, as :class:`RddRecord` records;
    - ``count``: how many items a Java array or a Scala collection holds (not the items).

    Plans inside the query's tree (a command's query, a subquery) need no probe: handlers find them in the
    tree, with their own nodes already probed.
    """

    path: tuple[str, ...]
    kind: ProbeKind = "value"
    keys: frozenset[str] | None = None
    """For ``map`` probes: the keys to keep, in lower case (matched without regard to case, kept as written)."""
    if_field: str | None = None
    """Read only when the probed plan node's field of this name holds something (an ``Option`` that is set, a
    flag that is true): the tree already says, so an empty one costs no JVM call."""


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
    tree: CatalystNode | None = field(default=None, repr=False, compare=False)
    """The plan node these values were probed from, when it is one: handlers read its fields and nested plans.
    Held weakly (see :func:`_weak_tree`): that node holds this record as its ``probed``."""

    @property
    def simple_name(self) -> str:
        return simple_class_name(self.class_name)

    def get(self, name: str, default: Any = None) -> Any:
        value = self.props.get(name)
        return default if value is None else value

    def plan_field(self, name: str) -> CatalystNode | None:
        """The plan held by the field ``name`` of this node's tree node (a command's ``query``, a write's
        ``table``)."""
        if self.tree is None:
            return None
        value = self.tree.fields.get(name)
        return value if isinstance(value, CatalystNode) and value.is_plan else None

    def probed_field(self, name: str) -> CapturedNode | None:
        """What was probed of the plan held by the field ``name`` (a write's target relation)."""
        plan = self.plan_field(name)
        return plan.probed if plan is not None else None

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


def _weak_tree() -> property:
    """:attr:`CapturedNode.tree`, kept as a weak reference. The node holds its record (``probed``) and the record
    its node: held strongly both ways, every probed plan node would tie its whole tree into a reference cycle,
    which only the garbage collector frees. A query's tree then outlived the query, made young collections more
    frequent, and moved to older generations when one ran mid-query (``benchmarks/cpu_per_query.py``); held so,
    the tree goes as soon as the query's lineage is built."""

    def get(record: CapturedNode) -> CatalystNode | None:
        held = record.__dict__.get("_tree")
        return None if held is None else held()

    def set_(record: CapturedNode, node: CatalystNode | None) -> None:
        record.__dict__["_tree"] = None if node is None else weakref.ref(node)

    return property(get, set_, doc="The plan node these values were probed from, when it is one (held weakly).")


CapturedNode.tree = _weak_tree()  # type: ignore[assignment]


@dataclass(frozen=True)
class Opaque:
    """A value in a Catalyst tree that is neither a tree node nor a plain value: only its class is read (its
    contents may be large or secret: a relation, a table, options). ``count`` is set when it stands for a
    sequence of ``count`` such values."""

    class_name: str
    count: int | None = None


SKIPPED_EXPRESSION = Opaque("$expression")
"""Stands for an expression when only a plan's shape was read (a plan too large to read whole)."""


@dataclass(frozen=True)
class Attribute:
    """A column in a plan node's output: its expression id, which is how columns are followed, and name; its
    data type's name (Spark's ``DataType.typeName``: ``integer``, ``decimal(10,2)``, ``array``) and metadata
    (as JSON) where they were read (for the ``spark_unknown`` facet)."""

    expr_id: int
    name: str
    type: str | None = None
    metadata: str | None = None


TreeValue = Union["CatalystNode", Opaque, str, int, float, bool, None, tuple[Any, ...], list[Any]]
"""What a Catalyst node's field holds: nodes, sequences (``list``), Scala tuples (``tuple``), plain values."""


@dataclass(eq=False)
class CatalystNode:
    """A node of a Catalyst tree (a logical or physical plan node, or an expression) as plain data.

    ``fields`` are the node's constructor parameters by name, in order (the first parameter list, as Scala's
    ``productIterator`` gives them); sub-expressions and plans a node holds are in its fields. A plan node
    also lists its ``children`` (which are among its fields) and its ``output`` columns. ``expr_id`` is a
    named expression's id (attributes and aliases). ``probed`` holds what the handler of the node's class
    asked the JVM about it beyond the tree (paths, tables).

    Nodes compare by identity: two equal subtrees at different places in a plan are different nodes.
    """

    class_name: str
    fields: Mapping[str, TreeValue] = field(default_factory=dict)
    expr_id: int | None = None
    is_plan: bool = False
    output: tuple[Attribute, ...] = ()
    sql: str | None = None
    """An expression's ``Expression.sql`` (Spark's SQL text of it), read only for the expressions a plan node
    holds itself, and only when column-lineage descriptions are on."""
    children: tuple[CatalystNode, ...] = ()
    probed: CapturedNode | None = None
    index: int | None = field(default=None, repr=False)
    """The node's position among the plan nodes of the read that produced it (to ask the JVM about it)."""
    identity: str | None = field(default=None, repr=False)
    _sub_nodes: tuple[Mapping[str, TreeValue], tuple[CatalystNode, ...]] | None = field(
        default=None, init=False, repr=False
    )

    @property
    def simple_name(self) -> str:
        return simple_class_name(self.class_name)

    def get(self, name: str, default: Any = None) -> Any:
        value = self.fields.get(name)
        return default if value is None else value

    def nodes(self, name: str) -> list[CatalystNode]:
        """The nodes a field holds: itself if it is a node, the nodes of a sequence or tuple, else none."""
        found: list[CatalystNode] = []
        _collect_nodes((self.fields.get(name),), found)
        return found

    def node(self, name: str) -> CatalystNode | None:
        value = self.fields.get(name)
        return value if isinstance(value, CatalystNode) else None

    def sub_nodes(self) -> tuple[CatalystNode, ...]:
        """The nodes directly held by this node's fields (children included, nested ones not). Found once per
        ``fields`` mapping (every walk of a plan asks each node, dozens of times per query)."""
        known = self._sub_nodes
        if known is None or known[0] is not self.fields:
            found: list[CatalystNode] = []
            _collect_nodes(self.fields.values(), found)
            known = self._sub_nodes = (self.fields, tuple(found))
        return known[1]

    def walk(self) -> Iterator[CatalystNode]:
        """This node and every node below it (through fields, so expressions and nested plans too), in
        pre-order."""
        stack: list[CatalystNode] = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.sub_nodes()))

    def plan_nodes(self) -> Iterator[CatalystNode]:
        """Every plan node in this tree (nested plans such as subqueries and command queries too)."""
        return (node for node in self.walk() if node.is_plan)

    def leaves(self) -> list[CatalystNode]:
        """The plan's leaves in Spark's ``collectLeaves`` order: plan nodes without children, following
        children only."""
        if not self.children:
            return [self]
        return [leaf for child in self.children for leaf in child.leaves()]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"class": self.class_name}
        if self.expr_id is not None:
            out["exprId"] = self.expr_id
        if self.sql is not None:
            out["sql"] = self.sql
        if self.is_plan:
            out["output"] = [
                [a.expr_id, a.name] if a.type is None else [a.expr_id, a.name, a.type, a.metadata] for a in self.output
            ]
            out["children"] = [_child_position(self, child) for child in self.children]
        out["fields"] = {name: _tree_to_json(value) for name, value in self.fields.items()}
        if self.probed is not None:
            out["probed"] = self.probed.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CatalystNode:
        fields = {name: _tree_from_json(value) for name, value in data.get("fields", {}).items()}
        node = cls(
            class_name=data["class"],
            fields=fields,
            expr_id=data.get("exprId"),
            sql=data.get("sql"),
            is_plan="output" in data,
            output=tuple(Attribute(int(a[0]), str(a[1]), *a[2:4]) for a in data.get("output", [])),
            probed=CapturedNode.from_dict(data["probed"]) if data.get("probed") else None,
        )
        if node.probed is not None:
            node.probed.tree = node
        plans = [
            value for value in _flatten(list(fields.values())) if isinstance(value, CatalystNode) and value.is_plan
        ]
        node.children = tuple(plans[position] for position in data.get("children", []))
        return node


def _child_position(node: CatalystNode, child: CatalystNode) -> int:
    plans = [
        value for value in _flatten(list(node.fields.values())) if isinstance(value, CatalystNode) and value.is_plan
    ]
    return next(index for index, plan in enumerate(plans) if plan is child)


def _collect_nodes(values: Iterable[Any], found: list[CatalystNode]) -> None:
    """Append to ``found`` the nodes among ``values`` and in their sequences and tuples, in order (what
    :meth:`CatalystNode.walk` asks of every node of a plan: a loop, not a chain of generators, which took most
    of a 600-node plan's analysis time)."""
    for value in values:
        if isinstance(value, CatalystNode):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            _collect_nodes(value, found)


def _flatten(value: Any) -> Iterator[Any]:
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from _flatten(item)
    else:
        yield value


def _tree_to_json(value: Any) -> Any:
    if isinstance(value, CatalystNode):
        return value.to_dict()
    if isinstance(value, Opaque):
        return (
            {"$opaque": value.class_name, "count": value.count}
            if value.count is not None
            else {"$opaque": value.class_name}
        )
    if isinstance(value, tuple):
        return {"$tuple": [_tree_to_json(item) for item in value]}
    if isinstance(value, list):
        return [_tree_to_json(item) for item in value]
    return value


def _tree_from_json(value: Any) -> Any:
    if isinstance(value, list):
        return [_tree_from_json(item) for item in value]
    if isinstance(value, dict):
        if "class" in value:
            return CatalystNode.from_dict(value)
        if "$opaque" in value:
            return Opaque(value["$opaque"], value.get("count"))
        if "$tuple" in value:
            return tuple(_tree_from_json(item) for item in value["$tuple"])
    return value


@dataclass
class CapturedQuery:
    """Everything the analysis needs about one finished Spark SQL execution."""

    func_name: str
    start_ms: int
    end_ms: int
    tree: CatalystNode | None
    """The optimized logical plan, whole (its expressions only when column lineage wants them), with what
    handlers probed of its nodes; ``None`` when no plan could be read."""
    executed_node: str | None = None
    """``nodeName`` of the physical plan's root, which names the job the way openlineage-spark does."""
    metrics: dict[str, int] = field(default_factory=dict)
    sql: str | None = None
    error: str | None = None
    error_stack: str | None = None
    capture_errors: list[str] = field(default_factory=list)
    """What could not be read from the JVM: the query is still reported, with an extraction-error facet."""
    logical_plan: str | None = None
    """The optimized logical plan as Spark's ``toJSON`` gives it, read only when the ``spark.logicalPlan`` run
    facet is on."""
    query_id: int | None = None
    """``QueryExecution.id``: what the query's Spark jobs are filed under (:class:`SqlJobStart`)."""
    jobs: tuple[QueryJob, ...] = ()
    """The Spark jobs the query ran, in the order they started (each a RUNNING event of the query's run)."""

    @property
    def succeeded(self) -> bool:
        return self.error is None

    @property
    def streaming_query(self) -> str | None:
        """The streaming query whose ``foreachBatch`` function ran this query (its jobs say so), if any."""
        return next((job.details.streaming_query for job in self.jobs if job.details.streaming_query), None)

    def to_dict(self) -> dict[str, Any]:
        # The query id, jobs and plan JSON only when known: recorded plans without them stay as they were.
        known: dict[str, Any] = {"queryId": self.query_id} if self.query_id is not None else {}
        if self.jobs:
            known["jobs"] = [job.to_dict() for job in self.jobs]
        if self.logical_plan is not None:
            known["logicalPlan"] = self.logical_plan
        return {
            **known,
            "funcName": self.func_name,
            "startMs": self.start_ms,
            "endMs": self.end_ms,
            "tree": self.tree.to_dict() if self.tree else None,
            "executedNode": self.executed_node,
            "metrics": dict(self.metrics),
            "sql": self.sql,
            "error": self.error,
            "errorStack": self.error_stack,
            "captureErrors": list(self.capture_errors),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CapturedQuery:
        return cls(
            func_name=data["funcName"],
            start_ms=data["startMs"],
            end_ms=data["endMs"],
            tree=CatalystNode.from_dict(data["tree"]) if data.get("tree") else None,
            executed_node=data.get("executedNode"),
            metrics=dict(data.get("metrics", {})),
            sql=data.get("sql"),
            error=data.get("error"),
            error_stack=data.get("errorStack"),
            capture_errors=list(data.get("captureErrors", [])),
            logical_plan=data.get("logicalPlan"),
            query_id=data.get("queryId"),
            jobs=tuple(QueryJob.from_dict(job) for job in data.get("jobs", [])),
        )


@functools.lru_cache(maxsize=4096)
def simple_class_name(class_name: str) -> str:
    """``org.apache.spark.sql.execution.datasources.LogicalRelation`` -> ``LogicalRelation``; Scala objects'
    trailing ``$`` is dropped. Remembered per name: the analysis asks it of every node it looks at, over and over
    (about a hundred times a query of seven plan nodes)."""
    return class_name.rsplit(".", 1)[-1].rstrip("$")


@dataclass(frozen=True)
class RddRecord:
    """One RDD of an RDD graph: what its class is, what it is named, which RDDs it depends on, and, for the
    RDDs that read files, what they read."""

    id: int
    class_name: str
    name: str | None = None
    dependencies: tuple[int, ...] = ()
    """The ids of the RDDs this one depends on, in Spark's order."""
    paths: tuple[str, ...] = ()
    """For a Hadoop RDD, its input paths as configured (qualified URIs, globs kept); for a file scan, the files
    it reads."""
    files: frozenset[str] = frozenset()
    """Those of ``paths`` that are files, not directories or globs."""

    @property
    def simple_name(self) -> str:
        return simple_class_name(self.class_name)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "class": self.class_name, "name": self.name}
        out["dependencies"] = list(self.dependencies)
        if self.paths:
            out["paths"] = list(self.paths)
            out["files"] = sorted(self.files)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RddRecord:
        return cls(
            id=int(data["id"]),
            class_name=data["class"],
            name=data.get("name"),
            dependencies=tuple(int(i) for i in data.get("dependencies", [])),
            paths=tuple(data.get("paths", [])),
            files=frozenset(data.get("files", [])),
        )


@dataclass(frozen=True)
class SparkJobDetails:
    """Which Spark job this is, from its start event: its id and the properties it was submitted with
    (``spark.job.description``, ``spark.jobGroup.id``, ``callSite.short``, ``sql.streaming.queryId``), ``None``
    where unset."""

    job_id: int
    description: str | None = None
    group: str | None = None
    call_site: str | None = None
    streaming_query: str | None = None
    """The streaming query whose thread ran the job: a micro-batch's, or a ``foreachBatch`` function's query's."""

    def to_dict(self) -> dict[str, Any]:
        found = {"jobId": self.job_id, "description": self.description, "group": self.group, "callSite": self.call_site}
        if self.streaming_query is not None:
            found["streamingQuery"] = self.streaming_query
        return found

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SparkJobDetails:
        return cls(
            int(data["jobId"]),
            data.get("description"),
            data.get("group"),
            data.get("callSite"),
            data.get("streamingQuery"),
        )


@dataclass(frozen=True)
class RddJobStart:
    """A non-SQL Spark job as it started: what its final RDD depends on, and where it writes."""

    job_id: int
    time_ms: int
    graph: tuple[RddRecord, ...] = ()
    """Empty when the job was over before its ``ActiveJob`` could be captured."""
    output_path: str | None = None
    errors: tuple[str, ...] = ()
    """What could not be read."""
    details: SparkJobDetails | None = None
    """The job's id and properties, as its start event had them."""


@dataclass(frozen=True)
class SqlJobStart:
    """A Spark job of a SQL execution as it started, and which query (``QueryExecution.id``) runs it: ``None``
    when the execution was over before Spark's listener thread reached the job's start."""

    query_id: int | None
    time_ms: int
    details: SparkJobDetails
    execution_id: int | None = None
    """The job's SQL execution (``spark.sql.execution.id``): how a job whose query Spark no longer held is
    still filed under it, when an earlier job of the same execution told which query that is."""


@dataclass(frozen=True)
class SqlJobEnd:
    """A Spark job of a SQL execution as it ended."""

    job_id: int
    time_ms: int
    succeeded: bool


@dataclass(frozen=True)
class QueryJob:
    """One Spark job a query ran: when it started and, once it did, when it ended and how."""

    details: SparkJobDetails
    start_ms: int
    end_ms: int | None = None
    succeeded: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**self.details.to_dict(), "startMs": self.start_ms, "endMs": self.end_ms, "succeeded": self.succeeded}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> QueryJob:
        return cls(SparkJobDetails.from_dict(data), int(data["startMs"]), data.get("endMs"), data.get("succeeded"))


@dataclass(frozen=True)
class RddJobEnd:
    """A non-SQL Spark job as it ended."""

    job_id: int
    time_ms: int
    error: str | None = None
    """Why the job failed; ``None`` when it succeeded."""
    error_stack: str | None = None


@dataclass(frozen=True)
class JobIo:
    """What a Spark job's tasks read and wrote, summed over its stages: Spark's input and output task metrics,
    as the application's status store (its UI) keeps them."""

    records_read: int = 0
    bytes_read: int = 0
    records_written: int = 0
    bytes_written: int = 0


def _to_json(value: Any) -> Any:
    if isinstance(value, (CapturedNode, CatalystNode)):
        return {"$" + type(value).__name__: value.to_dict()}
    if isinstance(value, tuple) and value and isinstance(value[0], RddRecord):
        return {"$RddGraph": [record.to_dict() for record in value]}
    return value


def _from_json(value: Any) -> Any:
    if isinstance(value, dict) and len(value) == 1:
        ((key, inner),) = value.items()
        if key == "$CapturedNode":
            return CapturedNode.from_dict(inner)
        if key == "$CatalystNode":
            return CatalystNode.from_dict(inner)
        if key == "$RddGraph":
            return tuple(RddRecord.from_dict(item) for item in inner)
    return value


@dataclass(frozen=True)
class QueryOrigin:
    """Which session ran a query heard on the listener bus (not through a session's own listener)."""

    session_uuid: str
    """The server-side SparkSession's UUID."""
    connect_session: str | None = None
    """The Spark Connect session id, for a query a Connect client ran."""
    user: str | None = None
    operation: str | None = None
    """The Connect operation id the query ran under."""
    tags: tuple[str, ...] = ()
    """The tags the Connect client gave its session (``spark.addTag``)."""


@dataclass(frozen=True)
class ConnectSessionEvent:
    """Something that happened to a Spark Connect session on the server."""

    session_id: str
    user: str
    time_ms: int


@dataclass(frozen=True)
class ConnectSessionStarted(ConnectSessionEvent):
    """A Spark Connect session began."""


@dataclass(frozen=True)
class ConnectSessionEnded(ConnectSessionEvent):
    """A Spark Connect session was closed by its client, or expired."""


@dataclass(frozen=True)
class ConnectClient(ConnectSessionEvent):
    """What the first operation of a Spark Connect session told of its client."""

    user_agent: str | None = None


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
