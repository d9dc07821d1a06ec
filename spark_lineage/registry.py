"""One kind of name registry, for everything the library looks up by name.

Plan-node handlers (:mod:`spark_lineage.handlers.registry`), the data sources a ``SaveIntoDataSourceCommand``
writes (:mod:`spark_lineage.handlers.datasources`), the table formats behind DataSource V2 relations
(:mod:`spark_lineage.handlers.iceberg`), the column-lineage rules of plan nodes and of expressions
(:mod:`spark_lineage.columns.operators`, :mod:`spark_lineage.columns.expressions`) and the transport kinds
(:mod:`spark_lineage.transports`) are each a :class:`Registry`, filled by a decorator beside what it registers
(a :class:`Registrar`, for registries of one instance per class).

A name registered twice is an error that names both (:class:`~spark_lineage.errors.DuplicateNameError`): two
handlers for one plan node would otherwise depend on import order. Replacing an entry on purpose (a user's
own handler for a node a built-in one serves) says so: ``replace=True``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar, cast, overload

from spark_lineage.errors import DuplicateNameError

T = TypeVar("T")
C = TypeVar("C", bound=type)
R = TypeVar("R")


class Registry(Generic[T]):
    """Entries of one kind, by name."""

    def __init__(self, what: str) -> None:
        """``what`` the entries are, for errors (``plan-node handler``)."""
        self.what = what
        self._entries: dict[str, T] = {}
        self.get: Callable[[str], T | None] = self._entries.get
        """The entry registered under a name, or ``None``: the dict's own ``get`` (handlers and column rules are
        looked up for every node and expression of every plan; a method around it cost 0.08 µs a lookup)."""
        self._derived: dict[Callable[[list[T]], Any], Any] = {}
        """What :meth:`derived` computed from the entries, by what computed it (emptied when an entry is added)."""

    def add(self, names: Iterable[str], entry: T, *, replace: bool = False) -> None:
        """Register ``entry`` under each of ``names``. Raises :class:`~spark_lineage.errors.DuplicateNameError`
        for a name already registered to another entry, unless ``replace``."""
        names = list(names)
        if not replace:
            for name in names:
                known = self._entries.get(name)
                if known is not None and known is not entry:
                    raise DuplicateNameError(
                        f"two {self.what}s for {name!r}: {_label(known)} and {_label(entry)}; pass replace=True "
                        f"to register the second in the first's place"
                    )
        for name in names:
            self._entries[name] = entry
        self._derived.clear()

    def entry(self, *names: str, replace: bool = False) -> Callable[[T], T]:
        """Decorator: register what it decorates (a function, a class) under ``names``."""

        def add(entry: T) -> T:
            self.add(names, entry, replace=replace)
            return entry

        return add

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def values(self) -> list[T]:
        """The entries, each once, in the order they were first registered."""
        return list({id(entry): entry for entry in self._entries.values()}.values())

    def derived(self, compute: Callable[[list[T]], R]) -> R:
        """``compute(self.values())``, computed once until an entry is added (what is read for each request, from
        entries that rarely change: every option a data source is named by)."""
        if compute not in self._derived:
            self._derived[compute] = compute(self.values())
        return cast(R, self._derived[compute])

    def __repr__(self) -> str:
        return f"Registry({self.what!r}, {len(self._entries)} names)"


class Registrar:
    """A class decorator that registers one instance of each class it decorates, under the names the class
    lists in its ``attribute`` (``class_names``, ``names``). ``@register`` refuses a name taken already;
    ``@register(replace=True)`` takes its place (how a user's own entry replaces a built-in one)."""

    def __init__(self, registry: Registry[Any], attribute: str) -> None:
        self.registry = registry
        self.attribute = attribute

    @overload
    def __call__(self, cls: C, *, replace: bool = False) -> C: ...
    @overload
    def __call__(self, *, replace: bool = False) -> Callable[[C], C]: ...

    def __call__(self, cls: C | None = None, *, replace: bool = False) -> C | Callable[[C], C]:
        def add(decorated: C) -> C:
            self.registry.add(getattr(decorated, self.attribute), decorated(), replace=replace)
            return decorated

        return add if cls is None else add(cls)


def _label(entry: object) -> str:
    """How an entry is named in an error: its class or function, and where it is defined."""
    target = entry if hasattr(entry, "__qualname__") else type(entry)  # a class or function, else an instance's class
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', '?')}"
