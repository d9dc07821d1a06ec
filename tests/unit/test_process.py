"""What the process holds for every session: the trimmers the last session set give way, when it ends, to those
of the one enabled before it that is still on, then to the defaults."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from spark_lineage import naming
from spark_lineage.process import LineageProcess

KEY_VALUE = ("openlineage.client.dataset.trimmers.KeyValueTrimmer",)
PARTITIONED = "s3://b/events/dt=2024-01-01"


@pytest.fixture(autouse=True)
def _default_trimmers() -> Iterator[None]:
    yield
    naming.use_trimmers()


def test_a_sessions_trimmers_last_while_it_is_on_and_the_earlier_ones_come_back() -> None:
    process = LineageProcess()
    first, second = object(), object()
    assert naming.from_location(PARTITIONED).name == "events"
    process.set_trimmers(first, KEY_VALUE, ())
    assert naming.from_location(PARTITIONED).name == "events/dt=2024-01-01"
    process.set_trimmers(second, (), ())
    assert naming.from_location(PARTITIONED).name == "events"
    process.remove(second)
    assert naming.from_location(PARTITIONED).name == "events/dt=2024-01-01"
    process.remove(first)
    assert naming.from_location(PARTITIONED).name == "events"


def test_removing_a_session_that_set_no_trimmers_keeps_them() -> None:
    process = LineageProcess()
    owner = object()
    process.set_trimmers(owner, KEY_VALUE, ())
    process.remove(object())
    assert naming.from_location(PARTITIONED).name == "events/dt=2024-01-01"
