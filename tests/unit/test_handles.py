"""Both packages' handles keep the one ``LineageHandle`` protocol: the same methods, the same answers, each a
context manager. What ``disable()`` returns on a running lineage is held by the integration tests
(``tests/integration/test_delivery.py``, ``tests/pyiceberg/test_spool.py``)."""

from __future__ import annotations

import inspect

import pytest

import spark_lineage
from iceberg_facets import IcebergLineageHandle
from spark_lineage.handles import LineageHandle
from spark_lineage.session import SparkLineageHandle

HANDLES = [SparkLineageHandle, IcebergLineageHandle]


@pytest.mark.parametrize("cls", HANDLES, ids=lambda c: c.__name__)
def test_a_handle_of_lineage_that_is_off_keeps_the_protocol(cls: type) -> None:
    handle = cls(None)
    assert isinstance(handle, LineageHandle)
    assert handle.enabled is False
    assert handle.config is None
    assert handle.flush(0.1) is True
    assert handle.disable() is True
    with handle as entered:
        assert entered is handle


@pytest.mark.parametrize("cls", HANDLES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("method", ["flush", "disable"])
def test_flush_and_disable_take_the_same_timeout_and_say_whether_all_was_delivered(cls: type, method: str) -> None:
    ours = inspect.signature(getattr(cls, method))
    protocol = inspect.signature(getattr(LineageHandle, method))
    assert list(ours.parameters) == list(protocol.parameters) == ["self", "timeout"]
    assert ours.parameters["timeout"].default == protocol.parameters["timeout"].default
    assert ours.return_annotation == protocol.return_annotation == "bool"


def test_leaving_the_block_disables() -> None:
    disabled: list[float | None] = []

    class Runtime:
        active = True

        def shutdown(self, state: object, *, timeout: float | None = None) -> bool:
            disabled.append(timeout)
            return True

    with SparkLineageHandle(Runtime()):  # type: ignore[arg-type]
        assert disabled == []
    assert disabled == [None]


def test_the_package_exports_the_protocol() -> None:
    assert spark_lineage.LineageHandle is LineageHandle
    assert spark_lineage.SparkLineageHandle is SparkLineageHandle
