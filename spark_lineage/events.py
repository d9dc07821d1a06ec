"""OpenLineage run events for the application run and for each query run, built from plain lineage records
with openlineage-python's event and facet classes."""

from __future__ import annotations

import datetime as dt
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Any, TypeVar

from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    column_lineage_dataset,
    datasource_dataset,
    error_message_run,
    extraction_error_run,
    input_statistics_input_dataset,
    job_type_job,
    lifecycle_state_change_dataset,
    output_statistics_output_dataset,
    ownership_job,
    parent_run,
    processing_engine_run,
    schema_dataset,
    sql_job,
    symlinks_dataset,
    tags_job,
    tags_run,
)
from openlineage.client.uuid import generate_new_uuid

from spark_lineage import costs, naming
from spark_lineage._version import __version__
from spark_lineage.config import LineageConfig, ParentJob
from spark_lineage.costs import Stage
from spark_lineage.delivery.encoding import attrs_field_names, lasting
from spark_lineage.facets import (
    LOGICAL_PLAN_FACET,
    PRODUCER,
    UNKNOWN_FACET,
    SparkApplicationDetailsRunFacet,
    SparkJobDetailsRunFacet,
    SparkPropertiesRunFacet,
    environment_properties_facet,
    logical_plan_facet,
    unknown_facet,
)
from spark_lineage.lineage import (
    ColumnLineage,
    ColumnSource,
    DatasetLineage,
    InputColumn,
    OutputStatistics,
    QueryLineage,
    SchemaField,
)
from spark_lineage.naming.rewrites import DatasetRewrites
from spark_lineage.plan import CapturedQuery, QueryJob, RddJobEnd, RddJobStart, SessionInfo, SparkJobDetails
from spark_lineage.redaction import Redactor

if TYPE_CHECKING:
    from attr import AttrsInstance


@lru_cache(maxsize=16)
def _job_type_facet(job_type: str, processing: str) -> job_type_job.JobTypeJobFacet:
    """A ``jobType`` facet, made once per kind of job (facets are checked as they are made)."""
    return lasting(
        job_type_job.JobTypeJobFacet(
            processingType=processing, integration="SPARK", jobType=job_type, producer=PRODUCER
        )
    )


_T = TypeVar("_T", bound="AttrsInstance")


def unchecked_copy(original: _T, **changes: Any) -> _T:
    """A copy of the attrs object ``original`` with ``changes``, set as attrs' own copying sets them (without
    the class's validators), for values that were checked already (see :meth:`EventBuilder._same_run`), or
    that no check looks at (:func:`job_details_facet`)."""
    cls = type(original)
    copied = object.__new__(cls)
    for name in attrs_field_names(cls) or ():
        object.__setattr__(copied, name, changes[name] if name in changes else getattr(original, name))
    return copied


def iso_time(epoch_ms: int) -> str:
    return dt.datetime.fromtimestamp(epoch_ms / 1000, tz=dt.timezone.utc).isoformat(timespec="milliseconds")


def new_run_id(epoch_ms: int) -> str:
    """A UUIDv7 whose time part is when the run started."""
    return str(generate_new_uuid(dt.datetime.fromtimestamp(epoch_ms / 1000, tz=dt.timezone.utc)))


def error_facet(message: str, stack: str | None, language: str) -> error_message_run.ErrorMessageRunFacet:
    """The ``errorMessage`` run facet of a run that failed, in ``language`` (``JAVA`` for Spark's, ``PYTHON``)."""
    return error_message_run.ErrorMessageRunFacet(
        message=message, programmingLanguage=language, stackTrace=stack, producer=PRODUCER
    )


