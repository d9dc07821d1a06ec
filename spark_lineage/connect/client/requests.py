"""What a Spark Connect client's ``ExecutePlanRequest`` says it reads and writes, from its protos alone.

The request is read through protobuf's reflection (message full names, ``ListFields``, enum descriptors), so
this module imports no PySpark and takes the protos of any Connect client (PySpark 3.5's and 4.x's, or
``pyspark-client``'s). Relations are a tree of many kinds (``project``, ``filter``, ``join``, ...): a visitor
over every message field finds the reads and SQL texts inside, whatever the kinds between them.

Options are kept only where naming needs them (a JDBC table and URL, Kafka topics and servers, a path):
a password never leaves the request.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from spark_lineage.connect.client.statements import exchanges as sql_exchanges
from spark_lineage.handlers.datasources import naming_option_keys

READ = "spark.connect.Read"
SQL = "spark.connect.SQL"
RELATION = "spark.connect.Relation"


class ActionKind(str, Enum):
    """What a request asks the server to do."""

    WRITE = "write"
    """``DataFrameWriter``: ``save``, ``saveAsTable``, ``insertInto`` (a ``WriteOperation``)."""
    WRITE_V2 = "write_v2"
    """``DataFrameWriterV2``: ``writeTo(...).create()``, ``append()``, ... (a ``WriteOperationV2``)."""
    SQL = "sql"
    """``spark.sql(...)`` (a ``SqlCommand``)."""
    QUERY = "query"
    """A plan whose rows come back (``collect``, ``toPandas``, ``count``)."""
    OTHER = "other"
    """Any other command (a view, a function, a streaming query's control)."""


@dataclass(frozen=True)
class ReadSource:
    """One read in an action's input tree: a data source (``format`` and ``paths``) or a table by name."""

    format: str | None = None
    paths: tuple[str, ...] = ()
    table: str | None = None
    """A ``named_table``'s identifier as the user wrote it (``db.t``, ``cat.db.t``)."""
    options: Mapping[str, str] = field(default_factory=dict)
    """The options its datasets are named by (:func:`~spark_lineage.handlers.datasources.naming_option_keys`),
    keys in lower case."""
    schema: str | None = None
    """The schema the user gave the read (``.schema(...)``: DDL, or a ``StructType``'s JSON), if any."""


@dataclass(frozen=True)
class WriteTarget:
    """Where an action writes: a ``format`` to a ``path``, or a ``table``."""

    format: str | None = None
    path: str | None = None
    table: str | None = None
    method: str = "save"
    """``save``, ``saveAsTable``, ``insertInto`` (``WriteOperation``) or ``writeTo`` (``WriteOperationV2``)."""
    mode: str | None = None
    """The save mode as the proto names it without its prefix: ``overwrite``, ``append``, ``create``, ..."""
    options: Mapping[str, str] = field(default_factory=dict)
    """The options its datasets are named by (:func:`~spark_lineage.handlers.datasources.naming_option_keys`),
    keys in lower case."""

    def save_options(self) -> Mapping[str, str]:
        """Its options as a ``SaveIntoDataSourceCommand`` holds them on the server: with its path."""
        return {**self.options, "path": self.path} if self.path else self.options


@dataclass(frozen=True)
class ClientAction:
    """One request of a Connect client, as plain data."""

    kind: ActionKind
    session_id: str = ""
    operation_id: str = ""
    reads: tuple[ReadSource, ...] = ()
    write: WriteTarget | None = None
    sql: tuple[str, ...] = ()
    """The SQL texts of the action: a ``spark.sql`` command's, and those of ``spark.sql`` DataFrames it reads."""
    tags: tuple[str, ...] = ()
    """The tags the client gave its session (``spark.addTag``) when it sent the request."""
    exchanges: bool = False
    """Whether its input needs data moved between partitions (a join, an aggregate, a distinct, a global sort,
    a set operation, a repartition, or SQL that says one of them): Spark then plans it adaptively."""
    input: Any = field(default=None, compare=False, repr=False)
    """The ``Relation`` proto a write writes (or a query returns), to ask the server about (its schema)."""


@dataclass(frozen=True)
class RequestHeader:
    """What an ``ExecutePlanRequest`` says besides its plan. Read on the thread that sends the request, when it is
    sent: the client goes on changing the request (PySpark's reattachable execution adds its options), while
    its plan is left as it is and can be read later, on another thread."""

    session_id: str = ""
    operation_id: str = ""
    tags: tuple[str, ...] = ()


def request_header(request: Any) -> RequestHeader:
    """The header of ``request`` (a few field reads)."""
    return RequestHeader(
        str(request.session_id),
        str(getattr(request, "operation_id", "")),
        tuple(str(tag) for tag in getattr(request, "tags", ())),
    )


def read_request(request: Any) -> ClientAction:
    """The action an ``ExecutePlanRequest`` asks for."""
    return read_plan(request.plan, request_header(request))


def read_plan(plan: Any, header: RequestHeader) -> ClientAction:
    """The action a request's ``Plan`` asks for, the request's ``header`` said."""
    base = ClientAction(
        ActionKind.OTHER, session_id=header.session_id, operation_id=header.operation_id, tags=header.tags
    )
    root, command = _operation(plan)
    if root is not None:
        return replace(base, kind=ActionKind.QUERY, input=root, **_input(root))
    kind = command.WhichOneof("command_type") if command is not None else None
    if kind in _WRITES:
        write = getattr(command, kind)
        action_kind, target = _WRITES[kind]
        return replace(base, kind=action_kind, write=target(write), input=write.input, **_input(write.input))
    if kind == "sql_command":
        sql = command.sql_command
        texts: tuple[str, ...] = (str(sql.sql),) if str(getattr(sql, "sql", "")) else ()  # 3.5: the text itself
        if has_field(sql, "input"):  # 4.x: a relation holding the SQL
            texts += _input(sql.input)["sql"]
        return replace(base, kind=ActionKind.SQL, sql=texts, exchanges=any(map(sql_exchanges, texts)))
    return base


_WRITES: dict[str, tuple[ActionKind, Callable[[Any], WriteTarget]]] = {}
"""The write commands, by their field in ``Command``: the action's kind and how its target is read (filled in
below, once the readers are defined)."""


def _operation(plan: Any) -> tuple[Any, Any]:
    """The plan's relation or command (one of the two), decompressed when the client compressed it (PySpark 4.1+
    sends a plan larger than the server's ``planCompression.threshold`` as zstd)."""
    kind = plan.WhichOneof("op_type")
    if kind == "root":
        return plan.root, None
    if kind == "command":
        return None, plan.command
    if kind != "compressed_operation":
        return None, None
    compressed = plan.compressed_operation
    data = _unzstd(bytes(compressed.data))
    if data is None:
        return None, None
    relation = enum_name(compressed, "op_type").endswith("RELATION")
    message = type(plan.root)() if relation else type(plan.command)()
    message.ParseFromString(data)
    return (message, None) if relation else (None, message)


def _unzstd(data: bytes) -> bytes | None:
    try:
        import zstandard  # the module PySpark compresses plans with; a client that did has it
    except ImportError:
        return None
    try:
        return bytes(zstandard.ZstdDecompressor().decompress(data))
    except zstandard.ZstdError:
        return None


def messages(message: Any) -> Iterator[Any]:
    """``message`` and every message inside it, depth first, each one's fields in their numbers' order (as
    protobuf's ``ListFields`` lists them): a visitor over protobuf's reflection."""
    pending = [message]
    while pending:
        current = pending.pop()
        yield current
        slots = _SLOTS.get(type(current))
        if slots is None:
            slots = _SLOTS[type(current)] = _slots(current.DESCRIPTOR)
        children: list[Any] = []
        for slot in slots:
            name: str | None = current.WhichOneof(slot.oneof) if slot.oneof is not None else slot.name
            if name is None:
                continue
            kind = slot.kinds.get(name)
            if kind is _FieldKind.MESSAGES:
                children.extend(getattr(current, name))
            elif kind is _FieldKind.MESSAGE and (slot.oneof is not None or current.HasField(name)):
                children.append(getattr(current, name))
        pending.extend(reversed(children))


class _FieldKind(Enum):
    """What a field holds, for the visitor: a message, or repeated messages (plain values, and maps of them, the
    options, are not visited)."""

    MESSAGE = "message"
    MESSAGES = "messages"


@dataclass(frozen=True)
class _Slot:
    """Where the visitor looks for children in a message: one field, or the fields of a oneof (one of them set
    at most: ``WhichOneof`` says which) next to one another in number."""

    name: str | None
    """The field's name (``None`` for a oneof's slot)."""
    oneof: str | None
    kinds: dict[str, _FieldKind]
    """The kind of each field of the slot, by name."""


_SLOTS: dict[type, tuple[_Slot, ...]] = {}
"""Each message class's slots, in their fields' order: asking protobuf's reflection for the fields a message has
set (``ListFields``) costs more than asking the few of its class that can hold messages."""
_NO_PLAN_INSIDE = frozenset({"spark.connect.RelationCommon", "spark.connect.ExpressionCommon"})
"""What every relation and expression carries beside its plan (its plan id, and where in the user's code it was
made: the origin's call site), holding no relation or expression: not visited (four messages of ten, in a
DataFrame's plan)."""


def _slots(descriptor: Any) -> tuple[_Slot, ...]:
    slots: list[_Slot] = []
    for member in sorted(descriptor.fields, key=lambda f: f.number):
        kind = _field_kind(member)
        if kind is None:
            continue
        containing = member.containing_oneof
        # A oneof of one field (proto3's ``optional``) is the field alone.
        oneof = containing.name if containing is not None and len(containing.fields) > 1 else None
        if oneof is not None and slots and slots[-1].oneof == oneof:
            slots[-1].kinds[member.name] = kind
        else:
            slots.append(_Slot(None if oneof is not None else member.name, oneof, {member.name: kind}))
    return tuple(slots)


def _field_kind(descriptor: Any) -> _FieldKind | None:
    if descriptor.message_type is None or descriptor.message_type.full_name in _NO_PLAN_INSIDE:
        return None
    if not _repeated(descriptor):
        return _FieldKind.MESSAGE
    return None if descriptor.message_type.GetOptions().map_entry else _FieldKind.MESSAGES


def _repeated(descriptor: Any) -> bool:
    """Whether a field is repeated (protobuf 6 says ``is_repeated``; earlier ones, ``label``)."""
    repeated = getattr(descriptor, "is_repeated", None)
    return bool(repeated) if repeated is not None else descriptor.label == _LABEL_REPEATED


_LABEL_REPEATED = 3


def _input(relation: Any) -> dict[str, Any]:
    """What an action's input tree reads, its SQL texts, and whether it moves data between partitions, as
    :class:`ClientAction`'s fields: one visit of the tree."""
    reads: list[ReadSource] = []
    texts: list[str] = []
    exchanges = False
    for message in messages(relation):
        name = message.DESCRIPTOR.full_name
        if name == READ:
            reads.append(read_source(message))
        elif name == SQL:
            texts.append(str(message.query))
            exchanges = exchanges or sql_exchanges(texts[-1])
        elif not exchanges:
            exchanges = _exchanging(message, name)
    return {"reads": tuple(reads), "sql": tuple(texts), "exchanges": exchanges}


def read_source(read: Any) -> ReadSource:
    """What a ``Read`` relation reads: the same object for the same message (an action's datasets and its column
    lineage walk the same reads, and a session's actions read the same sources again)."""
    kind: Any = type(read)  # hashable, as every class (typeshed's type[Any] is not said to be)
    return _read_source(kind, read.SerializeToString(deterministic=True))


@functools.lru_cache(maxsize=256)
def _read_source(kind: Any, serialized: bytes) -> ReadSource:
    read = kind.FromString(serialized)
    if read.WhichOneof("read_type") == "named_table":
        table = read.named_table
        return ReadSource(table=str(table.unparsed_identifier), options=_naming_options(table.options))
    source = read.data_source
    return ReadSource(
        format=str(source.format) if has_field(source, "format") else None,
        paths=tuple(str(path) for path in source.paths),
        options=_naming_options(source.options),
        schema=str(source.schema) if has_field(source, "schema") and str(source.schema) else None,
    )


EXCHANGING_RELATIONS = frozenset(
    f"spark.connect.{name}"
    for name in (
        "Join",
        "Aggregate",
        "Deduplicate",
        "RepartitionByExpression",
        "AsOfJoin",
        "LateralJoin",
        "Expression.Window",
    )
)
"""The relations (and the window expression) whose plans move data between partitions (with :data:`SORT` when
global, a shuffling ``Repartition``, and a set operation other than ``UNION ALL``)."""
SORT, REPARTITION, SET_OPERATION = "spark.connect.Sort", "spark.connect.Repartition", "spark.connect.SetOperation"


def _exchanging(message: Any, name: str) -> bool:
    if name in EXCHANGING_RELATIONS:
        return True
    if name == SORT:
        return bool(getattr(message, "is_global", True))
    if name == SET_OPERATION:
        return not (enum_name(message, "set_op_type").endswith("UNION") and message.is_all)
    return name == REPARTITION and bool(getattr(message, "shuffle", False))


def _write(write: Any) -> WriteTarget:
    options = _naming_options(write.options)
    save_type = write.WhichOneof("save_type")
    method, table = "save", None
    if save_type == "table":
        table = str(write.table.table_name)
        method = "insertInto" if enum_name(write.table, "save_method").endswith("INSERT_INTO") else "saveAsTable"
    return WriteTarget(
        format=str(write.source) if has_field(write, "source") else None,
        path=str(write.path) if save_type == "path" else options.get("path"),
        table=table,
        method=method,
        mode=_mode(enum_name(write, "mode"), "SAVE_MODE_"),
        options=options,
    )


def _write_v2(write: Any) -> WriteTarget:
    return WriteTarget(
        format=str(write.provider) if has_field(write, "provider") else None,
        table=str(write.table_name),
        method="writeTo",
        mode=_mode(enum_name(write, "mode"), "MODE_"),
        options=_naming_options(write.options),
    )


_WRITES.update(
    write_operation=(ActionKind.WRITE, _write),
    write_operation_v2=(ActionKind.WRITE_V2, _write_v2),
)


def _naming_options(options: Mapping[str, str]) -> dict[str, str]:
    """The options of a read or write that its datasets are named by (those the data sources of the driver side
    name theirs by, and ``path``), keys in lower case: no other option is kept."""
    kept = naming_option_keys()
    return {str(key).lower(): str(value) for key, value in options.items() if str(key).lower() in kept}


def enum_name(message: Any, field_name: str) -> str:
    """The name of an enum field's value (``JOIN_TYPE_INNER``); empty for a number the proto does not name."""
    key = (message.DESCRIPTOR.full_name, field_name)
    names = _ENUM_NAMES.get(key)
    if names is None:
        enum_type = message.DESCRIPTOR.fields_by_name[field_name].enum_type
        names = _ENUM_NAMES[key] = {value.number: value.name for value in enum_type.values}
    return names.get(getattr(message, field_name), "")


_ENUM_NAMES: dict[tuple[str, str], dict[int, str]] = {}
"""Each enum field's value names by number, looked up once (a dict lookup in place of protobuf's reflection:
0.4 µs a call with upb, warm)."""


def _mode(name: str, prefix: str) -> str | None:
    mode = name.removeprefix(prefix).lower()
    return None if mode in ("", "unspecified") else mode


def has_field(message: Any, field_name: str) -> bool:
    """Whether an optional field (or a message field) is set; ``False`` for a field this proto lacks."""
    key = (type(message), field_name)
    presence = _PRESENCE.get(key)
    if presence is None:
        presence = _PRESENCE[key] = _presence(message, field_name)
    if presence is _Presence.TRACKED:
        return bool(message.HasField(field_name))
    if presence is _Presence.BY_VALUE:
        return bool(getattr(message, field_name))
    return False


class _Presence(Enum):
    """How a message class tells whether a field is set."""

    TRACKED = "tracked"
    """An optional or message field: ``HasField``."""
    BY_VALUE = "by value"
    """A plain field without presence: set when not its default."""
    ABSENT = "absent"
    """A field this proto lacks (a client older than the field)."""


_PRESENCE: dict[tuple[type, str], _Presence] = {}
"""Each field's :class:`_Presence`, by message class and field name: looked up once (``has_field`` runs a score of
times for an action's request)."""


def _presence(message: Any, field_name: str) -> _Presence:
    if field_name not in message.DESCRIPTOR.fields_by_name:
        return _Presence.ABSENT
    try:
        message.HasField(field_name)
    except ValueError:
        return _Presence.BY_VALUE
    return _Presence.TRACKED
