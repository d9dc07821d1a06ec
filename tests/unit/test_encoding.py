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


def test_datasets_are_written_once_and_each_part_looked_into_once_per_encoder() -> None:
    """Each dataset's text is written once per encoder and spliced in where it stands (the events are Serde's),
    and a check looks into each converted part once."""
    from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState

    inputs = [InputDataset(namespace="file", name=f"/in/{index}") for index in range(3)]
    output = OutputDataset(namespace="file", name="/out")
    events = [
        RunEvent(
            eventType=state,
            eventTime="2026-12-01T00:00:00.000+00:00",
            run=Run(runId="0195f5b6-0000-7000-8000-000000000001"),
            job=Job(namespace="default", name="job"),
            inputs=inputs if state != RunState.RUNNING else inputs[:1],
            outputs=[output],
            producer="p",
        )
        for state in (RunState.START, RunState.RUNNING, RunState.COMPLETE)
    ]
    looked_at: list[list[str]] = []

    def check(text: str) -> bool:
        looked_at.append(text.split("\x00"))
        return "/in/2" in looked_at[-1]

    encoder = EventEncoder()
    texts = [encoder.encode(event) for event in events]
    assert texts == [Serde.to_json(event) for event in events]
    assert [encoder.holds(event, check) for event in events] == [True, False, True]
    # The START held "/in/2": nothing of it counts as looked at. The RUNNING event's parts are looked at once;
    # the COMPLETE's input "/in/2" again, but not its output, met in the RUNNING event.
    assert [[text.count("/in/0"), text.count("/in/2"), text.count("/out")] for text in looked_at] == [
        [1, 1, 1],
        [1, 0, 1],
        [0, 1, 0],
    ]
    assert [text.count("eventTime") for text in looked_at] == [1, 1, 1]  # each event is an object of its own
    assert encoder.holds(events[1], check) is False
    assert len(looked_at) == 3  # nothing left to look at


@pytest.mark.parametrize(
    ("value", "looked_at"),
    [
        ("é-ü", ["é-ü"]),  # as it is, not as JSON escapes it
        (42, []),
        (datetime.timedelta(seconds=1), ["<<non-serializable: timedelta>>"]),
    ],
)
def test_the_check_sees_each_value_as_it_is_and_what_stands_for_one_json_cannot_hold(
    value: Any, looked_at: list[str]
) -> None:
    seen: list[str] = []
    assert not EventEncoder().holds({"eventTime": "t", "note": value}, lambda text: seen.append(text) is not None)
    assert seen == ["\x00".join(["eventTime", "t", "note", *looked_at])]


def test_dict_events_whose_datasets_come_and_go_keep_their_own_text() -> None:
    """A dict event's datasets are converted anew each time: the encoder keeps them, so that no later dataset
    takes the identity, and the text, of one that is gone."""

    def event(index: int) -> dict[str, Any]:
        return {"eventTime": "t", "inputs": [{"name": f"/in/{index}", "namespace": "file"}], "producer": "p"}

    encoder = EventEncoder()
    # Nothing of an event outlives its encoding here, so its memory is free for the next one's.
    texts = [encoder.encode(event(index)) for index in range(200)]
    assert texts == [Serde.to_json(event(index)) for index in range(200)]


def test_a_lasting_facet_is_converted_once_for_every_encoder_and_written_as_serde_writes_it() -> None:
    from openlineage.client.event_v2 import InputDataset, Job, Run, RunEvent, RunState
    from openlineage.client.facet_v2 import datasource_dataset

    from spark_lineage.delivery.encoding import lasting

    shared = lasting(datasource_dataset.DatasourceDatasetFacet(name="file", uri="file", producer="p"))
    own = datasource_dataset.DatasourceDatasetFacet(name="file", uri="file", producer="p")
    first, second = EventEncoder(), EventEncoder()
    assert first.plain(shared) is second.plain(shared)  # converted once, by the first encoder
    assert first.plain(own) is not second.plain(own)
    event = RunEvent(
        eventType=RunState.START,
        eventTime="2026-12-01T00:00:00.000+00:00",
        run=Run(runId="0195f5b6-0000-7000-8000-000000000001"),
        job=Job(namespace="default", name="job"),
        inputs=[InputDataset(namespace="file", name="/in", facets={"dataSource": shared})],
        producer="p",
    )
    assert second.encode(event) == EventEncoder().encode(event) == Serde.to_json(event)


