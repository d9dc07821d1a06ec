"""The event encoder writes what openlineage-python's Serde writes, byte for byte: every event of every recorded
query (each query's events through one encoder, as they are spooled), and the corners of Serde's rules."""

from __future__ import annotations

import datetime
import enum
import uuid
from pathlib import Path
from typing import Any

import attr
import pytest
from openlineage.client.serde import Serde

from spark_lineage.analysis import analyze
from spark_lineage.config import ColumnLineageConfig, LineageConfig
from spark_lineage.delivery.encoding import EventEncoder
from spark_lineage.events import EventBuilder
from spark_lineage.lineage import AnalysisContext
from tests.fixtures.recorded import recorded_query, recorded_session

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
RECORDINGS = sorted(session.parent for session in FIXTURES.glob("*/spark-*/session.json"))


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_recorded_querys_events_encode_as_serde_writes_them(recording: Path) -> None:
    ctx = AnalysisContext(session=recorded_session(recording))
    builder = EventBuilder(LineageConfig(), ctx.session, "01930000-0000-7000-8000-000000000000")
    compared = 0
    for plan in sorted(recording.glob("*.json")):
        if plan.name == "session.json":
            continue
        query = recorded_query(recording, plan.stem)
        encoder = EventEncoder()  # one per query: its events share datasets and facets
        for event in builder.query_events(query, analyze(query, ctx, ColumnLineageConfig())):
            assert encoder.encode(event) == Serde.to_json(event)
            compared += 1
    assert compared > 0


class Color(enum.Enum):
    RED = "red"


@attr.define
class Inner:
    a: Any = None
    b: Any = None


@attr.define
class Outer:
    _producer: str = "p"
    items: Any = None
    mapping: Any = None
    when: Any = None
    shared: Any = None


def test_serdes_rules_hold_in_every_corner() -> None:
    shared = Inner(a=1)
    values = [
        Outer(
            items=[None, Inner(), Inner(a=Color.RED), (1, None, {}), {"k": None}, {1, 2}],
            mapping={"x": None, "y": Inner(), "z": [Inner(b="t")], "e": Color.RED, "d": {}},
            when=datetime.datetime(2026, 12, 5, 1, 2, 3, tzinfo=datetime.timezone.utc),
            shared=shared,
        ),
        Outer(items=(), mapping={"u": uuid.UUID(int=7), "day": datetime.date(2026, 1, 2)}, shared=shared),
        Outer(items=[object()], mapping={"f": 1.5, "b": True, "n": [None]}),
    ]
    encoder = EventEncoder()
    for value in values:
        assert encoder.encode(value) == Serde.to_json(value)


def test_an_object_shared_by_two_events_is_converted_once_and_written_in_both() -> None:
    shared = Inner(a="s")
    encoder = EventEncoder()
    first, second = encoder.plain(Outer(shared=shared)), encoder.plain(Outer(items=[shared]))

    assert first["shared"] is second["items"][0] == {"a": "s"}


def test_what_is_no_event_is_refused_as_serde_refuses_it() -> None:
    with pytest.raises(attr.exceptions.NotAnAttrsClassError):
        Serde.to_json(object())
    with pytest.raises(TypeError, match="not an event: object"):
        EventEncoder().encode(object())