class RunEventFactory:
    """What every run event of every engine carries (Spark's and pyiceberg's, :mod:`iceberg_facets`), written
    once: its time, the run and job facets configuration adds (tags, owners, environment variables), the
    ``parent`` facet with the root rule, and the facets configuration turns off."""

    def __init__(self, config: LineageConfig, environ: Mapping[str, str] = os.environ) -> None:
        self.config = config
        self._run_facets = _configured_run_facets(config, environ)
        self._job_facets = _configured_job_facets(config)

    def event(
        self,
        state: RunState,
        epoch_ms: int,
        run_id: str,
        job_name: str,
        run_facets: dict[str, Any],
        job_facets: dict[str, Any],
        *,
        inputs: list[InputDataset] | None = None,
        outputs: list[OutputDataset] | None = None,
    ) -> RunEvent:
        """An event of run ``run_id`` of job ``job_name`` (in the configured namespace), at ``epoch_ms``.

        Its run and job are made by openlineage-python's checked constructors (the run id is checked as a
        UUID); the event itself is a copy of one made and checked once (:attr:`_checked_event`), as its other
        fields need no check: its time is written by :func:`iso_time` (openlineage-python's check parses it with
        dateutil: nine tenths of an event's cost), its producer and schema URL are the ones checked there."""
        return unchecked_copy(
            self._checked_event,
            eventType=state,
            eventTime=iso_time(epoch_ms),
            run=Run(runId=run_id, facets=self.run_facets(run_facets)),
            job=Job(namespace=self.config.namespace, name=job_name, facets=self.job_facets(job_facets)),
            inputs=inputs or [],
            outputs=outputs or [],
        )

    @cached_property
    def _checked_event(self) -> RunEvent:
        """An event made by openlineage-python's checked constructor once, with this library's producer: what
        :meth:`event` copies."""
        return RunEvent(
            eventType=RunState.OTHER,
            eventTime=iso_time(0),
            run=Run(runId=str(uuid.UUID(int=0)), facets={}),
            job=Job(namespace=self.config.namespace, name="-", facets={}),
            producer=PRODUCER,
        )

    def run_facets(self, facets: dict[str, Any]) -> dict[str, Any]:
        """An event's run facets: ``facets`` and configuration's, those turned off left out."""
        return self.enabled({**facets, **self._run_facets})

    def job_facets(self, facets: dict[str, Any]) -> dict[str, Any]:
        return self.enabled({**facets, **self._job_facets})

    def enabled(self, facets: dict[str, Any]) -> dict[str, Any]:
        return only_enabled(facets, self.config.facet_enabled)

    def parent(self, parent: ParentJob, top: ParentJob) -> parent_run.ParentRunFacet:
        """The ``parent`` facet of a run under ``parent``; its root is the configured root parent, else the
        configured parent, else ``top`` (the top of the runs this process made)."""
        return parent_facet(parent, self.config.root_parent or self.config.parent or top)


