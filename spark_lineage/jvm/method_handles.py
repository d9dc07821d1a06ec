"""Composing JVM-side functions out of ``java.lang.invoke`` method handles over py4j.

A function built here runs entirely in the JVM: no code is compiled or loaded, and calling it costs no py4j
round trip per step. The Catalyst tree reader and the RDD job listener are built this way.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

from spark_lineage.jvm.values import JvmClasses
from spark_lineage.jvm.wire import Separator


class HandleBuilder:
    """The py4j plumbing and the combinators the JVM-side functions share.

    Methods are found by reflection on public classes (``getMethod`` + ``unreflect``), so the erased
    signatures that differ between Scala 2.12 and 2.13 never need spelling out. Method handles are immutable,
    so each method, method type, argument array and constant is made once and reused: a function is composed
    in about a thousand round trips instead of three thousand.
    """

    def __init__(self, gateway: Any, classes: JvmClasses) -> None:
        self._gateway = gateway
        self._classes = classes
        self._made: dict[Hashable, Any] = {}
        jvm = gateway.jvm
        self.mh = classes("java.lang.invoke.MethodHandles")
        self.lookup = self.mh.publicLookup()
        self.OBJ = classes.java_class("java.lang.Object")
        self.SB = classes.java_class("java.lang.StringBuilder")
        self.STR = classes.java_class("java.lang.String")
        self.VOID = jvm.java.lang.Void.TYPE
        self.BOOL = jvm.java.lang.Boolean.TYPE
        self.INT = jvm.java.lang.Integer.TYPE
        self.LONG = jvm.java.lang.Long.TYPE

    # --- py4j plumbing -----------------------------------------------------------------------------------

    def _once(self, key: Hashable, make: Callable[[], Any]) -> Any:
        made = self._made.get(key)
        if made is None:
            made = self._made[key] = make()
        return made

    def _array(self, element: Any, items: Sequence[Any]) -> Any:
        def make() -> Any:
            array = self._gateway.new_array(element, len(items))
            setter = self._classes("java.lang.reflect.Array")
            for index, item in enumerate(items):
                setter.set(array, index, item)  # py4j's own item assignment asks for the length first
            return array

        return self._once(("array", element._fqn, *map(_identity, items)), make)

    def _ints(self, *values: int) -> Any:
        return self._array(self._gateway.jvm.int, values)

    def _types(self, *types: Any) -> Any:
        return self._array(self._classes("java.lang.Class"), types)

    def _handles(self, *handles: Any) -> Any:
        return self._array(self._classes("java.lang.invoke.MethodHandle"), handles)

    def _objects(self, *values: Any) -> Any:
        return self._array(self._classes("java.lang.Object"), values)

    def _method_type(self, returns: Any, *params: Any) -> Any:
        return self._once(
            ("type", *map(_identity, (returns, *params))),
            lambda: self._classes("java.lang.invoke.MethodType").methodType(returns, self._types(*params)),
        )

    def _method(self, owner: str, name: str, *params: str) -> Any:
        """``(Object receiver, params...) -> result`` for the public method ``owner.name``."""
        return self._once(("method", owner, name, *params), lambda: self._unreflect(owner, name, params))

    def _unreflect(self, owner: str, name: str, params: Sequence[str]) -> Any:
        method = self._classes.java_class(owner).getMethod(name, self._types(*[self._param_class(p) for p in params]))
        handle = self.lookup.unreflect(method)
        if self._classes("java.lang.reflect.Modifier").isStatic(method.getModifiers()):
            return handle
        return self.mh.explicitCastArguments(handle, handle.type().changeParameterType(0, self.OBJ))

    def _param_class(self, name: str) -> Any:
        primitive = {"int": self.INT, "long": self.LONG, "boolean": self.BOOL}.get(name)
        return primitive if primitive is not None else self._classes.java_class(name)

    # --- combinators -------------------------------------------------------------------------------------

    def _void(self, handle: Any) -> Any:
        return handle.asType(handle.type().changeReturnType(self.VOID))

    def _then(self, *steps: Any) -> Any:
        """Run ``(value, out)`` steps in order."""
        combined = steps[-1]
        for step in reversed(steps[:-1]):
            combined = self.mh.foldArguments(combined, step)
        return combined

    def _after(self, first: Any, then: Any) -> Any:
        """``then(first(value))``: chain two one-argument handles."""
        adapted = then.asType(then.type().changeParameterType(0, first.type().returnType()))
        return self.mh.filterReturnValue(first, adapted)

    def _constant(self, value: bool) -> Any:
        """``(Object)boolean`` answering ``value``."""
        return self._once(
            ("constant", value),
            lambda: self.mh.dropArguments(self.mh.constant(self.BOOL, value), 0, self._types(self.OBJ)),
        )

    def _is(self, class_name: str) -> Any:
        """``(Object)boolean``: ``value instanceof class_name``."""
        test = self._method("java.lang.Class", "isInstance", "java.lang.Object")
        return self._once(
            ("is", class_name),
            lambda: self.mh.insertArguments(test, 0, self._objects(self._classes.java_class(class_name))),
        )

    def _choose(self, cases: Sequence[tuple[Any, Any]], otherwise: Any) -> Any:
        chosen = otherwise
        for test, handle in reversed(cases):
            chosen = self.mh.guardWithTest(test, handle, chosen)
        return chosen

    def _string(self, handle: Any, kind: str) -> Any:
        """``(value) -> String``: what ``handle`` answers, as text (``kind``: its return type)."""
        return self._after(handle, self._method("java.lang.String", "valueOf", kind))

    def _joined(self, *parts: Any, separator: str = Separator.FIELD.value) -> Any:
        """``(value) -> String``: the texts the one-argument ``parts`` answer, joined with ``separator``."""
        sequence = self._classes.java_class("java.lang.CharSequence")
        join = self._method("java.lang.String", "join", "java.lang.CharSequence", "[Ljava.lang.CharSequence;")
        collected = self.mh.insertArguments(
            join.asCollector(self._classes.java_class("[Ljava.lang.CharSequence;"), len(parts)),
            0,
            self._objects(separator),
        )
        filters = [part.asType(part.type().changeReturnType(sequence)) for part in parts]
        each = self.mh.filterArguments(collected, 0, self._handles(*filters))
        return self.mh.permuteArguments(each, self._method_type(self.STR, self.OBJ), self._ints(*([0] * len(parts))))

    def _as_object(self, handle: Any) -> Any:
        """A one-argument handle as ``(Object)Object`` (its argument cast, its result boxed)."""
        return handle.asType(self._method_type(self.OBJ, self.OBJ))

    def _is_null(self) -> Any:
        """``(Object)boolean``: ``value == null``."""
        return self._method("java.util.Objects", "isNull", "java.lang.Object")

    def _returning(self, value: Any, *params: Any) -> Any:
        """``(params...)Object`` answering ``value`` whatever it is given."""
        return self.mh.dropArguments(self.mh.constant(self.OBJ, value), 0, self._types(*params))

    def _rolled_back(self, step: Any, instead: Any) -> Any:
        """``(value, out)``: ``step(value, out)``; should it throw anything, what it appended to the
        ``StringBuilder`` is cut off and ``instead(value, out)`` runs. So a read that fails half-way leaves no
        half-written text."""
        throwable = self._classes.java_class("java.lang.Throwable")
        # (mark, value, out): step(value, out), or on failure out.setLength(mark) then instead(value, out)
        reset = self._once(
            "reset",
            lambda: self.mh.dropArguments(
                self.mh.permuteArguments(
                    self.lookup.findVirtual(self.SB, "setLength", self._method_type(self.VOID, self.INT)),
                    self._method_type(self.VOID, self.INT, self.OBJ, self.SB),
                    self._ints(2, 0),
                ),
                0,
                self._types(throwable),
            ),
        )
        mark = self._once(
            "mark",
            lambda: self.mh.dropArguments(
                self.lookup.findVirtual(self.SB, "length", self._method_type(self.INT)), 0, self._types(self.OBJ)
            ),
        )
        marked = self.mh.dropArguments(step, 0, self._types(self.INT))
        recover = self.mh.foldArguments(self.mh.dropArguments(instead, 0, self._types(throwable, self.INT)), reset)
        return self.mh.foldArguments(self.mh.catchException(marked, throwable, recover), mark)

    def _dynamic(self, name: str, *arguments: str) -> Any:
        """``(Object)Object``: the public method ``name`` of the value's own class called with ``arguments``
        (strings), found at each call as py4j finds it (commons-lang3's ``MethodUtils``, which Spark ships):
        for a step whose declared type says nothing of the value's class."""
        invoke = self._once(
            "invokeMethod",
            lambda: self._method(
                "org.apache.commons.lang3.reflect.MethodUtils",
                "invokeMethod",
                "java.lang.Object",
                "java.lang.String",
                "[Ljava.lang.Object;",
            ).asFixedArity(),
        )
        return self._once(
            ("dynamic", name, *arguments),
            lambda: self.mh.insertArguments(invoke, 1, self._objects(name, self._objects(*arguments))),
        )

    def _read_field(self, name: str) -> Any:
        """``(Object)Object``: the field ``name`` of the value, up its class hierarchy, whatever its access
        (commons-lang3's ``FieldUtils``): where a class keeps a constructor argument without an accessor."""
        read = self._method(
            "org.apache.commons.lang3.reflect.FieldUtils",
            "readField",
            "java.lang.Object",
            "java.lang.String",
            "boolean",
        )
        return self._once(("field", name), lambda: self.mh.insertArguments(read, 1, self._objects(name, True)))


def _identity(value: Any) -> Hashable:
    """What tells a value apart in a cache key: a JVM object by its py4j id, a Python value by itself."""
    target = getattr(value, "_target_id", None)
    if target is not None:
        return ("jvm", target)
    fqn = getattr(value, "_fqn", None)
    if fqn is not None:
        return ("class", fqn)
    return (type(value).__name__, value)
