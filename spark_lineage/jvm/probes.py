"""The generic probe evaluators: handlers say, as :class:`~spark_lineage.plan.Probe` accessor chains, which
values they want from which classes; this evaluates the chains on JVM objects, and knows nothing about what
the values mean. Two ways, which read the same values:

- in the JVM, while the plan is read (:class:`ProbeCompiler`, :class:`JvmProbes`): each class met gets a
  JVM-side function composed of method handles that writes its probes' values beside the plan's text, so a
  plan's probes cost no round trip whatever its size;
- from Python (:class:`ProbeEvaluator`), a round trip or more per value: for what the JVM-side functions leave
  to Python (the kinds that need more than accessor chains, resolved by the functions the caller passes in
  ``resolvers``: a catalog lookup, a nested plan; a class met for the first time; a value that failed, for its
  error). Collections and maps are joined JVM-side with ``mkString`` and cross in one call; a Scala
  ``Option`` is unwrapped with ``orNull`` in one call; chains that share a prefix share their calls.

The Spark reader (:mod:`spark_lineage.jvm.spark`) supplies the resolvers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Union

from spark_lineage.errors import DecodeError, JvmError, NeedsPythonError
from spark_lineage.jvm.catalyst_tree import TextReader, WalkBuilder, expand_class_name, read_scalar
from spark_lineage.jvm.values import JvmClasses, message, parse_map, parse_metrics, unwrap_option
from spark_lineage.jvm.wire import ITEM_SEP, ProbeTag
from spark_lineage.plan import CapturedNode, CatalystNode, Probe, simple_class_name

log = logging.getLogger(__name__)

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
        self.on_capture: Callable[[str], object] | None = None
        """Told the name of each class an object is captured of (to register a JVM-side prober for it)."""

    def add_resolver(self, kind: str, resolver: Resolver) -> None:
        self._resolvers[kind] = resolver

    def wants(self, simple_class_name: str) -> bool:
        return bool(self._probes_for(simple_class_name))

    def capture(self, obj: Any, class_name: str | None = None, tree: CatalystNode | None = None) -> CapturedNode:
        """``obj`` reduced to its class name and the values its class's handler probes; ``tree`` is the plan
        node ``obj`` is, when it is one. A probe that fails is recorded in ``errors``; the others are still
        read."""
        class_name = class_name or str(obj.getClass().getName())
        if self.on_capture is not None and "." in class_name:
            self.on_capture(class_name)
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
        if kind in _JOINED_KINDS:
            return converted(str(value.mkString(ITEM_SEP)), spec)
        if kind == "count":
            from py4j.java_collections import JavaArray

            return len(value) if isinstance(value, JavaArray) else int(value.size())
        if kind == "node":
            return self.capture(value)
        resolver = self._resolvers.get(kind)
        if resolver is None:
            raise JvmError(f"unknown probe kind {kind!r}")
        return resolver(value)


def converted(joined: str, spec: Probe) -> Any:
    """A ``strings``, ``map`` or ``metrics`` probe's value, from its items joined JVM-side."""
    if spec.kind == "strings":
        return joined.split(ITEM_SEP) if joined else []
    if spec.kind == "map":
        entries = parse_map(joined)
        if spec.keys is None:
            return entries
        return {key: text for key, text in entries.items() if key.lower() in spec.keys}
    return parse_metrics(joined)


# --- probes evaluated in the JVM -------------------------------------------------------------------------------


RESOLVED_KINDS: frozenset[str] = frozenset({"v2table", "tree", "cached_plan", "qualified_path", "rdd_graph"})
"""The probe kinds only Python reads (:attr:`ProbeTag.RESOLVE`); ``table`` is read in the JVM when its value is a
``CatalogTable`` that holds its location."""
_JOINED_KINDS = frozenset({"strings", "map", "metrics"})
_CATALOG_TABLE = "org.apache.spark.sql.catalyst.catalog.CatalogTable"
_PLAIN = ("java.lang.String", "java.lang.Number", "java.lang.Boolean", "java.lang.Character")
_SCALARS = (
    "java.lang.Boolean",
    "java.lang.Integer",
    "java.lang.Long",
    "java.lang.Short",
    "java.lang.Byte",
    "java.lang.Double",
    "java.lang.Float",
)


