"""What openlineage-python's client does to an event before its transport sends it, done once, before the event
is spooled: its environment and tag facets, its source location, dataset-name reduction and filters.

The client makes new tag facets for every event it enriches (each checked field by field as it is made), about
a sixth of what an event costs to get ready. A query run's events differ only in their state, time, some run
facets and their outputs' statistics, so :class:`Enricher` asks the client once per run, learns which facets it
added, and gives the run's later events the same ones. It does so only where the client's work depends on
nothing that differs between them: no filters (which may look at anything in an event) and no dataset
reduction (which rewrites the datasets); otherwise, and for anything that is no run event, it asks the client
for every event.

What the client adds to a run event that holds none of the facets its steps look at (tags, a source code location)
depends on its configuration alone, when it collects no environment variables (read again for every event): then
the :class:`Enrichments` of a delivery keep what its first such run was given, and the first events of later runs
(a driver's queries, a Spark Connect client's actions) get the same facets without asking the client again.
``tests/unit/test_enrichment.py`` holds the events to those the client makes one by one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeGuard, cast

from openlineage.client.event_v2 import RunEvent

from spark_lineage.delivery.encoding import lasting

if TYPE_CHECKING:
    from openlineage.client import OpenLineageClient

    from spark_lineage.delivery.payloads import Event


def prepare(client: OpenLineageClient, event: Event) -> Event | None:
    """What openlineage-python's client does to an event before its transport sends it (environment and tag
    facets, source location, dataset-name reduction, filters): the event, changed in place or replaced, or
    ``None`` when a filter drops it. The environment facet only when the client is configured to collect
    variables: without any, looking for them is a pass over the process's whole environment per event that
    adds nothing."""
    steps = ("add_environment_facets", "update_event_tags_facets", "add_source_code_location_facet")
    for step in steps if _collects_environment_variables(client) else steps[1:]:
        method = getattr(client, step, None)
        if method is not None:
            event = method(event)
    if _reduces(client):
        event = client.reduce_datasets(event)  # type: ignore[assignment]  # it keeps the event's class
    if _filters(client) and client.filter_event(event) is None:
        return None
    return event


@dataclass(frozen=True)
class _Added:
    """The facets the client added to a run's first event (or replaced), to give its later events."""

    run_id: str
    namespace: str
    job: str
    run_facets: dict[str, Any]
    job_facets: dict[str, Any]

    def fits(self, event: Event) -> bool:
        return (
            type(event) is RunEvent
            and event.run.runId == self.run_id
            and event.job.namespace == self.namespace
            and event.job.name == self.job
        )


_LOOKED_AT = (("tags",), ("tags", "sourceCodeLocation"))
"""The run facets and the job facets whose presence changes what the client adds (its tags are merged into a tags
facet the event has; a source code location it has is kept)."""


class Enrichments:
    """What the client added to the first event of a delivery's runs that held none of the facets
    :data:`_LOOKED_AT` names, for the first events of its later runs that hold none either (see the module doc).
    Shared by the :class:`Enricher` of each run; its facets are shared by every event given them, as a run's
    events share theirs, and nothing changes them once added."""

    def __init__(self, client: OpenLineageClient) -> None:
        self.client = client
        self.learned: tuple[dict[str, Any], dict[str, Any]] | None = None

    def applies(self, event: Event) -> bool:
        """Whether what the client adds to ``event`` is what it added to every other run event of its kind."""
        if not _learnable(event, self.client) or _collects_environment_variables(self.client):
            return False
        run_facets, job_facets = event.run.facets or {}, event.job.facets or {}
        return not any(key in run_facets for key in _LOOKED_AT[0]) and not any(
            key in job_facets for key in _LOOKED_AT[1]
        )


class Enricher:
    """:func:`prepare` for the events handed over together (a query's), asking the client once per run."""

    def __init__(self, client: OpenLineageClient, runs: Enrichments | None = None) -> None:
        self.client = client
        self.runs = runs
        """What the client added to the runs before (see :class:`Enrichments`)."""
        self._added: _Added | None = None

    def __call__(self, event: Event) -> Event | None:
        added = self._added
        if added is not None and added.fits(event):
            return _given(cast(RunEvent, event), added.run_facets, added.job_facets)
        self._added = None
        runs = self.runs if self.runs is not None and self.runs.applies(event) else None
        if runs is not None and runs.learned is not None:
            run_event = cast(RunEvent, event)  # applies: a RunEvent
            self._added = _Added(run_event.run.runId, run_event.job.namespace, run_event.job.name, *runs.learned)
            return _given(run_event, *runs.learned)
        if not _learnable(event, self.client):
            return prepare(self.client, event)
        run, job = event.run, event.job
        run_before, job_before = dict(run.facets or {}), dict(job.facets or {})
        enriched = prepare(self.client, event)
        same = enriched is event and event.run is run and event.job is job
        run_after, job_after = run.facets or {}, job.facets or {}
        if same and run_before.keys() <= run_after.keys() and job_before.keys() <= job_after.keys():
            self._added = _Added(
                run.runId,
                job.namespace,
                job.name,
                {key: facet for key, facet in run_after.items() if run_before.get(key) is not facet},
                {key: facet for key, facet in job_after.items() if job_before.get(key) is not facet},
            )
            if runs is not None:
                # Shared by the events of every later run, and never changed: the encoders convert them once in all.
                for facet in (*self._added.run_facets.values(), *self._added.job_facets.values()):
                    lasting(facet)
                runs.learned = (self._added.run_facets, self._added.job_facets)
        return enriched


def _given(event: RunEvent, run_facets: dict[str, Any], job_facets: dict[str, Any]) -> RunEvent:
    """``event`` with the facets the client gave another event like it: in place, as the client does (each event
    has its own dicts of facets)."""
    run, job = event.run, event.job
    if run_facets:
        if run.facets is None:
            run.facets = {}
        run.facets.update(run_facets)
    if job_facets:
        if job.facets is None:
            job.facets = {}
        job.facets.update(job_facets)
    return event


def _learnable(event: Event, client: OpenLineageClient) -> TypeGuard[RunEvent]:
    """Whether what the client adds to ``event`` can be learned from it: a run event, which the client neither
    filters nor reduces (either may replace or drop it)."""
    return type(event) is RunEvent and not _filters(client) and not _reduces(client)


def _filters(client: OpenLineageClient) -> bool:
    return bool(getattr(client, "_filters", None))


def _reduces(client: OpenLineageClient) -> bool:
    return bool(client.config.dataset.reducing_enabled and hasattr(client, "reduce_datasets"))


def _collects_environment_variables(client: OpenLineageClient) -> bool:
    """Whether openlineage-python's client puts environment variables in events (``facets.environment_variables``
    in its configuration; yes when its configuration does not say)."""
    facets = getattr(getattr(client, "config", None), "facets", None)
    variables = getattr(facets, "environment_variables", None)
    return variables is None or bool(variables)
