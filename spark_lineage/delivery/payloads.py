"""Events as the spool stores them: their JSON, exactly as it will be sent, and back.

The JSON is made once, when the event is spooled, after openlineage-python's client has done what it does to
every event (environment and tag facets, dataset-name reduction, filters), so that an event replayed by
another process is the event this one would have sent, with its original times and run id.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union

from openlineage.client.event_v2 import (
    DatasetEvent,
    InputDataset,
    Job,
    JobEvent,
    OutputDataset,
    Run,
    RunEvent,
    RunState,
    StaticDataset,
)

from spark_lineage import costs
from spark_lineage.costs import Stage
from spark_lineage.delivery.encoding import EventEncoder
from spark_lineage.facets import PRODUCER
from spark_lineage.redaction import Redactor

Event = Union[RunEvent, DatasetEvent, JobEvent]

APPLICATION_JOB_TYPE = "APPLICATION"


@dataclass(frozen=True)
class Payload:
    """An event's JSON and what the spool files it under."""

    json: str
    run_id: str
    job: str
    application: bool
    """An application run's event (``jobType`` APPLICATION): kept when a full spool drops query events."""


def to_payload(
    event: Event, redactor: Redactor | None = None, producer: str | None = None, encoder: EventEncoder | None = None
) -> Payload:
    """``event`` as the spool stores it; with ``redactor``, without any secret (see
    :mod:`spark_lineage.redaction`: the spool on disk never holds one either); with ``producer`` (the
    ``python.producer`` setting), naming it wherever it names :data:`~spark_lineage.facets.PRODUCER`.

    The producer is put in here, on the JSON, because every event of both engines passes here once: the events
    and facets are built with the default, in many places (the plan handlers, ``iceberg_facets``), and
    handing the setting to each would thread it through every builder for one string. Facets that another
    producer made (openlineage-python's own) keep their producer.

    ``encoder``: the one the events built with this one are encoded with, so that the parts they share are
    converted once (see :mod:`~spark_lineage.delivery.encoding`)."""
    encoder = encoder or EventEncoder()
    with costs.stage(Stage.JSON):
        text = _json(event, encoder, producer)
    with costs.stage(Stage.REDACTION):
        text = _redacted(event, text, encoder, redactor, producer)
    return _payload(event, text)


def to_payloads(
    events: Sequence[Event],
    redactor: Redactor | None,
    producer: str | None,
    lost: Callable[[Event, Exception], None],
    encoder: EventEncoder | None = None,
) -> list[Payload]:
    """Events built together (a query's), each as :func:`to_payload` makes it, with one encoder (``encoder``: one
    that encoded earlier events of the same run, whose parts these share): the JSON of all, then the redaction
    of all (each stage entered once, not once an event: entering one reads the thread's CPU clock twice). An
    event that cannot be made is given to ``lost``, and the others go on."""
    encoder = encoder if encoder is not None else EventEncoder()
    texts: list[tuple[Event, str]] = []
    with costs.stage(Stage.JSON):
        for event in events:
            try:
                texts.append((event, _json(event, encoder, producer)))
            except Exception as error:  # noqa: BLE001 - the caller counts it lost
                lost(event, error)
    payloads = []
    with costs.stage(Stage.REDACTION):
        for event, text in texts:
            try:
                payloads.append(_payload(event, _redacted(event, text, encoder, redactor, producer)))
            except Exception as error:  # noqa: BLE001 - the caller counts it lost
                lost(event, error)
    return payloads


def _json(event: Event, encoder: EventEncoder, producer: str | None) -> str:
    text = encoder.encode(event)
    if producer is not None and producer != PRODUCER:
        text = json.dumps(_with_producer(json.loads(text), producer), sort_keys=True)
    return text


def _redacted(event: Event, text: str, encoder: EventEncoder, redactor: Redactor | None, producer: str | None) -> str:
    producing = producer is not None and producer != PRODUCER
    if redactor is not None and _needs_redaction(redactor, encoder, event, text, piecewise=not producing):
        return json.dumps(redactor.document(json.loads(text)), sort_keys=True)
    return text


def _payload(event: Event, text: str) -> Payload:
    job = getattr(event, "job", None)
    run = getattr(event, "run", None)
    facet = (job.facets or {}).get("jobType") if job is not None else None
    job_type = facet.get("jobType") if isinstance(facet, Mapping) else getattr(facet, "jobType", None)
    name = f"{job.namespace}/{job.name}" if job is not None else "/"
    return Payload(text, run.runId if run is not None else "", name, job_type == APPLICATION_JOB_TYPE)


def _needs_redaction(redactor: Redactor, encoder: EventEncoder, event: Event, text: str, *, piecewise: bool) -> bool:
    """Whether a rule of ``redactor`` could change the event ``text`` is. When its rules never match across
    the punctuation between JSON values, the event's strings are looked at as they are: each converted part
    once per encoder, each string once while the rules stay the same (see
    :meth:`~spark_lineage.delivery.encoding.EventEncoder.holds`). Otherwise the whole text, and any text with a
    JSON escape (``\\u00fc`` hides ``ü`` from a secret's search) is redacted."""
    if piecewise and redactor.checks_piecewise:
        return encoder.holds(event, redactor.needs_redaction, redactor.clean_strings())
    return "\\u" in text or redactor.needs_redaction(text)


def _with_producer(document: Any, producer: str) -> Any:
    """``document`` with ``producer`` for every ``producer`` / ``_producer`` that is :data:`PRODUCER`."""
    if isinstance(document, dict):
        return {
            key: producer if key in ("producer", "_producer") and value == PRODUCER else _with_producer(value, producer)
            for key, value in document.items()
        }
    if isinstance(document, list):
        return [_with_producer(value, producer) for value in document]
    return document


def from_payload(text: str) -> Event:
    """The event a payload holds, as openlineage-python's transports take it (facets stay plain mappings,
    which its serializer writes as they are)."""
    data: dict[str, Any] = json.loads(text)
    job: dict[str, Any] = data.get("job") or {}
    producer = data["producer"]  # schemaURL follows from the event's class
    if "run" in data:
        return RunEvent(
            eventType=RunState(data["eventType"]) if data.get("eventType") else None,
            eventTime=data["eventTime"],
            run=Run(runId=data["run"]["runId"], facets=data["run"].get("facets") or {}),
            job=_job(job),
            inputs=[_input(d) for d in data.get("inputs") or []],
            outputs=[_output(d) for d in data.get("outputs") or []],
            producer=producer,
        )
    if "dataset" in data:
        dataset = data["dataset"]
        static = StaticDataset(namespace=dataset["namespace"], name=dataset["name"], facets=dataset.get("facets"))
        return DatasetEvent(eventTime=data["eventTime"], dataset=static, producer=producer)
    return JobEvent(
        eventTime=data["eventTime"],
        job=_job(job),
        inputs=[_input(d) for d in data.get("inputs") or []],
        outputs=[_output(d) for d in data.get("outputs") or []],
        producer=producer,
    )


def _job(data: dict[str, Any]) -> Job:
    return Job(namespace=data["namespace"], name=data["name"], facets=data.get("facets") or {})


def _input(data: dict[str, Any]) -> InputDataset:
    return InputDataset(
        namespace=data["namespace"],
        name=data["name"],
        facets=data.get("facets") or {},
        inputFacets=data.get("inputFacets") or {},
    )


def _output(data: dict[str, Any]) -> OutputDataset:
    return OutputDataset(
        namespace=data["namespace"],
        name=data["name"],
        facets=data.get("facets") or {},
        outputFacets=data.get("outputFacets") or {},
    )