class ProbeCompiler(WalkBuilder):
    """Composes, for each class met, a JVM-side function that writes what its handler probes (a *prober*), and
    the dispatch that finds an object's prober by its class name: probing a plan then costs no round trip.

    Accessors are found once, on the class the prober is for and on each accessor's declared type, and called
    directly; where a declared type says nothing (an ``Option``'s value, a field, a generic), the method is
    found at each call on the value's own class, as py4j would. Anything a prober cannot read as Python
    would (a kind that needs a catalog, a value py4j brings across differently, an exception) it marks for
    Python to read. What probers share (how each kind is written, the guards) is composed once, so that a
    class costs a few round trips per accessor of its probes.
    """

    _probers: Any = None
    _missed: Any = None
    _failed_value: Any = None

    def set_up_probes(self, probers: Any, missed: Any) -> None:
        """Probers go in ``probers`` (a ``Map`` by class name); they set ``missed`` (an ``AtomicBoolean``) when
        they leave something to Python."""
        self._probers, self._missed = probers, missed
        self._failed_value = self._classes("java.lang.Object")()

    def dispatch(self) -> Any:
        """``(value, out)``: run the prober registered for the value's class, or write :attr:`ProbeTag.UNKNOWN`."""

        def make() -> Any:
            prober_type = self._method_type(self.VOID, self.OBJ, self.SB)
            handle_class = self._classes.java_class("java.lang.invoke.MethodHandle")
            get = self.mh.insertArguments(
                self._method("java.util.Map", "get", "java.lang.Object"), 0, self._objects(self._probers)
            )
            prober_of = self._after(self.full_class_name(), get).asType(self._method_type(handle_class, self.OBJ))
            invoke = self.mh.exactInvoker(prober_type)
            unknown = self.mh.dropArguments(self._left_to_python(ProbeTag.UNKNOWN), 0, self._types(handle_class))
            chosen = self.mh.guardWithTest(
                self._is_null().asType(self._method_type(self.BOOL, handle_class)), unknown, invoke
            )
            return self.mh.foldArguments(chosen, self.mh.dropArguments(prober_of, 1, self._types(self.SB)))

        return self._once("dispatch", make)

    def _left_to_python(self, tag: ProbeTag) -> Any:
        """``(value, out)``: write ``tag`` and set the missed flag: Python reads what the tag stands for."""

        return self._once(("left to Python", tag), lambda: self._then(self._write(tag.value), self._miss()))

    def _miss(self) -> Any:
        """``(value, out)``: set the missed flag (the plan's nodes are kept for Python)."""
        return self._once(
            "miss",
            lambda: self.mh.dropArguments(
                self.mh.insertArguments(
                    self._method("java.util.concurrent.atomic.AtomicBoolean", "set", "boolean"),
                    0,
                    self._objects(self._missed, True),
                ),
                0,
                self._types(self.OBJ, self.SB),
            ),
        )

    def _located(self) -> Any:
        """``(CatalogTable)boolean``: the table names its database and its location (what Python reads of it
        from the catalog otherwise); ``false`` when that cannot be read."""
        defined = self._method("scala.Option", "isDefined")
        database = self._after(
            self.mh.filterReturnValue(self._dynamic("identifier"), self._dynamic("database")), defined
        )
        location = self._after(
            self.mh.filterReturnValue(self._dynamic("storage"), self._dynamic("locationUri")), defined
        )
        both = self.mh.guardWithTest(database, location, self._constant(False))
        return self.mh.catchException(
            both,
            self._throwable(),
            self.mh.dropArguments(self._constant(False), 0, self._types(self._throwable())),
        )

    def prober(self, class_name: str, probes: Mapping[str, Probe]) -> Any:
        """``(value, out)``: the values ``probes`` read of an object of the class ``class_name``."""
        if not probes:
            return self._write(ProbeTag.NO_PROBES.value)
        owner = self._owner(class_name)
        entries = [self._entry(owner, class_name, spec) for spec in probes.values()]
        return self._then(self._write(ProbeTag.PROBES.value), *entries, self._write(ProbeTag.END.value))

    def _owner(self, class_name: str) -> Any:
        try:
            return self._classes.java_class(class_name)
        except Exception:  # noqa: BLE001 - a class no loader of ours sees: its methods are found at each call
            return None

    def _entry(self, owner: Any, owner_name: str, spec: Probe) -> Any:
        if spec.kind in RESOLVED_KINDS:
            read = self._left_to_python(ProbeTag.RESOLVE)
        else:
            path = self._path(owner, owner_name, spec.path)
            # A path that throws gives the failed value, which the writer writes as FAILED.
            guarded = self.mh.catchException(path, self._throwable(), self._failed())
            read = self.mh.filterArguments(self._value_writer(spec.kind), 0, self._handles(guarded))
        if spec.if_field is None:
            return read
        test = self.mh.catchException(
            self._after(self._getter(owner, owner_name, spec.if_field)[0], self._empty()),
            self._throwable(),
            self._once(
                "false on failure",
                lambda: self.mh.dropArguments(self._constant(False), 0, self._types(self._throwable())),
            ),
        )
        return self.mh.guardWithTest(test, self._write(ProbeTag.SKIPPED.value), read)

    def _throwable(self) -> Any:
        return self._classes.java_class("java.lang.Throwable")

    def _failed(self) -> Any:
        """``(Throwable, value)Object``: the failed value."""
        return self._once(
            "failed value",
            lambda: self.mh.dropArguments(
                self.mh.constant(self.OBJ, self._failed_value), 0, self._types(self._throwable(), self.OBJ)
            ),
        )

    def _empty(self) -> Any:
        """``(Object)boolean``: ``null``, an empty ``Option`` or ``false`` (what ``Probe.if_field`` skips)."""
        return self._once(
            "empty",
            lambda: self._choose(
                [
                    (self._is_null(), self._constant(True)),
                    (self._is("scala.Option"), self._method("scala.Option", "isEmpty")),
                    (
                        self._is("java.lang.Boolean"),
                        self.mh.insertArguments(
                            self._method("java.lang.Object", "equals", "java.lang.Object"), 0, self._objects(False)
                        ),
                    ),
                ],
                otherwise=self._constant(False),
            ),
        )

    def _path(self, owner: Any, owner_name: str, steps: tuple[str, ...]) -> Any:
        """``(Object)Object``: the value at the end of ``steps`` (``null`` as soon as one step gives ``null``)."""
        path = None
        declared, declared_name = owner, owner_name
        for step in steps:
            if step == "?":
                read, declared = self._unwrap_option(), None
            elif step.startswith("@"):
                read, declared = self._read_field(step[1:]), None
            elif step.endswith(")"):
                name, argument = step[:-1].split("(", 1)
                read, declared = self._dynamic(name, argument), None
            else:
                read, declared, declared_name = self._getter(declared, declared_name, step)
            if path is None:
                path = read
            else:  # every step is (Object)Object
                unless_null = self.mh.guardWithTest(
                    self._is_null(), self._once("identity", lambda: self.mh.identity(self.OBJ)), read
                )
                path = self.mh.filterReturnValue(path, unless_null)
        return path if path is not None else self.mh.identity(self.OBJ)

    def _getter(self, owner: Any, owner_name: str, name: str) -> tuple[Any, Any, str]:
        """``(Object)Object`` calling the public zero-argument method ``name``, and its declared return type and
        that type's name (``None`` and ``""`` when unknown or primitive): found on ``owner`` when it has it, else
        at each call on the value's class."""
        if owner is None:
            return self._dynamic(name), None, ""
        key = ("getter", owner_name, name)
        found = self._made.get(key)
        if found is None:
            found = (self._dynamic(name), None, "")
            # commons-lang3 answers null for a method that is not there or not public (getMethod would throw,
            # and PySpark converts each exception in a dozen round trips)
            utils = self._classes("org.apache.commons.lang3.reflect.MethodUtils")
            method = utils.getAccessibleMethod(owner, name, self._types())
            if method is not None:
                try:
                    handle = self.mh.explicitCastArguments(
                        self.lookup.unreflect(method), self._method_type(self.OBJ, self.OBJ)
                    )
                except Exception:  # noqa: BLE001 - a static method: found at each call
                    pass
                else:
                    returns = method.getReturnType()
                    returns_name = str(returns.getName())
                    primitive = "." not in returns_name and returns_name[:1].islower()
                    found = (handle, None, "") if primitive else (handle, returns, returns_name)
            self._made[key] = found
        return found

    def _unwrap_option(self) -> Any:
        """``(Object)Object``: an ``Option``'s value or ``null``; a string, number or boolean as it is (py4j
        brings those across as values); anything else throws, as py4j's ``orNull`` call would."""

        def make() -> Any:
            unwrap = self.mh.guardWithTest(
                self._method("scala.Option", "isDefined"),
                self._method("scala.Option", "get"),
                self._returning(None, self.OBJ),
            )
            plain = [(self._is(name), self.mh.identity(self.OBJ)) for name in _PLAIN]
            return self._choose([(self._is("scala.Option"), unwrap), *plain], otherwise=self._dynamic("orNull"))

        return self._once("unwrap option", make)

    def _value_writer(self, kind: str) -> Any:
        """``(value, out)``: a probe's value, as its kind brings it across; :attr:`ProbeTag.FAILED` for the
        failed value, or should writing it throw."""
        return self._once(("value writer", kind), lambda: self._make_value_writer(kind))

    def _make_value_writer(self, kind: str) -> Any:
        failed = self._left_to_python(ProbeTag.FAILED)
        none = (self._is_null(), self._write(ProbeTag.NONE.value))
        is_failed = self.mh.insertArguments(
            self._method("java.util.Objects", "equals", "java.lang.Object", "java.lang.Object"),
            0,
            self._objects(self._failed_value),
        )
        if kind == "value":
            writer = self._choose(
                [
                    none,
                    (self._is("java.lang.String"), self.string()),
                    (self._is("java.lang.Character"), self.string()),
                    *((self._is(name), self.scalar()) for name in _SCALARS),
                    (self._is("java.math.BigDecimal"), failed),  # py4j brings a Decimal: Python reads it
                    (self._is("[B"), failed),  # and a bytearray
                ],
                otherwise=self.string(),
            )
        elif kind in _JOINED_KINDS:
            joined = self._dynamic("mkString", ITEM_SEP).asType(self._method_type(self.OBJ, self.OBJ))
            writer = self._choose([none], otherwise=self.mh.filterArguments(self.string(), 0, self._handles(joined)))
        elif kind == "count":
            length = self._method("java.lang.reflect.Array", "getLength", "java.lang.Object").asType(
                self._method_type(self.OBJ, self.OBJ)
            )
            is_array = self._after(
                self._method("java.lang.Object", "getClass"), self._method("java.lang.Class", "isArray")
            )
            writer = self._choose(
                [none, (is_array, self.mh.filterArguments(self.scalar(), 0, self._handles(length)))],
                otherwise=self.mh.filterArguments(self.scalar(), 0, self._handles(self._dynamic("size"))),
            )
        else:
            nested = self._then(
                self._write(ProbeTag.NESTED.value), self._write_text_of(self._class_name()), self.dispatch()
            )
            if kind == "node":
                writer = self._choose([none, *((self._is(name), failed) for name in _PLAIN)], otherwise=nested)
            elif kind == "table":
                # Python completes a table without its location from the catalog: the plan's nodes are kept.
                completed = self.mh.guardWithTest(
                    self._located(), self.mh.empty(self._method_type(self.VOID, self.OBJ, self.SB)), self._miss()
                )
                table = self._then(self._write(ProbeTag.TABLE.value), nested, completed)
                writer = self._choose(
                    [none, (self._is(_CATALOG_TABLE), table)], otherwise=self._left_to_python(ProbeTag.RESOLVE)
                )
            else:
                raise JvmError(f"unknown probe kind {kind!r}")
        return self.mh.guardWithTest(is_failed, failed, self._rolled_back(writer, failed))