class EventBuilder:
    """Builds the events of one lineage-enabled session: one application run, and a run per query."""

    def __init__(
        self,
        config: LineageConfig,
        session: SessionInfo,
        app_run_id: str,
        environ: Mapping[str, str] = os.environ,
        *,
        run_job_name: str | None = None,
    ) -> None:
        """``run_job_name``: the job of a run that stands in for the application run, as the parent of the runs
        built here (a Spark Connect session's run); by default the application's, ``app_job_name``."""
        self.config = config
        self.session = session
        self.app_run_id = app_run_id
        self.app_job_name = naming.normalize_job_name(config.app_name or session.app_name) or "unknown"
        """The application part of every job name built here."""
        self.run_job_name = run_job_name or self.app_job_name
        self._redactor = Redactor(config.redaction_pattern)
        self._events = RunEventFactory(config, environ)
        self._rewrites = DatasetRewrites.from_config(config.dataset_naming)

    # --- application run -----------------------------------------------------------------------------------

    def application_event(
        self,
        state: RunState,
        epoch_ms: int,
        *,
        error: str | None = None,
        stack: str | None = None,
        run_facets: Mapping[str, Any] | None = None,
    ) -> RunEvent:
        """The application run's event (or the event of the run that stands in for it: ``run_job_name``), with
        ``run_facets`` too."""
        facets: dict[str, Any] = {**self._common_run_facets(), **(run_facets or {})}
        if self.config.parent is not None:
            facets["parent"] = self._events.parent(self.config.parent, self.config.parent)
        if state == RunState.START:
            facets["spark_applicationDetails"] = self._application_details()
        if error is not None:
            facets["errorMessage"] = error_facet(error, stack, "PYTHON")
        job_facets = {"jobType": self._job_type("APPLICATION", "NONE")}
        return self._events.event(state, epoch_ms, self.app_run_id, self.run_job_name, facets, job_facets)

    # --- query runs ----------------------------------------------------------------------------------------

    def query_job_name(self, query: CapturedQuery, lineage: QueryLineage) -> str:
        """``<app>.<physical root node>[.<output suffix>]``, as openlineage-spark names SQL jobs."""
        node = query.executed_node or (
            naming.planned_root_name(query.tree.simple_name) if query.tree else query.func_name
        )
        command = naming.normalize_job_name(node)
        # As the reference: the node part only, which the normalizer has already left without dots.
        if self.config.replace_dot_with_underscore:
            command = command.replace(".", "_")
        name = f"{self.app_job_name}.{command}"
        if self.config.append_dataset_name and lineage.job_suffix:
            name += "." + lineage.job_suffix.replace(".", "_")
        return name

    def query_events(
        self,
        query: CapturedQuery,
        lineage: QueryLineage,
        *,
        parent: ParentJob | None = None,
        streaming: bool = False,
        run_facets: Mapping[str, Any] | None = None,
    ) -> list[RunEvent]:
        """START, a RUNNING event per Spark job the query ran (at the job's start, with ``spark_jobDetails``) and
        one when its first job ended, then COMPLETE or FAIL, for one query, sharing one run id, as
        openlineage-spark reports a SQL execution; its parent is the application run unless ``parent`` says
        otherwise (a micro-batch's streaming query)."""
        job_facets: dict[str, Any] = {"jobType": self._job_type("SQL_JOB", "STREAMING" if streaming else "BATCH")}
        if query.sql:
            job_facets["sql"] = sql_job.SQLJobFacet(query=query.sql, dialect="spark", producer=PRODUCER)
        plan = logical_plan_facet(query.logical_plan)
        query_facets = dict(run_facets or {})
        if plan is not None:
            query_facets[LOGICAL_PLAN_FACET] = plan
        if lineage.unknown is not None:
            query_facets[UNKNOWN_FACET] = unknown_facet(lineage.unknown)
        return self._run_events(
            self.query_job_name(query, lineage),
            job_facets,
            lineage,
            (query.start_ms, query.end_ms),
            query.metrics,
            None if query.succeeded else (query.error or "query failed"),
            query.error_stack,
            parent,
            jobs=query.jobs,
            query_facets=query_facets,
        )

    def rdd_job_events(self, start: RddJobStart, end: RddJobEnd, lineage: QueryLineage) -> list[RunEvent]:
        """START then COMPLETE or FAIL for a Spark job that is no SQL execution (an RDD action), named
        ``<app>.<suffix from its RDDs>`` (``<app>.<job id>`` when its RDDs could not be read), as
        openlineage-spark names it."""
        suffix = naming.normalize_job_name(lineage.job_suffix) or str(start.job_id)
        return self._run_events(
            f"{self.app_job_name}.{suffix}",
            {"jobType": self._job_type("RDD_JOB", "BATCH")},
            lineage,
            (start.time_ms, end.time_ms),
            {},
            end.error,
            end.error_stack,
            start_details=start.details,
        )

    def _run_events(
        self,
        job_name: str,
        job_facets: dict[str, Any],
        lineage: QueryLineage,
        times: tuple[int, int],
        metrics: dict[str, int],
        error: str | None,
        error_stack: str | None,
        parent: ParentJob | None = None,
        *,
        jobs: Sequence[QueryJob] = (),
        start_details: SparkJobDetails | None = None,
        query_facets: dict[str, Any] | None = None,
    ) -> list[RunEvent]:
        """A child run of the application run (or of ``parent``): START at ``times[0]`` (with
        ``start_details``, an RDD job's), RUNNING for ``jobs`` (see :func:`running_moments`), then COMPLETE
        (with ``metrics``), or FAIL with ``error``, at ``times[1]``; ``query_facets`` go on every event."""
        moments = running_moments(jobs)
        # The query's start is its end less its duration, read when the listener ran: a job can seem to start
        # before it. The run spans its jobs.
        start_ms = min([times[0], *(moment.time_ms for moment in moments)])
        end_ms = max([times[1], *(moment.time_ms for moment in moments)])
        run_id = new_run_id(start_ms)
        run_facets = {**self._child_run_facets(lineage, parent), **(query_facets or {})}
        start_facets = {**run_facets, "spark_applicationDetails": self._application_details()}
        if start_details is not None:
            start_facets["spark_jobDetails"] = job_details_facet(start_details)
        inputs = [self._input(d) for d in lineage.inputs]
        # The run's events share their datasets (those with the same statistics), and every output's dataset
        # facets, so each is built, and encoded when spooled (delivery.encoding), once.
        written_to = [rewritten(d, self._rewrites) for d in lineage.outputs]
        written_facets = [dataset_facets(d, self.config.facet_enabled) for d in written_to]
        outputs: dict[int, list[OutputDataset]] = {}

        first: list[RunEvent] = []

        def event(state: RunState, epoch_ms: int, facets: dict[str, Any], written: dict[str, int] | None) -> RunEvent:
            """``written``: the metrics the outputs' statistics come from, ``None`` for none."""
            key = id(written)
            if key not in outputs:
                outputs[key] = [
                    output_dataset(d, self.config.facet_enabled, written, f) for d, f in zip(written_to, written_facets)
                ]
            if first:
                return self._same_run(first[0], state, epoch_ms, facets, list(outputs[key]))
            first.append(
                self._events.event(
                    state, epoch_ms, run_id, job_name, facets, job_facets, inputs=inputs, outputs=list(outputs[key])
                )
            )
            return first[0]

        events = [event(RunState.START, start_ms, start_facets, None)]
        with costs.stage(Stage.RUNNING_EVENTS):
            for moment in moments:
                if moment.details is None:  # the first job's end: what the outputs got so far is known
                    events.append(event(RunState.RUNNING, moment.time_ms, run_facets, metrics))
                else:
                    facets = {**start_facets, "spark_jobDetails": job_details_facet(moment.details)}
                    events.append(event(RunState.RUNNING, moment.time_ms, facets, None))
        if error is None:
            events.append(event(RunState.COMPLETE, end_ms, run_facets, metrics))
        else:
            end_facets = dict(run_facets)
            end_facets["errorMessage"] = error_facet(error, error_stack, "JAVA")
            events.append(event(RunState.FAIL, end_ms, end_facets, None))
        return events

    # --- streaming query runs ------------------------------------------------------------------------------

    def stream_event(
        self,
        state: RunState,
        epoch_ms: int,
        run: ParentJob,
        lineage: QueryLineage | None,
        *,
        error: str | None = None,
    ) -> RunEvent:
        """An event of a streaming query's run, which spans the query from start to termination; its
        micro-batches are runs of their own under it (see :meth:`query_events`)."""
        run_facets = self._child_run_facets(lineage or QueryLineage(), None)
        if state == RunState.START:
            run_facets["spark_applicationDetails"] = self._application_details()
        if error is not None:
            run_facets["errorMessage"] = error_facet(error, None, "JAVA")
        job_facets = {"jobType": self._job_type("STREAMING_QUERY", "STREAMING")}
        return self._events.event(
            state,
            epoch_ms,
            run.run_id,
            run.name,
            run_facets,
            job_facets,
            inputs=[self._input(d) for d in lineage.inputs] if lineage else None,
            outputs=[self._output(d, None) for d in lineage.outputs] if lineage else None,
        )

    def stream_job_name(self, query_name: str | None) -> str:
        """``<app>.<query name>``; an unnamed query is ``<app>.streaming_query``."""
        return f"{self.app_job_name}.{naming.normalize_job_name(query_name or '') or 'streaming_query'}"

    # --- runs told event by event (a Spark Connect client's actions) -----------------------------------------

    def action_event(
        self,
        state: RunState,
        epoch_ms: int,
        run_id: str,
        job_name: str,
        lineage: QueryLineage,
        *,
        sql: str | None = None,
        error: str | None = None,
        run_facets: Mapping[str, Any] | None = None,
        start: RunEvent | None = None,
        outputs_of_start: bool = False,
    ) -> RunEvent:
        """One event of a query run under the application run whose events are built as it goes (its end is
        not known at its start): a Spark Connect client's action, seen from the client. ``start``: the run's
        START, when this is a later event of it (made from it as :meth:`_same_run` makes one: its job and inputs
        are the START's, and with ``outputs_of_start`` its outputs too, ``lineage``'s being those)."""
        facets = {**self._child_run_facets(lineage, None), **(run_facets or {})}
        if state == RunState.START:
            facets["spark_applicationDetails"] = self._application_details()
        if error is not None:
            facets["errorMessage"] = error_facet(error, None, "JAVA")
        if start is not None:
            if outputs_of_start:
                outputs = list(start.outputs or [])
            else:
                outputs = [self._output(d, None) for d in lineage.outputs]
            return self._same_run(start, state, epoch_ms, facets, outputs)
        job_facets: dict[str, Any] = {"jobType": self._job_type("SQL_JOB", "BATCH")}
        if sql:
            job_facets["sql"] = sql_job.SQLJobFacet(query=sql, dialect="spark", producer=PRODUCER)
        return self._events.event(
            state,
            epoch_ms,
            run_id,
            job_name,
            facets,
            job_facets,
            inputs=[self._input(d) for d in lineage.inputs],
            outputs=[self._output(d, None) for d in lineage.outputs],
        )

    # --- pieces --------------------------------------------------------------------------------------------

    def _same_run(
        self,
        first: RunEvent,
        state: RunState,
        epoch_ms: int,
        run_facets: dict[str, Any],
        outputs: list[OutputDataset],
    ) -> RunEvent:
        """Another event of ``first``'s run: its run id, job and inputs, with a state, time, run facets and
        outputs of its own, as :meth:`RunEventFactory.event` would make it (``tests/unit/test_events.py`` holds it
        to that).

        openlineage-python checks every field as an event is made: it parses the event time with dateutil and
        the run id as a UUID, and every url. That is most of an event's cost, and a query run has about six
        events. What they share was checked when ``first`` was made, the time is written by :func:`iso_time`
        as it was there, and the facets and datasets are objects that were checked when made: so the other
        events of the run are made without checking it all again. Each gets its own run, job and lists (the
        client's enrichment changes an event's facets in place)."""
        run = unchecked_copy(first.run, facets=self._events.run_facets(run_facets))
        job = unchecked_copy(first.job, facets=dict(first.job.facets or {}))
        return unchecked_copy(
            first,
            eventType=state,
            eventTime=iso_time(epoch_ms),
            run=run,
            job=job,
            inputs=list(first.inputs or []),
            outputs=outputs,
        )

    def _common_run_facets(self) -> dict[str, Any]:
        """The run facets every run gets (a new dict of facets made once: they depend on the session alone)."""
        return dict(self._session_run_facets)

    @cached_property
    def _session_run_facets(self) -> dict[str, Any]:
        conf = self.session.conf
        # Spark's rule for confs (a secret key or a secret-looking value); the rest of the event is redacted
        # when it is spooled.
        properties = self._redactor.properties(
            {key: conf[key] for key in self.config.captured_properties if key in conf}
        )
        return {
            "processing_engine": lasting(
                processing_engine_run.ProcessingEngineRunFacet(
                    version=self.session.spark_version,
                    name="spark",
                    openlineageAdapterVersion=__version__,
                    producer=PRODUCER,
                )
            ),
            "spark_properties": lasting(SparkPropertiesRunFacet(properties=properties, producer=PRODUCER)),
        }

    def _application_details(self) -> SparkApplicationDetailsRunFacet:
        return self._session_application_details

    @cached_property
    def _session_application_details(self) -> SparkApplicationDetailsRunFacet:
        s = self.session
        return lasting(
            SparkApplicationDetailsRunFacet(
                master=s.master,
                appName=s.app_name,
                applicationId=s.app_id,
                deployMode=s.deploy_mode,
                driverHost=s.driver_host,
                userName=s.user,
                uiWebUrl=s.ui_url,
                producer=PRODUCER,
            )
        )

    def _job_type(self, job_type: str, processing: str) -> job_type_job.JobTypeJobFacet:
        return _job_type_facet(job_type, processing)

    def _child_run_facets(self, lineage: QueryLineage, parent: ParentJob | None) -> dict[str, Any]:
        """The run facets of a run under the application run (directly, or under ``parent``, which is)."""
        application = ParentJob(self.config.namespace, self.run_job_name, self.app_run_id)
        run_facets = self._common_run_facets()
        run_facets["parent"] = self._events.parent(parent or application, application)
        if lineage.errors:
            run_facets["extractionError"] = extraction_error_facet(tuple(lineage.errors))
        return run_facets

    def _input(self, dataset: DatasetLineage) -> InputDataset:
        return input_dataset(rewritten(dataset, self._rewrites), self.config.facet_enabled)

    def _output(self, dataset: DatasetLineage, metrics: dict[str, int] | None) -> OutputDataset:
        return output_dataset(rewritten(dataset, self._rewrites), self.config.facet_enabled, metrics)