def test_run_and_job_facets_are_written_once_per_encoder_and_a_lasting_one_once_in_all(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A query's events share their run and job facets: each is written once per encoder and spliced in where it
    stands, a lasting one once for every encoder; the events are Serde's, byte for byte."""
    from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
    from openlineage.client.facet_v2 import job_type_job, parent_run, processing_engine_run

    from spark_lineage.delivery import encoding

    engine = encoding.lasting(processing_engine_run.ProcessingEngineRunFacet(version="4.1.1", name="spark"))
    parent = parent_run.ParentRunFacet(
        run=parent_run.Run(runId="0195f5b6-0000-7000-8000-000000000000"),
        job=parent_run.Job(namespace="default", name="app"),
    )
    job_type = job_type_job.JobTypeJobFacet(processingType="BATCH", integration="SPARK", jobType="SQL_JOB")
    written: list[Any] = []
    dumps = encoding._dumps

    def counting(value: Any) -> str:
        written.append(value)
        return dumps(value)

    monkeypatch.setattr(encoding, "_dumps", counting)

    def events(run_id: str) -> list[RunEvent]:
        return [
            RunEvent(
                eventType=state,
                eventTime="2026-12-01T00:00:00.000+00:00",
                run=Run(runId=run_id, facets={"parent": parent, "processing_engine": engine}),
                job=Job(namespace="default", name="job", facets={"jobType": job_type}),
                producer="p",
            )
            for state in (RunState.START, RunState.RUNNING, RunState.COMPLETE)
        ]

    queries = [events("0195f5b6-0000-7000-8000-000000000001"), events("0195f5b6-0000-7000-8000-000000000002")]
    texts = [
        [encoder.encode(event) for event in query] for query, encoder in zip(queries, (EventEncoder(), EventEncoder()))
    ]
    assert texts == [[Serde.to_json(event) for event in query] for query in queries]
    facets = [value for value in written if "_schemaURL" in value]
    names = [value["_schemaURL"].rsplit("/", 1)[-1] for value in facets]  # .../$defs/<name>
    # Per encoder (query): the parent and the job type once; the lasting engine facet once in all.
    assert sorted(names) == sorted(["ParentRunFacet"] * 2 + ["JobTypeJobFacet"] * 2 + ["ProcessingEngineRunFacet"])
    assert len(written) == len(facets) + 6  # and the rest of each event


def test_a_lasting_facet_is_looked_into_once_for_every_encoder_while_the_rules_stay_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under the same ``clean`` set (the same redaction rules), a lasting facet one encoder's check found clean is
    not walked by the next encoder's check; under a new set (the rules changed), it is looked into again, and a
    secret it holds is found."""
    from openlineage.client.facet_v2 import datasource_dataset

    from spark_lineage.delivery.encoding import lasting

    shared = lasting(datasource_dataset.DatasourceDatasetFacet(name="s3://bucket", uri="s3://bucket", producer="p"))
    walked: list[str] = []
    gather = EventEncoder._gather

    def walking(self: EventEncoder, value: Any, strings: list[str], looked: list[Any]) -> None:
        gather(self, value, strings, looked)
        walked.extend(strings)  # before the clean set's strings are left out

    monkeypatch.setattr(EventEncoder, "_gather", walking)

    def holds(secret: str, rules: set[str] | None) -> bool:
        walked.clear()
        event = {"eventTime": "t", "inputs": [{"name": "/in", "facets": {"dataSource": shared}}]}
        return EventEncoder().holds(event, lambda text: secret in text, rules)

    def walked_shared() -> bool:
        return "s3://bucket" in walked

    rules = set[str]()
    assert (holds("hunter2", rules), walked_shared()) == (False, True)
    assert (holds("hunter2", rules), walked_shared()) == (False, False)
    assert (holds("bucket", set()), walked_shared()) == (True, True)  # new rules: looked into again, and found
    assert (holds("hunter2", None), walked_shared()) == (False, True)  # no set: looked into, as ever


def test_beyond_the_lasting_objects_kept_the_one_no_encoder_met_for_longest_is_forgotten(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A session's facet, in every event, stays lasting however many facets of single queries are marked after it;
    a facet no encoder met since is forgotten first (then converted per encoder, the same JSON)."""
    from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
    from openlineage.client.facet_v2 import datasource_dataset, processing_engine_run

    from spark_lineage.delivery import encoding

    monkeypatch.setattr(encoding, "_LASTING", type(encoding._LASTING)())
    monkeypatch.setattr(encoding, "_LASTING_DICTS", {})
    monkeypatch.setattr(encoding, "_LASTING_KEPT", 3)
    session = encoding.lasting(processing_engine_run.ProcessingEngineRunFacet(version="4.1.1", name="spark"))
    unmet = encoding.lasting(processing_engine_run.ProcessingEngineRunFacet(version="3.5.9", name="spark"))

    def event(facet: Any) -> RunEvent:
        return RunEvent(
            eventType=RunState.COMPLETE,
            eventTime="2026-12-07T00:00:00.000+00:00",
            run=Run(runId="0195f5b6-0000-7000-8000-000000000001", facets={"processing_engine": session, "one": facet}),
            job=Job(namespace="default", name="job"),
            producer="p",
        )

    def one_query_facet(index: int) -> Any:
        return encoding.lasting(datasource_dataset.DatasourceDatasetFacet(name=f"s3://b{index}", uri="s3://b"))

    queries = []
    for index in range(5):  # each query marks a facet of its own, and its encoder meets the session's
        queries.append(one_query_facet(index))
        assert EventEncoder().encode(event(queries[-1])) == Serde.to_json(event(queries[-1]))
    assert id(session) in encoding._LASTING
    assert id(unmet) not in encoding._LASTING
    assert [entry[0] for entry in encoding._LASTING.values()] == [queries[3], session, queries[4]]
    converted = EventEncoder().plain(session)
    assert EventEncoder().plain(session) is converted  # still converted once for every encoder
    assert len(encoding._LASTING_DICTS) <= len(encoding._LASTING)