class _Nested:
    """A ``node`` probe's value as the JVM wrote it: its class and what its class probes."""

    __slots__ = ("class_name", "probes")

    def __init__(self, class_name: str, probes: _Probed) -> None:
        self.class_name = class_name
        self.probes = probes


class _Table:
    """A ``table`` probe's ``CatalogTable``, probed."""

    __slots__ = ("nested",)

    def __init__(self, nested: _Nested) -> None:
        self.nested = nested


_RawValue = Union[None, str, int, float, bool, _Nested, _Table, ProbeTag]
_Probed = Union[ProbeTag, list[_RawValue]]
"""What the JVM wrote of one object: :attr:`ProbeTag.NO_PROBES`, :attr:`ProbeTag.UNKNOWN`, or its values."""


class JvmProbes:
    """The probers of one reader (one thread), by class name, registered as classes are met; and the reading
    of what they write into the plan's nodes.

    A class met for the first time is probed the Python way (round trips) and registered, so that the next
    plan that holds it is probed in the JVM. Whatever a prober leaves to Python (a catalog lookup, a failure,
    a class not registered yet, a prober older than its handler's probes) makes its plan node probed the
    Python way, so the values are always the ones :class:`ProbeEvaluator` reads.
    """

    def __init__(self, compiler: ProbeCompiler, classes: JvmClasses, probes_for: ProbeLookup) -> None:
        self._compiler = compiler
        self._probes_for = probes_for
        self._registered: dict[str, Mapping[str, Probe]] = {}
        self._unregistered: set[str] = set()
        self._unregistrable: set[str] = set()
        self.probers = classes("java.util.concurrent.ConcurrentHashMap")()
        self.missed = classes("java.util.concurrent.atomic.AtomicBoolean")()
        """Set by a prober that left something to Python: the plan's nodes are kept for it."""
        compiler.set_up_probes(self.probers, self.missed)
        self.dispatch = compiler.dispatch()
        """``(value, out)``: what the value's class probes."""

    def met(self, class_name: str) -> None:
        """A class met (a plan node's, or a probed value's): registered at the next :meth:`register_met`."""
        if class_name not in self._registered and class_name not in self._unregistrable:
            self._unregistered.add(class_name)

    def register_met(self) -> None:
        """Register a prober for each class met and not registered yet (a few round trips each, once). A class
        whose prober cannot be made is probed the Python way from then on. Never raises."""
        while self._unregistered:
            class_name = self._unregistered.pop()
            probes = self._probes_for(simple_class_name(class_name))
            try:
                prober = self._compiler.prober(class_name, probes)
                self.probers.put(class_name, prober)
            except Exception:  # its nodes are probed the Python way, as before
                log.debug("spark_lineage: no JVM-side prober for %s", class_name, exc_info=True)
                self._unregistrable.add(class_name)
                continue
            self._registered[class_name] = probes

    def read(self, text: str, plan_nodes: Iterable[CatalystNode]) -> list[CatalystNode]:
        """Set ``probed`` on each of a tree's ``plan_nodes`` (in the order the tree's text opened them) whose
        class has probes, from ``text`` (what the probers wrote of them, in that order). Returns the plan nodes
        to probe the Python way."""
        reader = _ProbeReader(text)
        left: list[CatalystNode] = []
        for node in plan_nodes:
            raw = reader.probed()
            probes = self._probes_for(node.simple_name)
            if not probes:
                if raw is ProbeTag.UNKNOWN:
                    self.met(node.class_name)
                continue
            try:
                node.probed = self._captured(node.class_name, raw, probes, node)
            except NeedsPythonError:
                left.append(node)
        reader.end()
        return left

    def _captured(
        self, class_name: str, raw: _Probed, probes: Mapping[str, Probe], tree: CatalystNode | None
    ) -> CapturedNode:
        if raw is ProbeTag.UNKNOWN or (raw is ProbeTag.NO_PROBES and probes):
            self.met(class_name)
            raise NeedsPythonError
        node = CapturedNode(class_name=class_name, tree=tree)
        if raw is ProbeTag.NO_PROBES:
            return node
        registered = self._registered.get(class_name)
        if registered is not probes and registered != probes:
            self._registered.pop(class_name, None)  # its handler's probes changed: registered anew
            self.met(class_name)
            raise NeedsPythonError
        if not isinstance(raw, list) or len(raw) != len(registered):
            raise DecodeError(f"{class_name}: {len(registered)} probes, read {raw!r}")
        for (name, spec), value in zip(registered.items(), raw):
            if spec.if_field is not None and tree is not None and tree.fields.get(spec.if_field) in (None, False):
                continue
            node.props[name] = self._value(value, spec)
        return node

    def _value(self, value: _RawValue, spec: Probe) -> Any:
        if isinstance(value, ProbeTag):  # left to Python, or skipped where Python would read it
            raise NeedsPythonError
        if value is None:
            return None
        kind = spec.kind
        if isinstance(value, _Nested):
            return self._nested(value)
        if isinstance(value, _Table):
            table = self._nested(value.nested, "CatalogTable")
            info = table.get("info", {})
            if "Database" not in info or "Location" not in info:
                raise NeedsPythonError  # the catalog says where
            return table
        if kind in _JOINED_KINDS:
            return converted(str(value), spec)
        return value

    def _nested(self, nested: _Nested, class_name: str | None = None) -> CapturedNode:
        probes = self._probes_for(simple_class_name(class_name or nested.class_name))
        if nested.probes is ProbeTag.UNKNOWN and not probes:
            self.met(nested.class_name)
            return CapturedNode(class_name=class_name or nested.class_name)
        node = self._captured(nested.class_name, nested.probes, probes, None)
        node.class_name = class_name or node.class_name
        return node


