"""OpenLineage run events for pyiceberg work, built from records alone.

A commit, scan or table change made outside an :func:`iceberg_facets.run` block is a run of its own, named
``<job>.<action>.<catalog>_<db>_<table>`` as openlineage-spark names a Spark job by its command and output, and
sent as one event once it is over (COMPLETE, or FAIL). A block is one run with the name it was given: START
at its entry, then COMPLETE or FAIL with the tables scanned in it as inputs and the tables committed, created
or dropped in it as outputs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from openlineage.client.event_v2 import InputDataset, OutputDataset, RunEvent, RunState
from openlineage.client.facet_v2 import job_type_job, processing_engine_run
from openlineage.client.generated.lifecycle_state_change_dataset import LifecycleStateChange

from iceberg_facets.records import CommitRecord, RunRecord, ScanRecord, TableChangeRecord, TableInfo
from iceberg_facets.reports import combined_operation, commit_report, scan_report
from spark_lineage import naming
from spark_lineage._version import __version__
from spark_lineage.config import LineageConfig, ParentJob
from spark_lineage.events import RunEventFactory, dataset_facets, error_facet, input_dataset, output_dataset
from spark_lineage.facets import PRODUCER
from spark_lineage.facets.iceberg import (
    attach_commit_report,
    attach_scan_report,
    describe_table,
    iceberg_table_dataset,
    set_version,
)
from spark_lineage.lineage import DatasetLineage

_MAX_CACHED_TABLES = 256


@dataclass(frozen=True)
class RunIdentity:
    """Which run an event belongs to, and the run it is nested in."""

    run_id: str
    job_name: str
    parent: ParentJob | None = None


class IcebergEventBuilder:
    """Builds the events of one ``iceberg_facets.enable()``: its configuration and pyiceberg's version."""

    def __init__(
        self, config: LineageConfig, job_name: str, pyiceberg_version: str, environ: Mapping[str, str] = os.environ
    ) -> None:
        """``environ``: where the environment variables configuration names are read."""
        self.config = config
        self.job_name = job_name
        self.pyiceberg_version = pyiceberg_version
        self._events = RunEventFactory(config, environ)
        # Facets that stay the same from one event to the next are built once: openlineage-python validates
        # every facet it constructs, and the worker's time is taken from the job's threads by the GIL.
        self._engine_facet = processing_engine_run.ProcessingEngineRunFacet(
            version=pyiceberg_version, name="pyiceberg", openlineageAdapterVersion=__version__, producer=PRODUCER
        )
        self._job_type_facets: dict[str, job_type_job.JobTypeJobFacet] = {}
        self._table_facets: dict[tuple[Any, ...], tuple[DatasetLineage, dict[str, Any]]] = {}

    @property
    def _enabled(self) -> Callable[[str], bool]:
        return self.config.facet_enabled

    # --- runs of their own ---------------------------------------------------------------------------------

    def standalone_job_name(self, action: str, table: TableInfo) -> str:
        name = f"{self.job_name}.{action}"
        if self.config.append_dataset_name and table.identifier:
            qualified = f"{table.catalog_name}.{table.identifier}" if table.catalog_name else table.identifier
            name += "." + qualified.replace(".", "_")
        return name

    def commit_event(self, record: CommitRecord, run: RunIdentity) -> RunEvent:
        """The one event of a commit's own run: COMPLETE, or FAIL with the error and the attempts made. A
        START would say nothing more: it could only be sent after the commit, like this one."""
        state = RunState.FAIL if record.error else RunState.COMPLETE
        outputs = [self.output_dataset(record, None)]
        return self.event(
            state, record.end_ms, run, "COMMIT", outputs=outputs, error=record.error, stack=record.error_stack
        )

    def scan_event(self, record: ScanRecord, run: RunIdentity) -> RunEvent:
        return self.event(RunState.COMPLETE, record.end_ms, run, "SCAN", inputs=[self.input_dataset(record)])

    def table_change_event(self, record: TableChangeRecord, run: RunIdentity) -> RunEvent:
        return self.event(RunState.COMPLETE, record.time_ms, run, "DDL", outputs=[self.output_dataset(None, record)])

    @staticmethod
    def commit_action(record: CommitRecord) -> str:
        if record.created:
            return "create_table"
        operation = combined_operation(record.snapshots) or record.attempted_operation
        if operation:
            return operation
        return "alter_table" if record.schema_changed else "commit"

    # --- run blocks ----------------------------------------------------------------------------------------

    def block_event(
        self, state: RunState, epoch_ms: int, run: RunIdentity, record: RunRecord, error: str | None, stack: str | None
    ) -> RunEvent:
        """The COMPLETE or FAIL event of a block: every table it scanned and wrote."""
        inputs = [self.input_dataset(scan) for scan in _last_per_table(record.scans)]
        outputs = []
        changes = {_table_key(c.table): c for c in record.changes}
        commits: dict[tuple[str, str], list[CommitRecord]] = {}
        for commit in record.commits:
            commits.setdefault(_table_key(commit.table), []).append(commit)
        for key in dict.fromkeys([*changes, *commits]):
            merged = merge_commits(commits[key]) if key in commits else None
            outputs.append(self.output_dataset(merged, changes.get(key)))
        return self.event(state, epoch_ms, run, "JOB", inputs=inputs, outputs=outputs, error=error, stack=stack)

    # --- pieces --------------------------------------------------------------------------------------------

    def event(
        self,
        state: RunState,
        epoch_ms: int,
        run: RunIdentity,
        job_type: str,
        *,
        inputs: list[InputDataset] | None = None,
        outputs: list[OutputDataset] | None = None,
        error: str | None = None,
        stack: str | None = None,
    ) -> RunEvent:
        run_facets: dict[str, Any] = {"processing_engine": self._engine_facet}
        parent = run.parent or self.config.parent
        if parent is not None:
            run_facets["parent"] = self._events.parent(parent, parent)
        if error is not None:
            run_facets["errorMessage"] = error_facet(error, stack, "PYTHON")
        job_type_facet = self._job_type_facets.get(job_type)
        if job_type_facet is None:
            job_type_facet = self._job_type_facets[job_type] = job_type_job.JobTypeJobFacet(
                processingType="BATCH", integration="PYICEBERG", jobType=job_type, producer=PRODUCER
            )
        job_facets = {"jobType": job_type_facet}
        return self._events.event(
            state, epoch_ms, run.run_id, run.job_name, run_facets, job_facets, inputs=inputs, outputs=outputs
        )

    def dataset(self, table: TableInfo, lifecycle: LifecycleStateChange | None = None) -> DatasetLineage:
        """The dataset for ``table``, its identity and description facets built once per table and schema."""
        dropped = lifecycle == LifecycleStateChange.DROP
        key = (
            table.catalog_name,
            table.catalog_class,
            tuple(sorted(table.catalog_properties.items())),
            table.identifier,
            table.location,
            tuple(table.schema or ()),
            table.file_format,
            dropped,
        )
        cached = self._table_facets.get(key)
        if cached is None:
            if len(self._table_facets) >= _MAX_CACHED_TABLES:
                self._table_facets.clear()
            template = table_dataset(table, LifecycleStateChange.DROP if dropped else None)
            cached = self._table_facets[key] = (template, dataset_facets(template, lambda name: True))
        template, facets = cached
        return DatasetLineage(template.identifier, lifecycle=lifecycle, extra_facets=dict(facets))

    def input_dataset(self, record: ScanRecord) -> InputDataset:
        dataset = self.dataset(record.table)
        attach_scan_report(dataset, scan_report(record, self.pyiceberg_version))
        set_version(dataset, record.snapshot_id)
        return input_dataset(dataset, self._enabled)

    def output_dataset(self, commit: CommitRecord | None, change: TableChangeRecord | None) -> OutputDataset:
        """A table written: by commits (merged into one record), created or dropped, or both."""
        lifecycle = change.lifecycle if change is not None else None
        if commit is not None and lifecycle is None:
            lifecycle = (
                LifecycleStateChange.CREATE
                if commit.created
                else (LifecycleStateChange.ALTER if commit.schema_changed else None)
            )
        table = commit.table if commit is not None else change.table  # type: ignore[union-attr]
        dataset = self.dataset(table, lifecycle)
        metrics: dict[str, int] = {}  # the run is over: output statistics come from the commit report
        if lifecycle == LifecycleStateChange.DROP:
            return output_dataset(dataset, self._enabled, metrics)
        version = table.current_snapshot_id
        if commit is not None:
            version = attach_commit_report(dataset, commit_report(commit, self.pyiceberg_version)) or version
        if commit is None or commit.error is None:
            set_version(dataset, version)
        return output_dataset(dataset, self._enabled, metrics)