@dataclass(frozen=True)
class RunningMoment:
    """When a query run gets a RUNNING event: a job's start (``details``: which job), or its first job's end
    (``details`` ``None``)."""

    time_ms: int
    details: SparkJobDetails | None = None


def running_moments(jobs: Sequence[QueryJob]) -> list[RunningMoment]:
    """The RUNNING events of a query run, in time order, as openlineage-spark sends them for a SQL execution:
    one at each of its jobs' starts, and one when the first of them ended, if it succeeded (a failed job ends
    the run with FAIL)."""
    moments = [RunningMoment(job.start_ms, job.details) for job in jobs]
    ended = [job for job in jobs if job.end_ms is not None]
    if ended:
        first = min(ended, key=lambda job: (job.end_ms or 0, job.details.job_id))
        if first.succeeded and first.end_ms is not None:
            moments.append(RunningMoment(first.end_ms))
    # A job's end comes after its own start: at the same millisecond, starts first.
    return sorted(moments, key=lambda moment: (moment.time_ms, moment.details is None))


def job_details_facet(details: SparkJobDetails) -> SparkJobDetailsRunFacet:
    """``spark_jobDetails`` of a Spark job: a copy of a facet made (and checked: its producer and schema URL)
    once, with the job's own values in the fields no check looks at."""
    return unchecked_copy(
        _job_details_prototype(),
        jobId=details.job_id,
        jobDescription=details.description,
        jobGroup=details.group,
        jobCallSite=details.call_site,
    )