class _ProbeReader(TextReader):
    """Reads the text probers write."""

    what = "the probe text"

    def probed(self) -> _Probed:
        tag = self._tag()
        if tag is ProbeTag.NO_PROBES or tag is ProbeTag.UNKNOWN:
            return tag
        if tag is not ProbeTag.PROBES:
            raise DecodeError(f"expected probes at {self.position - 1}, read {tag.value!r}")
        values: list[_RawValue] = []
        while self._peek() != ProbeTag.END.value:
            values.append(self._value())
        self.position += 1
        return values

    def _value(self) -> _RawValue:
        tag = self._tag()
        if tag is ProbeTag.NONE:
            return None
        if tag is ProbeTag.STRING:
            return self._string()
        if tag is ProbeTag.SCALAR:
            return read_scalar(self._token())
        if tag is ProbeTag.NESTED:
            return _Nested(expand_class_name(self._token()), self.probed())
        if tag is ProbeTag.TABLE:
            nested = self._value()
            if not isinstance(nested, _Nested):
                raise DecodeError(f"expected a nested object at {self.position}")
            return _Table(nested)
        if tag in (ProbeTag.RESOLVE, ProbeTag.FAILED, ProbeTag.SKIPPED):
            return tag
        raise DecodeError(f"unexpected {tag.value!r} at {self.position - 1}")

    def _tag(self) -> ProbeTag:
        char = self._peek()
        self.position += 1
        try:
            return ProbeTag(char)
        except ValueError:
            raise DecodeError(f"unknown probe tag {char!r} at {self.position - 1}") from None