def table_dataset(table: TableInfo, lifecycle: LifecycleStateChange | None = None) -> DatasetLineage:
    """A pyiceberg table as a dataset, named exactly as the Spark side names it."""
    if table.catalog_name:
        catalog = naming.IcebergCatalog.from_pyiceberg(
            table.catalog_name, table.catalog_class, table.catalog_properties
        )
        dataset = iceberg_table_dataset(
            catalog, table.identifier, table.location, source="pyiceberg", lifecycle=lifecycle
        )
    else:  # a scan of a table whose catalog was never seen: its location still names it
        dataset = DatasetLineage(naming.from_location(table.location), lifecycle=lifecycle)
    if lifecycle != LifecycleStateChange.DROP:
        describe_table(dataset, schema=table.schema, file_format=table.file_format)
    return dataset


def merge_commits(commits: list[CommitRecord]) -> CommitRecord:
    """Several commits to one table in one run, as one: snapshots in order, attempts and time added up, the
    table as the last commit left it."""
    last = commits[-1]
    if len(commits) == 1:
        return last
    return replace(
        last,
        snapshots=[s for c in commits for s in c.snapshots],
        attempts=sum(c.attempts for c in commits),
        duration_ms=sum(c.duration_ms for c in commits),
        start_ms=commits[0].start_ms,
        created=any(c.created for c in commits),
        schema_changed=any(c.schema_changed for c in commits),
    )


def _table_key(table: TableInfo) -> tuple[str, str]:
    return (table.catalog_name, table.identifier or table.location)


def _last_per_table(scans: list[ScanRecord]) -> list[ScanRecord]:
    by_table: dict[tuple[str, str], ScanRecord] = {}
    for scan in scans:
        by_table.pop(_table_key(scan.table), None)
        by_table[_table_key(scan.table)] = scan
    return list(by_table.values())