@lru_cache(maxsize=256)
def extraction_error_facet(errors: tuple[str, ...]) -> extraction_error_run.ExtractionErrorRunFacet:
    """``extractionError``: what a run's lineage could not say, and why (made once per list of reasons, and never
    changed: a query run's events share it, and so do the runs of queries that miss the same things)."""
    return lasting(
        extraction_error_run.ExtractionErrorRunFacet(
            totalTasks=len(errors),
            failedTasks=len(errors),
            errors=[extraction_error_run.Error(errorMessage=e, task="spark_lineage") for e in errors],
            producer=PRODUCER,
        )
    )


@lru_cache(maxsize=1)
def _job_details_prototype() -> SparkJobDetailsRunFacet:
    return SparkJobDetailsRunFacet(jobId=0, producer=PRODUCER)


def rewritten(dataset: DatasetLineage, rewrites: DatasetRewrites) -> DatasetLineage:
    """``dataset`` as events name it once the ``dataset.*`` keys have rewritten identities: its own identity
    (and so its ``dataSource``), and the input datasets its column lineage names, which stay the same datasets
    as the event's inputs. Symlinks keep their catalog names."""
    if not rewrites:
        return dataset
    lineage = dataset.column_lineage

    def source(column: ColumnSource) -> ColumnSource:
        renamed = InputColumn(rewrites.identifier(column.column.dataset), column.column.field)
        return ColumnSource(renamed, column.transformations)

    return replace(
        dataset,
        identifier=rewrites.identifier(dataset.identifier),
        column_lineage=None
        if lineage is None
        else ColumnLineage(
            fields={name: [source(s) for s in sources] for name, sources in lineage.fields.items()},
            dataset=[source(s) for s in lineage.dataset],
        ),
    )


