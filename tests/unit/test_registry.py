"""One ``Registry`` for every lookup by name: a name taken twice is an error naming both entries, unless the
second says it replaces the first."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from spark_lineage.columns.expressions import RULES as EXPRESSION_RULES
from spark_lineage.columns.operators import RULES as OPERATOR_RULES
from spark_lineage.errors import DuplicateNameError
from spark_lineage.handlers.base import NodeHandler
from spark_lineage.handlers.datasources import SOURCES
from spark_lineage.handlers.iceberg import FORMATS
from spark_lineage.handlers.registry import HANDLERS, handler_for, register
from spark_lineage.registry import Registry
from spark_lineage.transports import KINDS


def test_a_name_registered_twice_is_an_error_naming_both() -> None:
    registry: Registry[object] = Registry("widget")
    registry.add(["a", "b"], len)
    registry.add(["a"], len)  # the same entry again changes nothing
    with pytest.raises(DuplicateNameError, match=r"two widgets for 'b': builtins\.len and builtins\.print; pass"):
        registry.add(["c", "b"], print)
    assert "c" not in registry  # nothing of a refused registration is kept
    registry.add(["b"], print, replace=True)
    assert (registry.get("a"), registry.get("b"), registry.get("x")) == (len, print, None)
    assert list(registry) == ["a", "b"] and registry.values() == [len, print]


@pytest.fixture
def restored_handlers() -> Iterator[None]:
    saved = {name: HANDLERS.get(name) for name in HANDLERS}
    yield
    for name, handler in saved.items():
        HANDLERS.add([name], handler, replace=True)


@pytest.mark.usefixtures("restored_handlers")
def test_a_users_handler_takes_a_built_in_ones_place_only_when_it_says_so() -> None:
    built_in = handler_for("LogicalRelation")
    assert built_in is not None

    class Mine(NodeHandler):
        class_names = ("LogicalRelation",)

    with pytest.raises(DuplicateNameError, match=r"two plan-node handlers for 'LogicalRelation': "):
        register(Mine)
    assert handler_for("LogicalRelation") is built_in
    assert register(replace=True)(Mine) is Mine
    assert isinstance(handler_for("LogicalRelation"), Mine)


def test_every_lookup_by_name_is_a_registry() -> None:
    registries = [HANDLERS, SOURCES, FORMATS, OPERATOR_RULES, EXPRESSION_RULES, KINDS]
    assert all(isinstance(r, Registry) and len(r) > 0 for r in registries)
    assert len({r.what for r in registries}) == len(registries)


def test_what_is_derived_from_the_entries_is_computed_again_once_an_entry_is_added() -> None:
    registry: Registry[str] = Registry("word")
    registry.add(["a"], "alpha")
    computed: list[list[str]] = []

    def joined(values: list[str]) -> str:
        computed.append(values)
        return "+".join(values)

    assert (registry.derived(joined), registry.derived(joined)) == ("alpha", "alpha")
    registry.add(["b"], "beta")
    assert registry.derived(joined) == "alpha+beta"
    assert computed == [["alpha"], ["alpha", "beta"]]
