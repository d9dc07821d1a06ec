"""Read a whole Catalyst tree (a plan with every expression in it) in one JVM call.

Column lineage needs every node and expression of a plan, not just its root and leaves. Asking for them one
py4j call at a time costs a round trip each (hundreds per query), and Spark's own ``TreeNode.toJSON`` runs
Scala runtime reflection for every node and expression (about 0.5 ms each, 50 ms for a 20-node plan).
Instead, this module composes, once per session, a small JVM-side function out of ``java.lang.invoke``
method handles (``MethodHandles`` combinators over public methods: no code is compiled or loaded): it walks
the tree with Scala's ``productIterator`` and writes a compact, unambiguous text, which
:func:`decode` turns into :class:`~spark_lineage.plan.CatalystNode` records. Reading a plan then costs one
call, plus one per 7,000 characters of text (py4j answers of more than 8 KiB stall 40 ms on Nagle's
algorithm, so long texts are fetched in pieces).

The walk is generic: it knows tree nodes, sequences, options, tuples, strings, numbers, enums and expression
ids, and nothing about what any node means. Everything else (relations, tables, options, data types, literal
values) is read as its class name only, so neither large values nor secrets cross.

The text, one token per value (the tags are :class:`~spark_lineage.jvm.wire.TreeTag`'s):

- ``{cls;hash;@<id>:<n>:<name>...;`` fields ``|`` ``hash;``... ``}``: a plan node: its class, identity hash,
  output columns (expression id and name; with ``&`` instead of ``@``, each column's data type name and
  metadata JSON follow its name, counted the same way), its constructor parameters, then the identity hashes
  of its children (which are among those parameters);
- ``(cls;`` [``#id;``] [``qs<n>:<sql>``] fields ``)``: any other tree node (an expression), with its ``exprId``
  if it has one, and, when column-lineage descriptions are asked for, the ``Expression.sql`` of each
  expression a plan node holds itself (not of the sub-expressions within it); ``x`` when only the plan's
  shape is read;
- ``[`` values ``]``: a Scala sequence; ``<`` values ``>``: a Scala tuple; ``N``: ``null`` or ``None``;
- ``s<n>:<text>``: a string of ``n`` code points; ``v<text>;``: a number or boolean; ``e<id>;``: an
  ``ExprId``; ``E<name>;``: a Java enum constant; ``o<cls>;``: anything else;
- ``z<cls>;<n>;``: a sequence of ``n`` values of another kind (rows of a local relation), not walked.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from spark_lineage.errors import DecodeError, JvmError
from spark_lineage.jvm.method_handles import HandleBuilder
from spark_lineage.jvm.values import JvmClasses
from spark_lineage.jvm.wire import CLASS_PREFIXES, TreeTag
from spark_lineage.plan import SKIPPED_EXPRESSION, Attribute, CatalystNode, Opaque, TreeValue

MAX_TEXT_CHARS = 8_000_000
"""The walk stops (and the plan is read without its tree) beyond this much text: a runaway guard only."""
CHUNK_CHARS = 7_000
"""How much text one answer holds when answers cross in pieces (py4j answers of more than 8 KiB stall 40 ms on
Nagle's algorithm)."""


@dataclass(frozen=True)
class TreeDetail:
    """How much of a tree a walk writes: each option costs JVM time and text only when asked for."""

    expressions: bool = True
    """Expressions too, and each plan node's output columns (column lineage needs them); without them, the
    plan's shape only: its nodes, without their output columns."""
    sql: bool = False
    """The SQL text of each expression a plan node holds (column-lineage descriptions): with expressions only."""
    output_types: bool = False
    """Each plan node's output columns, with their data type names and metadata (the ``spark_unknown`` run
    facet), with or without expressions."""

    def effective(self) -> TreeDetail:
        """The options that apply (no SQL text without expressions)."""
        return self if self.expressions or not self.sql else replace(self, sql=False)


FULL = TreeDetail()
"""Expressions and output columns, as column lineage needs them."""
SHAPE = TreeDetail(expressions=False)
"""The plan's shape only: for plans too large to read whole, and queries read while the worker is behind."""


_PLAN, _PLAN_CHILDREN, _PLAN_END, _OUTPUT, _TYPED_OUTPUT = (
    TreeTag.PLAN.value,
    TreeTag.PLAN_CHILDREN.value,
    TreeTag.PLAN_END.value,
    TreeTag.OUTPUT.value,
    TreeTag.TYPED_OUTPUT.value,
)
_EXPRESSION, _EXPR_ID_OF, _SQL_OF, _EXPRESSION_END = (
    TreeTag.EXPRESSION.value,
    TreeTag.EXPR_ID_OF.value,
    TreeTag.SQL_OF.value,
    TreeTag.EXPRESSION_END.value,
)
_LIST, _LIST_END, _TUPLE, _TUPLE_END = (
    TreeTag.LIST.value,
    TreeTag.LIST_END.value,
    TreeTag.TUPLE.value,
    TreeTag.TUPLE_END.value,
)
_STRING, _SCALAR, _EXPR_ID, _ENUM, _OPAQUE, _ROWS = (
    TreeTag.STRING.value,
    TreeTag.SCALAR.value,
    TreeTag.EXPR_ID.value,
    TreeTag.ENUM.value,
    TreeTag.OPAQUE.value,
    TreeTag.ROWS.value,
)
_NONE, _SKIPPED, _END, _LENGTH_END = (
    TreeTag.NONE.value,
    TreeTag.SKIPPED_EXPRESSION.value,
    TreeTag.END.value,
    TreeTag.LENGTH_END.value,
)
_TOKENS = _SCALAR + _EXPR_ID + _ENUM + _OPAQUE + _ROWS
"""The tags of a token ended by :data:`_END` (``TreeTag`` as plain strings: the decoder compares them per token)."""


class CatalystTreeReader:
    """Reads Catalyst trees of one JVM. The JVM-side functions are built on first use (about a thousand py4j
    calls, once per session) and then serve every query; constructor parameter names are asked once per
    class. One thread at a time."""

    def __init__(self, gateway: Any, classes: JvmClasses, builder: WalkBuilder | None = None) -> None:
        self._gateway = gateway
        self._classes = classes
        self._builder = builder
        self._functions: dict[TreeDetail, Any] = {}
        self._text_holder: Any = None
        self._nodes_holder: Any = None
        self._field_names: dict[str, tuple[str, ...]] = {}
        self._lock = threading.Lock()

    def read(self, tree: Any, *, max_chars: int = MAX_TEXT_CHARS, detail: TreeDetail = FULL) -> TreeRead:
        """The tree rooted at the JVM object ``tree`` (a ``TreeNode``), as plain data, and a handle on each of
        its plan nodes, read in as much ``detail`` as asked. Raises :class:`~spark_lineage.jvm.values.JvmError`
        for a tree of more than ``max_chars`` characters."""
        with self._lock:
            function = self._function(detail.effective())
            text = str(function.apply(tree))
            if len(text) == CHUNK_CHARS:
                builder = self._text_holder.getAndSet(None)
                length = int(builder.length())
                if length > max_chars:
                    raise JvmError(f"the plan is {length} characters of text, more than the {max_chars} allowed")
                text += "".join(
                    str(builder.substring(start, min(start + CHUNK_CHARS, length)))
                    for start in range(CHUNK_CHARS, length, CHUNK_CHARS)
                )
            nodes = self._nodes_holder.getAndSet(None)  # the plan's nodes are ours alone from here
        root = decode(text, self.field_names)
        if not isinstance(root, CatalystNode):
            raise JvmError(f"expected a tree node, read {type(root).__name__}")
        return TreeRead(root, nodes)

    def field_names(self, class_name: str) -> tuple[str, ...]:
        """The constructor parameter names of a tree node class, asked of the JVM once per class (Spark's
        ``ScalaReflection.getConstructorParameterNames``, the names ``toJSON`` uses)."""
        names = self._field_names.get(class_name)
        if names is None:
            try:
                reflection = self._classes("org.apache.spark.sql.catalyst.ScalaReflection")
                joined = reflection.getConstructorParameterNames(self._classes.java_class(class_name)).mkString(",")
                names = tuple(str(joined).split(",")) if str(joined) else ()
            except Exception:  # noqa: BLE001 - a class reflection cannot name: positional names instead
                names = ()
            self._field_names[class_name] = names
        return names

    def _function(self, detail: TreeDetail) -> Any:
        function = self._functions.get(detail)
        if function is None:
            if self._builder is None:
                self._builder = WalkBuilder(self._gateway, self._classes)
            self._text_holder, self._nodes_holder = self._builder.holders()
            function = self._builder.build(MAX_TEXT_CHARS, self._text_holder, self._nodes_holder, detail)
            self._functions[detail] = function
        return function


class TreeRead:
    """A tree read from the JVM, and a handle on each of its plan nodes (by ``CatalystNode.index``), for
    the probes that need more than the tree holds."""

    def __init__(self, tree: CatalystNode, nodes: Any) -> None:
        self.tree = tree
        self._nodes = nodes

    def jvm_node(self, node: CatalystNode) -> Any:
        if node.index is None:
            raise JvmError(f"{node.simple_name} is not a plan node of this tree")
        return self._nodes.get(node.index)


@lru_cache(maxsize=4096)
def expand_class_name(short: str) -> str:
    """A class name as the walker shortens it, in full (asked for every node of every plan read: kept)."""
    for package, prefix in CLASS_PREFIXES:
        if short.startswith(prefix):
            return package + short[len(prefix) :]
    return short


@lru_cache(maxsize=4096)
def _opaque(short: str) -> Opaque:
    """The value that stands for an object of a class the walker writes by its shortened name: one per class
    (an ``Opaque`` never changes; a plan holds dozens of data types and metadata of a few classes)."""
    return Opaque(expand_class_name(short))


def decode(text: str, field_names: Callable[[str], Sequence[str]]) -> TreeValue:
    """Turn the walker's text into records; ``field_names(class)`` names each class's fields. Iterative:
    plans hundreds of nodes deep are common."""
    return _Decoder(text, field_names).decode()


def decode_plan(text: str, field_names: Callable[[str], Sequence[str]]) -> tuple[TreeValue, list[CatalystNode]]:
    """:func:`decode`, and the plan nodes of the tree in the order its text opens them (by ``index``)."""
    decoder = _Decoder(text, field_names)
    root = decoder.decode()
    return root, [node for _, node in sorted(decoder.plan_nodes.items())]


@dataclass
class _Open:
    """A node or collection whose values are being read."""

    end: str
    class_name: str = ""
    kind: str = "list"
    expr_id: int | None = None
    sql: str | None = None
    identity: str | None = None
    index: int | None = None
    output: tuple[Attribute, ...] = ()
    values: list[TreeValue] = field(default_factory=list)


class TextReader:
    """Reads, token by token, a text the JVM-side functions wrote."""

    what = "the text"
    """What the text is, for errors."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.position = 0

    def end(self) -> None:
        """Raise :class:`DecodeError` unless the whole text was read."""
        if self.position != len(self.text):
            raise DecodeError(f"unexpected text at {self.position} of {len(self.text)}")

    def _peek(self) -> str:
        if self.position >= len(self.text):
            raise DecodeError(f"{self.what} ends early")
        return self.text[self.position]

    def _take(self, count: int) -> str:
        end = self.position + count
        if end > len(self.text):
            raise DecodeError(f"{self.what} ends early")
        chunk = self.text[self.position : end]
        self.position = end
        return chunk

    def _until(self, stop: str) -> str:
        end = self.text.find(stop, self.position)
        if end < 0:
            raise _missing(stop, self.position)
        chunk = self.text[self.position : end]
        self.position = end + 1
        return chunk

    def _string(self) -> str:
        """The text of a ``s<n>:<text>`` whose tag was read, or of any ``<n>:<text>``."""
        return self._take(int(self._until(_LENGTH_END)))

    def _token(self) -> str:
        """What precedes the next :attr:`~spark_lineage.jvm.wire.TreeTag.END` (a number, a class name)."""
        return self._until(_END)


class _Decoder(TextReader):
    what = "the tree's text"

    def __init__(self, text: str, field_names: Callable[[str], Sequence[str]]) -> None:
        super().__init__(text)
        self._field_names = field_names
        self._plan_nodes = 0
        self.plan_nodes: dict[int, CatalystNode] = {}
        """The plan nodes decoded, by index."""

    def decode(self) -> TreeValue:
        # One loop over the tokens, with the text's position in a local: a call per token (the reader's
        # ``_take`` and ``_until``) was most of a query's decoding time.
        text, pos, length = self.text, self.position, len(self.text)
        find, expand = text.find, expand_class_name
        # the tags in locals: compared as fast as literals
        string, scalar, expr_id, enum, opaque, tokens = _STRING, _SCALAR, _EXPR_ID, _ENUM, _OPAQUE, _TOKENS
        none, skipped, token_end, length_end = _NONE, _SKIPPED, _END, _LENGTH_END
        stack: list[_Open] = []
        end = ""  # what closes the innermost node or collection open
        values: list[TreeValue] | None = None  # its values so far
        value: TreeValue
        while True:
            if pos >= length:
                raise DecodeError(f"{self.what} ends early")
            tag = text[pos]
            pos += 1
            if tag == end:
                self.position = pos
                value = self._close(stack.pop())
                pos = self.position
                end, values = (stack[-1].end, stack[-1].values) if stack else ("", None)
            elif tag == string:
                colon = find(length_end, pos)
                if colon < 0:
                    raise _missing(length_end, pos)
                first = colon + 1
                pos = first + int(text[pos:colon])
                if pos > length:
                    raise DecodeError(f"{self.what} ends early")
                value = text[first:pos]
            elif tag in tokens:
                semicolon = find(token_end, pos)
                if semicolon < 0:
                    raise _missing(token_end, pos)
                token = text[pos:semicolon]
                pos = semicolon + 1
                if tag == scalar:
                    value = read_scalar(token)
                elif tag == expr_id:
                    value = int(token)
                elif tag == enum:
                    value = token
                elif tag == opaque:
                    value = _opaque(token)
                else:  # rows: z<cls>;<n>;
                    semicolon = find(token_end, pos)
                    if semicolon < 0:
                        raise _missing(token_end, pos)
                    value = Opaque(expand(token), int(text[pos:semicolon]))
                    pos = semicolon + 1
            elif tag == none:
                value = None
            elif tag == skipped:
                value = SKIPPED_EXPRESSION
            else:
                self.position = pos
                opened = self._open(tag)
                pos = self.position
                stack.append(opened)
                end, values = opened.end, opened.values
                continue
            if values is None:
                if pos != length:
                    raise DecodeError(f"unexpected text at {pos} of {length}")
                return value
            values.append(value)

    def _open(self, tag: str) -> _Open:
        """A node or collection whose ``tag`` was just read."""
        if tag == _PLAN:
            class_name = expand_class_name(self._until(_END))
            identity = self._until(_END)
            output: list[Attribute] = []
            if self._peek() in (_OUTPUT, _TYPED_OUTPUT):
                typed = self._take(1) == _TYPED_OUTPUT
                while self._peek() != _END:
                    expr_id = int(self._until(_LENGTH_END))
                    name = self._string()
                    if typed:
                        output.append(Attribute(expr_id, name, self._string(), self._string()))
                    else:
                        output.append(Attribute(expr_id, name))
                self.position += 1
            index = self._plan_nodes
            self._plan_nodes += 1
            return _Open(_PLAN_CHILDREN, class_name, "plan", identity=identity, index=index, output=tuple(output))
        if tag == _EXPRESSION:
            class_name = expand_class_name(self._until(_END))
            named: int | None = None
            if self._peek() == _EXPR_ID_OF:
                self.position += 1
                named = int(self._until(_END))
            sql: str | None = None
            if self._peek() == _SQL_OF:
                self.position += 1
                if self._take(1) != _STRING:
                    raise DecodeError(f"expected the SQL text of {class_name} at {self.position - 1}")
                sql = self._string()
            return _Open(_EXPRESSION_END, class_name, "expression", expr_id=named, sql=sql)
        if tag == _LIST:
            return _Open(_LIST_END)
        if tag == _TUPLE:
            return _Open(_TUPLE_END, kind="tuple")
        raise DecodeError(f"unknown tag {tag!r} at {self.position - 1}")

    def _close(self, opened: _Open) -> TreeValue:
        if opened.kind == "list":
            return opened.values
        if opened.kind == "tuple":
            return tuple(opened.values)
        names = self._field_names(opened.class_name)
        fields = {(names[i] if i < len(names) else f"_{i}"): value for i, value in enumerate(opened.values)}
        if opened.kind == "expression":
            return CatalystNode(opened.class_name, fields, expr_id=opened.expr_id, sql=opened.sql)
        child_identities = []
        while self._peek() != _PLAN_END:
            child_identities.append(self._until(_END))
        self.position += 1
        node = CatalystNode(opened.class_name, fields, is_plan=True, output=opened.output)
        node.index = opened.index
        if opened.index is not None:
            self.plan_nodes[opened.index] = node
        node.identity = opened.identity
        by_identity = {plan.identity: plan for plan in _plan_nodes_in(opened.values)}
        try:
            node.children = tuple(by_identity[identity] for identity in child_identities)
        except KeyError:
            raise DecodeError(f"a child of {opened.class_name} is not among its fields") from None
        return node


def _missing(stop: str, position: int) -> DecodeError:
    return DecodeError(f"missing {stop!r} after {position}")


def _plan_nodes_in(values: Sequence[TreeValue]) -> list[CatalystNode]:
    """The plan nodes among a node's field values (inside sequences, tuples and options too)."""
    found: list[CatalystNode] = []
    for value in values:
        if isinstance(value, CatalystNode):
            if value.is_plan:
                found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(_plan_nodes_in(value))
    return found


def read_scalar(text: str) -> int | float | bool:
    """What ``v<text>;`` holds: a boolean, an integer or a float."""
    if text in ("true", "false"):
        return text == "true"
    try:
        return int(text)
    except ValueError:
        return float(text)


_EXPR_ID_CLASS = "org.apache.spark.sql.catalyst.expressions.ExprId"

_WALKED = (
    "org.apache.spark.sql.catalyst.trees.TreeNode",
    "scala.collection.Seq",
    "scala.Option",
    "scala.Tuple2",
    "scala.Tuple3",
    "java.lang.String",
    "java.lang.Number",
    "java.lang.Boolean",
    "org.apache.spark.sql.catalyst.expressions.ExprId",
    "java.lang.Enum",
)
"""Values the walk reads; a sequence of anything else is written as its first item's class and its size."""


class WalkBuilder(HandleBuilder):
    """Composes the walking function from method handles.

    Most handles here take ``(Object value, StringBuilder out)`` and append what they read of ``value`` to
    ``out``; the others map a value to a string or a boolean.
    """

    _holders: tuple[Any, Any] | None = None

    def holders(self) -> tuple[Any, Any]:
        """Two ``AtomicReference``: where the text of a read is kept while it crosses in pieces, and where the
        plan nodes of the last read are (one thread reads at a time)."""
        if self._holders is None:
            reference = self._classes("java.util.concurrent.atomic.AtomicReference")
            self._holders = (reference(), reference())
        return self._holders

    def _append(self) -> Any:
        """``(out, String)``: ``StringBuilder.append``."""
        return self._once(
            "append", lambda: self.lookup.findVirtual(self.SB, "append", self._method_type(self.SB, self.STR))
        )

    def _write(self, text: str) -> Any:
        """``(value, out)``: append a constant."""

        def make() -> Any:
            handle = self._void(self.mh.insertArguments(self._append(), 1, self._objects(text)))
            return self.mh.dropArguments(handle, 0, self._types(self.OBJ))

        return self._once(("write", text), make)

    def _write_text_of(self, text_of: Any, end: str = TreeTag.END.value) -> Any:
        """``(value, out)``: append ``text_of(value)`` (a ``(Object)String``) then ``end``."""
        append = self._append()
        handle = self._void(self.mh.filterArguments(append, 1, self._handles(text_of)))
        swapped = self.mh.permuteArguments(handle, self._method_type(self.VOID, self.OBJ, self.SB), self._ints(1, 0))
        return self._then(swapped, self._write(end)) if end else swapped

    def _text(self, handle: Any) -> Any:
        """``(Object)String``: the text of what a one-argument handle returns (boxed if primitive)."""
        boxed = handle.asType(self._method_type(self.OBJ, self.OBJ))
        return self._after(boxed, self._method("java.lang.Object", "toString"))

    def _class_name(self) -> Any:
        """``(Object)String``: the value's class name, with well-known packages shortened."""

        def make() -> Any:
            name = self.full_class_name()
            replace = self._method("java.lang.String", "replace", "java.lang.CharSequence", "java.lang.CharSequence")
            for package, short in CLASS_PREFIXES:
                name = self._after(name, self.mh.insertArguments(replace, 1, self._objects(package, short)))
            return self.mh.explicitCastArguments(name, self._method_type(self.STR, self.OBJ))

        return self._once("class name", make)

    def full_class_name(self) -> Any:
        """``(Object)String``: the value's class name, as ``Class.getName`` gives it."""
        return self._once(
            "full class name",
            lambda: self._after(
                self._method("java.lang.Object", "getClass"), self._method("java.lang.Class", "getName")
            ),
        )

    def _for_each(self, iterator_of: Any, walk: Any, iterator_class: str = "scala.collection.Iterator") -> Any:
        """``(value, out)``: ``walk(item, out)`` for each item of ``iterator_of(value)`` (a Scala iterator, or
        another ``iterator_class`` with ``hasNext`` and ``next``)."""
        iterator = self._classes.java_class(iterator_class)
        start = self.mh.dropArguments(
            self.mh.explicitCastArguments(iterator_of, self._method_type(iterator, self.OBJ)), 1, self._types(self.SB)
        )
        has_next = self.lookup.findVirtual(iterator, "hasNext", self._method_type(self.BOOL))
        next_item = self.lookup.findVirtual(iterator, "next", self._method_type(self.OBJ))
        keep_going = self.mh.dropArguments(has_next, 1, self._types(self.OBJ, self.SB))
        step = self.mh.dropArguments(
            self.mh.filterArguments(walk, 0, self._handles(next_item)), 1, self._types(self.OBJ)
        )
        same_iterator = self.mh.dropArguments(self.mh.identity(iterator), 1, self._types(self.OBJ, self.SB))
        return self._void(self.mh.whileLoop(start, keep_going, self.mh.foldArguments(same_iterator, step)))

    # --- the walk ----------------------------------------------------------------------------------------

    def build(self, max_chars: int, holder: Any, nodes: Any, detail: TreeDetail) -> Any:
        """A ``java.util.function.Function`` from a tree node to the first piece of its text (the whole
        ``StringBuilder`` goes into the ``holder`` reference). Every plan node met is added, in the order it
        is written, to a new list the ``nodes`` reference holds, so that Python can ask for any of them.
        Without expressions (:data:`SHAPE`), expressions are written as ``x`` and plan nodes without their
        output: the plan's shape only, for plans too large to read whole."""
        return self._function(self.walk(max_chars, nodes, detail), holder, nodes)

    def walk(self, max_chars: int, nodes: Any, detail: TreeDetail) -> Any:
        """``(tree, out)``: write the tree's text to ``out``, adding each plan node met, in the order it is
        written, to the list the ``nodes`` reference holds."""
        detail = detail.effective()
        key = ("walk", max_chars, getattr(nodes, "_target_id", id(nodes)), detail)
        return self._once(key, lambda: self._walk(max_chars, nodes, detail))

    def _walk(self, max_chars: int, nodes: Any, detail: TreeDetail) -> Any:
        expressions, descriptions = detail.expressions, detail.sql
        walk_type = self._method_type(self.VOID, self.OBJ, self.SB)
        call_site = self._classes("java.lang.invoke.MutableCallSite")
        site = call_site(walk_type)
        walk = site.dynamicInvoker()
        # What a plan node's own fields are walked with: with descriptions, its expressions (in sequences and
        # options too) carry their SQL text; their sub-expressions are walked plainly.
        field_site = call_site(walk_type) if descriptions else None
        walk_fields = field_site.dynamicInvoker() if field_site is not None else walk

        class_name = self._class_name()
        product_items = self._method("scala.Product", "productIterator")
        identity = self._text(self._method("java.lang.System", "identityHashCode", "java.lang.Object"))
        too_long = self._too_long(max_chars)
        current_nodes = self.mh.insertArguments(
            self._method("java.util.concurrent.atomic.AtomicReference", "get"), 0, self._objects(nodes)
        )
        remember = self.mh.dropArguments(
            self._void(self.mh.foldArguments(self._method("java.util.List", "add", "java.lang.Object"), current_nodes)),
            1,
            self._types(self.SB),
        )
        plan_steps = [
            too_long,
            remember,
            self._write(TreeTag.PLAN.value),
            self._write_text_of(class_name),
            self._write_text_of(identity),
        ]
        if expressions or detail.output_types:
            plan_steps.append(self._output(detail.output_types))
        plan_steps += [
            self._for_each(product_items, walk_fields),
            self._write(TreeTag.PLAN_CHILDREN.value),
            self._for_each(
                self._after(
                    self._method("org.apache.spark.sql.catalyst.trees.TreeNode", "children"),
                    self._method("scala.collection.Seq", "iterator"),
                ),
                self._write_text_of(identity),
            ),
            self._write(TreeTag.PLAN_END.value),
        ]
        plan_node = self._then(*plan_steps)
        if expressions:
            expr_id = self._after(
                self._method("org.apache.spark.sql.catalyst.expressions.NamedExpression", "exprId"),
                self._method("org.apache.spark.sql.catalyst.expressions.ExprId", "id"),
            )
            head = [
                too_long,
                self._write(TreeTag.EXPRESSION.value),
                self._write_text_of(class_name),
                self._choose(
                    [
                        (
                            self._is("org.apache.spark.sql.catalyst.expressions.NamedExpression"),
                            self._then(self._write(TreeTag.EXPR_ID_OF.value), self._write_text_of(self._text(expr_id))),
                        )
                    ],
                    otherwise=self._write(""),
                ),
            ]
            tail = [self._for_each(product_items, walk), self._write(TreeTag.EXPRESSION_END.value)]
            expression_node = self._then(*head, *tail)
            if field_site is not None:
                described = self._then(*head, self._sql_of(), *tail)
                field_site.setTarget(
                    self._choose(
                        [
                            (self._is("org.apache.spark.sql.catalyst.plans.QueryPlan"), walk),
                            (self._is("org.apache.spark.sql.catalyst.expressions.Expression"), described),
                            (self._is("scala.collection.Seq"), self._sequence(walk_fields, class_name)),
                            (self._is("scala.Option"), self._option(walk_fields)),
                        ],
                        otherwise=walk,
                    )
                )
        else:
            expression_node = self._write(TreeTag.SKIPPED_EXPRESSION.value)
        cases = [
            (self._method("java.util.Objects", "isNull", "java.lang.Object"), self._write(TreeTag.NONE.value)),
            (self._is("org.apache.spark.sql.catalyst.plans.QueryPlan"), plan_node),
            (self._is("org.apache.spark.sql.catalyst.trees.TreeNode"), expression_node),
            (self._is("scala.collection.Seq"), self._sequence(walk, class_name)),
            (self._is("scala.Option"), self._option(walk)),
            (self._is("scala.Tuple2"), self._tuple(walk)),
            (self._is("scala.Tuple3"), self._tuple(walk)),
            *self._plain_values(),
        ]
        site.setTarget(
            self._choose(
                cases, otherwise=self._then(self._write(TreeTag.OPAQUE.value), self._write_text_of(class_name))
            )
        )
        return walk

    def _sql_of(self) -> Any:
        """``(expression, out)``: ``qs<n>:<text>``, the expression's ``sql``; nothing when it throws (an
        expression Spark cannot write as SQL)."""

        def make() -> Any:
            sql = self._as_object(self._method("org.apache.spark.sql.catalyst.expressions.Expression", "sql"))
            written = self.mh.filterArguments(
                self._then(self._write(TreeTag.SQL_OF.value), self.string()), 0, self._handles(sql)
            )
            return self._rolled_back(written, self._write(""))

        return self._once("sql of", make)

    def _counted(self, text_of: Any) -> Any:
        """``(value, out)``: ``<n>:<text>``, the text ``text_of(value)`` (a ``(Object)String``) and its length
        in code points before it."""
        code_points = self._after(
            text_of,
            self._after(
                self._method("java.lang.String", "codePoints"), self._method("java.util.stream.IntStream", "count")
            ),
        )
        return self._then(
            self._write_text_of(self._text(code_points), TreeTag.LENGTH_END.value),
            self._write_text_of(text_of, ""),
        )

    def _output(self, typed: bool = False) -> Any:
        """``(plan, out)``: ``@`` and ``<exprId>:<n>:<name>`` for each attribute of the plan's output, then
        ``;``; ``typed``: ``&`` and ``<exprId>:<n>:<name><n>:<type><n>:<metadata>``, each attribute's data
        type name and metadata (as JSON) too. A plan whose output cannot be computed writes no attributes."""
        named = "org.apache.spark.sql.catalyst.expressions.NamedExpression"
        name = self._method(named, "name")
        parts = [
            self._write_text_of(
                self._text(self._after(self._method(named, "exprId"), self._method(_EXPR_ID_CLASS, "id"))),
                TreeTag.LENGTH_END.value,
            ),
            self._counted(name),
        ]
        if typed:
            data_type = self._after(
                self._method("org.apache.spark.sql.catalyst.expressions.Expression", "dataType"),
                self._method("org.apache.spark.sql.types.DataType", "typeName"),
            )
            metadata = self._after(
                self._method(named, "metadata"), self._method("org.apache.spark.sql.types.Metadata", "json")
            )
            parts += [self._counted(data_type), self._counted(metadata)]
        attributes = self._for_each(
            self._after(
                self._method("org.apache.spark.sql.catalyst.plans.QueryPlan", "output"),
                self._method("scala.collection.Seq", "iterator"),
            ),
            self._then(*parts),
        )
        guarded = self._rolled_back(attributes, self._write(""))
        tag = TreeTag.TYPED_OUTPUT if typed else TreeTag.OUTPUT
        return self._then(self._write(tag.value), guarded, self._write(TreeTag.END.value))

    def string(self) -> Any:
        """``(value, out)``: ``s<n>:<text>``, the value's text and its length in code points."""

        def make() -> Any:
            code_points = self._after(
                self._method("java.lang.String", "codePoints"), self._method("java.util.stream.IntStream", "count")
            )
            return self._after_text(
                self._then(
                    self._write(TreeTag.STRING.value),
                    self._write_text_of(self._text(code_points), TreeTag.LENGTH_END.value),
                    self._write_text_of(self._method("java.lang.Object", "toString"), ""),
                )
            )

        return self._once("string", make)

    def scalar(self) -> Any:
        """``(value, out)``: ``v<text>;``, a number or a boolean."""
        return self._once(
            "scalar",
            lambda: self._then(
                self._write(TreeTag.SCALAR.value), self._write_text_of(self._method("java.lang.Object", "toString"))
            ),
        )

    def _after_text(self, writer: Any) -> Any:
        """``writer`` given the value's text (``toString``), computed once."""
        text = self._method("java.lang.Object", "toString").asType(self._method_type(self.OBJ, self.OBJ))
        return self.mh.filterArguments(writer, 0, self._handles(text))

    def _plain_values(self) -> list[tuple[Any, Any]]:
        string, scalar = self.string(), self.scalar()
        expr_id = self._then(
            self._write(TreeTag.EXPR_ID.value),
            self._write_text_of(self._text(self._method("org.apache.spark.sql.catalyst.expressions.ExprId", "id"))),
        )
        enum = self._then(self._write(TreeTag.ENUM.value), self._write_text_of(self._method("java.lang.Enum", "name")))
        return [
            (self._is("java.lang.String"), string),
            (self._is("java.lang.Number"), scalar),
            (self._is("java.lang.Boolean"), scalar),
            (self._is("org.apache.spark.sql.catalyst.expressions.ExprId"), expr_id),
            (self._is("java.lang.Enum"), enum),
        ]

    def _sequence(self, walk: Any, class_name: Any) -> Any:
        """``[...]`` of the items, or ``z<cls>;<n>;`` when the first item is not something the walk reads."""
        seq = "scala.collection.Seq"
        walked = self._then(
            self._write(TreeTag.LIST.value),
            self._for_each(self._method(seq, "iterator"), walk),
            self._write(TreeTag.LIST_END.value),
        )
        head = self._method(seq, "head")
        readable = self._choose(
            [(self._method("java.util.Objects", "isNull", "java.lang.Object"), self._constant(True))]
            + [(self._is(name), self._constant(True)) for name in _WALKED],
            otherwise=self._constant(False),
        )
        head_readable = self._after(head, readable)
        readable_items = self.mh.guardWithTest(self._method(seq, "isEmpty"), self._constant(True), head_readable)
        skipped = self._then(
            self._write(TreeTag.ROWS.value),
            self._write_text_of(self._after(head, class_name)),
            self._write_text_of(self._text(self._method(seq, "size"))),
        )
        return self.mh.guardWithTest(readable_items, walked, skipped)

    def _option(self, walk: Any) -> Any:
        option = "scala.Option"
        read = self.mh.filterArguments(walk, 0, self._handles(self._method(option, "get")))
        return self.mh.guardWithTest(self._method(option, "isDefined"), read, self._write(TreeTag.NONE.value))

    def _tuple(self, walk: Any) -> Any:
        return self._then(
            self._write(TreeTag.TUPLE.value),
            self._for_each(self._method("scala.Product", "productIterator"), walk),
            self._write(TreeTag.TUPLE_END.value),
        )

    def _too_long(self, max_chars: int) -> Any:
        """``(value, out)``: throw once ``out`` reaches ``max_chars``, so a runaway plan stops the walk (the
        JDK's ``Objects.checkIndex`` throws ``IndexOutOfBoundsException`` for an index past the end)."""
        length = self.lookup.findVirtual(self.SB, "length", self._method_type(self.INT))
        check = self.mh.insertArguments(
            self._method("java.util.Objects", "checkIndex", "int", "int"), 1, self._objects(max_chars)
        )
        return self.mh.dropArguments(self._void(self._after(length, check)), 0, self._types(self.OBJ))

    def _function(self, walk: Any, holder: Any, nodes: Any) -> Any:
        """``java.util.function.Function``: put a new list into ``nodes``, walk the value into a new
        ``StringBuilder``, keep the builder in ``holder`` and answer its first :data:`CHUNK_CHARS` characters
        (all of it, for most plans)."""
        new_builder = self.lookup.findConstructor(self.SB, self._method_type(self.VOID))
        walk_into = self.mh.permuteArguments(walk, self._method_type(self.VOID, self.SB, self.OBJ), self._ints(1, 0))
        keep = self.mh.dropArguments(
            self._void(
                self.mh.insertArguments(
                    self._method("java.util.concurrent.atomic.AtomicReference", "set", "java.lang.Object"),
                    0,
                    self._objects(holder),
                )
            ),
            1,
            self._types(self.OBJ),
        ).asType(self._method_type(self.VOID, self.SB, self.OBJ))
        substring = self.lookup.findVirtual(self.SB, "substring", self._method_type(self.STR, self.INT, self.INT))
        from_start = self.mh.permuteArguments(
            self.mh.insertArguments(substring, 1, self._objects(0)),
            self._method_type(self.STR, self.INT, self.SB),
            self._ints(1, 0),
        )
        first_end = self._after(
            self.lookup.findVirtual(self.SB, "length", self._method_type(self.INT)),
            self.mh.insertArguments(self._method("java.lang.Math", "min", "int", "int"), 1, self._objects(CHUNK_CHARS)),
        )
        first_chunk = self.mh.dropArguments(self.mh.foldArguments(from_start, first_end), 1, self._types(self.OBJ))
        run = self.mh.foldArguments(
            self.mh.foldArguments(self.mh.foldArguments(first_chunk, keep), walk_into), new_builder
        )
        new_list = self.lookup.findConstructor(
            self._classes.java_class("java.util.ArrayList"), self._method_type(self.VOID)
        ).asType(self._method_type(self.OBJ))
        fresh_nodes = self.mh.dropArguments(
            self.mh.foldArguments(
                self.mh.insertArguments(
                    self._method("java.util.concurrent.atomic.AtomicReference", "set", "java.lang.Object"),
                    0,
                    self._objects(nodes),
                ),
                new_list,
            ),
            0,
            self._types(self.OBJ),
        )
        proxies = self._classes("java.lang.invoke.MethodHandleProxies")
        return proxies.asInterfaceInstance(
            self._classes.java_class("java.util.function.Function"), self.mh.foldArguments(run, fresh_nodes)
        )