def _configured_job_facets(config: LineageConfig) -> dict[str, Any]:
    """Every event's job facets from configuration: ``ownership`` (``job.owners.<type>``), ``tags``
    (``job.tags``; openlineage-python adds the tags of its own configuration when it sends the event)."""
    facets: dict[str, Any] = {}
    if config.job_owners:
        facets["ownership"] = ownership_job.OwnershipJobFacet(
            owners=[ownership_job.Owner(name=owner.name, type=owner.type) for owner in config.job_owners],
            producer=PRODUCER,
        )
    if config.job_tags:
        facets["tags"] = tags_job.TagsJobFacet(
            tags=[tags_job.TagsJobFacetFields(key=t.key, value=t.value, source=t.source) for t in config.job_tags],
            producer=PRODUCER,
        )
    return facets


def _configured_run_facets(config: LineageConfig, environ: Mapping[str, str]) -> dict[str, Any]:
    """Every event's run facets from configuration: ``tags`` (``run.tags``) and ``environment-properties``
    (``facets.custom_environment_variables``, read once: the driver's environment does not change)."""
    facets: dict[str, Any] = {}
    if config.run_tags:
        facets["tags"] = tags_run.TagsRunFacet(
            tags=[tags_run.TagsRunFacetFields(key=t.key, value=t.value, source=t.source) for t in config.run_tags],
            producer=PRODUCER,
        )
    if config.environment_variables:
        facets["environment-properties"] = environment_properties_facet(
            {name: environ.get(name) for name in config.environment_variables}
        )
    return facets


