"""What the process holds for every session: the trimmers the last session set give way, when it ends, to those
of the one enabled before it that is still on, then to the defaults; and a stop or ``disable_all()`` that the
user's Ctrl-C cut short in one session's closing still closes the others and stops the context."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from openlineage.client.event_v2 import RunState

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


@dataclass
class _Closing:
    """A session's lineage as the process ends it (its ``shutdown``), the user's Ctrl-C cutting it short when
    ``interrupted``: a driver's runtime raises that interrupt once its own closing is done."""

    context_id: int
    interrupted: bool = False
    ended: list[RunState] = field(default_factory=list)

    def shutdown(self, state: RunState) -> bool:
        self.ended.append(state)
        if self.interrupted:
            raise KeyboardInterrupt
        return True


@dataclass
class _Handle:
    _runtime: _Closing
    enabled: bool = True


class _Context:
    """What the process wraps of a SparkContext: its ``stop``."""

    def __init__(self) -> None:
        self.stopped = 0

    def stop(self) -> str:
        self.stopped += 1
        return "stopped"


def _sessions(process: LineageProcess, context: object, *closings: _Closing) -> None:
    for index, closing in enumerate(closings):
        process._handles[f"session-{index}"] = _Handle(closing)  # type: ignore[assignment]
    process._wrap_context_stop(context)


def test_a_ctrl_c_in_one_sessions_closing_is_raised_once_every_session_is_closed_and_the_context_stopped() -> None:
    process, context = LineageProcess(), _Context()
    first, second = _Closing(id(context), interrupted=True), _Closing(id(context))
    other = _Closing(id(object()))  # another context's session: its stop is not this one's
    _sessions(process, context, first, second, other)
    with pytest.raises(KeyboardInterrupt):
        context.stop()
    assert (first.ended, second.ended, other.ended, context.stopped) == (
        [RunState.COMPLETE],
        [RunState.COMPLETE],
        [],
        1,
    )


def test_a_stop_without_an_interrupt_returns_what_the_contexts_stop_returns() -> None:
    process, context = LineageProcess(), _Context()
    closing = _Closing(id(context))
    _sessions(process, context, closing)
    result: Any = context.stop()
    assert (result, closing.ended, context.stopped) == ("stopped", [RunState.COMPLETE], 1)


def test_disable_all_closes_every_session_before_raising_a_ctrl_c_one_of_them_met() -> None:
    process, context = LineageProcess(), _Context()
    first, second = _Closing(id(context), interrupted=True), _Closing(id(context))
    _sessions(process, context, first, second)
    with pytest.raises(KeyboardInterrupt):
        process.disable_all()
    assert (first.ended, second.ended, context.stopped) == ([RunState.COMPLETE], [RunState.COMPLETE], 0)