@lru_cache(maxsize=64)
def parent_facet(parent: ParentJob, root: ParentJob) -> parent_run.ParentRunFacet:
    """The ``parent`` run facet: the run this one belongs to, and the root of that run's tree (made once per
    parent and root: a facet is never changed once made, so every run of a parent shares it)."""
    return lasting(
        parent_run.ParentRunFacet(
            run=parent_run.Run(runId=parent.run_id),
            job=parent_run.Job(namespace=parent.namespace, name=parent.name),
            root=parent_run.Root(
                run=parent_run.RootRun(runId=root.run_id),
                job=parent_run.RootJob(namespace=root.namespace, name=root.name),
            ),
            producer=PRODUCER,
        )
    )


def only_enabled(facets: dict[str, Any], enabled: Callable[[str], bool]) -> dict[str, Any]:
    """The facets whose names configuration has not disabled."""
    return {name: facet for name, facet in facets.items() if enabled(name)}


def dataset_facets(dataset: DatasetLineage, enabled: Callable[[str], bool]) -> dict[str, Any]:
    """The dataset facets of a dataset, in any engine's events: data source, schema, symlinks, lifecycle, and
    whatever the handler attached."""
    facets: dict[str, Any] = {"dataSource": _datasource_facet(dataset.identifier.namespace)}
    if dataset.schema is not None:
        facets["schema"] = _schema_facet(tuple(dataset.schema))
    if dataset.symlinks:
        facets["symlinks"] = symlinks_dataset.SymlinksDatasetFacet(
            identifiers=[
                symlinks_dataset.Identifier(namespace=s.namespace, name=s.name, type=s.type) for s in dataset.symlinks
            ],
            producer=PRODUCER,
        )
    if dataset.lifecycle is not None:
        previous = dataset.previous
        facets["lifecycleStateChange"] = _lifecycle_facet(
            dataset.lifecycle, None if previous is None else (previous.namespace, previous.name)
        )
    if dataset.column_lineage is not None:
        facets["columnLineage"] = column_lineage_facet(dataset.column_lineage)
    facets.update(dataset.extra_facets)
    return only_enabled(facets, enabled)


@lru_cache(maxsize=64)
def _datasource_facet(namespace: str) -> datasource_dataset.DatasourceDatasetFacet:
    """``dataSource``, made once per namespace (as every facet made once per value here: a facet is never changed
    once made, and openlineage-python checks each field of each facet as it is made)."""
    return lasting(datasource_dataset.DatasourceDatasetFacet(name=namespace, uri=namespace, producer=PRODUCER))


@lru_cache(maxsize=64)
def _lifecycle_facet(
    change: lifecycle_state_change_dataset.LifecycleStateChange, previous: tuple[str, str] | None
) -> lifecycle_state_change_dataset.LifecycleStateChangeDatasetFacet:
    """``lifecycleStateChange``, made once per change (and the name a rename had before)."""
    return lasting(
        lifecycle_state_change_dataset.LifecycleStateChangeDatasetFacet(
            lifecycleStateChange=change,
            previousIdentifier=None
            if previous is None
            else lifecycle_state_change_dataset.PreviousIdentifier(namespace=previous[0], name=previous[1]),
            producer=PRODUCER,
        )
    )


@lru_cache(maxsize=256)
def _schema_facet(schema: tuple[SchemaField, ...]) -> schema_dataset.SchemaDatasetFacet:
    """``schema``, made once per schema (most queries read and write the same tables)."""
    return lasting(schema_dataset.SchemaDatasetFacet(fields=[_schema_field(f) for f in schema], producer=PRODUCER))


def column_lineage_facet(lineage: ColumnLineage) -> column_lineage_dataset.ColumnLineageDatasetFacet:
    """``columnLineage``: per output column, its input columns and how each is used; dataset-wide ones apart.
    Made once per value (a job's queries mostly write the same columns from the same ones)."""
    return _column_lineage_facet(
        tuple((name, tuple(sources)) for name, sources in lineage.fields.items()), tuple(lineage.dataset)
    )


@lru_cache(maxsize=256)
def _column_lineage_facet(
    fields: tuple[tuple[str, tuple[ColumnSource, ...]], ...], dataset: tuple[ColumnSource, ...]
) -> column_lineage_dataset.ColumnLineageDatasetFacet:
    def input_fields(sources: tuple[ColumnSource, ...]) -> list[column_lineage_dataset.InputField]:
        return [
            column_lineage_dataset.InputField(
                namespace=source.column.dataset.namespace,
                name=source.column.dataset.name,
                field=source.column.field,
                transformations=[
                    column_lineage_dataset.Transformation(
                        type=t.type, subtype=t.subtype, description=t.description, masking=t.masking
                    )
                    for t in source.transformations
                ],
            )
            for source in sources
        ]

    return lasting(
        column_lineage_dataset.ColumnLineageDatasetFacet(
            fields={name: column_lineage_dataset.Fields(inputFields=input_fields(sources)) for name, sources in fields},
            dataset=input_fields(dataset) or None,
            producer=PRODUCER,
        )
    )


def input_dataset(dataset: DatasetLineage, enabled: Callable[[str], bool]) -> InputDataset:
    """An input; with ``inputStatistics`` on every event of the run when its scan's size is known, as
    openlineage-spark reports a file relation's (bytes and files; no rows)."""
    input_facets = dict(dataset.input_facets)
    stats = dataset.input_statistics
    if stats is not None and "inputStatistics" not in input_facets:
        input_facets["inputStatistics"] = _input_statistics_facet(stats.rows, stats.bytes, stats.files)
    return InputDataset(
        namespace=dataset.identifier.namespace,
        name=dataset.identifier.name,
        facets=dataset_facets(dataset, enabled),
        inputFacets=only_enabled(input_facets, enabled),
    )


@lru_cache(maxsize=256)
def _input_statistics_facet(
    rows: int | None, size: int | None, files: int | None
) -> input_statistics_input_dataset.InputStatisticsInputDatasetFacet:
    """``inputStatistics``, made once per value (a job reads the same files query after query)."""
    return lasting(
        input_statistics_input_dataset.InputStatisticsInputDatasetFacet(
            rowCount=rows, size=size, fileCount=files, producer=PRODUCER
        )
    )


def output_dataset(
    dataset: DatasetLineage,
    enabled: Callable[[str], bool],
    metrics: dict[str, int] | None,
    facets: dict[str, Any] | None = None,
) -> OutputDataset:
    """An output; ``metrics`` (a finished run's, else ``None``) supply the output statistics when the dataset
    has none of its own. ``facets``: its :func:`dataset_facets`, when the caller made them already (a run's
    events share them, whatever statistics each one carries)."""
    output_facets: dict[str, Any] = {}
    if metrics is not None:
        stats = dataset.statistics
        if stats is None and ("numOutputRows" in metrics or "numOutputBytes" in metrics):
            stats = OutputStatistics(
                metrics.get("numOutputRows"), metrics.get("numOutputBytes"), metrics.get("numFiles")
            )
        if stats is not None:
            output_facets["outputStatistics"] = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                rowCount=stats.rows, size=stats.bytes, fileCount=stats.files, producer=PRODUCER
            )
        output_facets.update(dataset.output_facets)
    return OutputDataset(
        namespace=dataset.identifier.namespace,
        name=dataset.identifier.name,
        facets=dataset_facets(dataset, enabled) if facets is None else facets,
        outputFacets=only_enabled(output_facets, enabled),
    )


def _schema_field(field: SchemaField) -> schema_dataset.SchemaDatasetFacetFields:
    return schema_dataset.SchemaDatasetFacetFields(
        name=field.name,
        type=field.type,
        fields=[_schema_field(f) for f in field.fields] or None,
    )
