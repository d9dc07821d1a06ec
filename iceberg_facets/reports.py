"""pyiceberg commits and scans as Iceberg's own metrics reports (the JSON layout of Iceberg Java's
``CommitReportParser`` / ``ScanReportParser``), so that :mod:`spark_lineage.facets.iceberg` turns reports from either
engine into facets the same way.

Iceberg Java builds a commit report from the summary of the snapshot it committed. A pyiceberg transaction can
add several snapshots at once (an overwrite is a delete and an append), so here the ``added-*`` and
``removed-*`` counters are summed over every snapshot the commit added, and ``total-*`` counters come from the
last one, which describes the table after the commit.
"""

from __future__ import annotations

from typing import Any

from iceberg_facets.records import CommitRecord, ScanRecord, SnapshotInfo

# Snapshot summary property -> commit report metric, as Iceberg's CommitMetricsResult reads a summary.
SUMMARY_TO_COMMIT_METRIC = {
    "added-data-files": "added-data-files",
    "deleted-data-files": "removed-data-files",
    "total-data-files": "total-data-files",
    "added-delete-files": "added-delete-files",
    "added-equality-delete-files": "added-equality-delete-files",
    "added-position-delete-files": "added-positional-delete-files",
    "added-dvs": "added-dvs",
    "removed-delete-files": "removed-delete-files",
    "removed-equality-delete-files": "removed-equality-delete-files",
    "removed-position-delete-files": "removed-positional-delete-files",
    "removed-dvs": "removed-dvs",
    "total-delete-files": "total-delete-files",
    "added-records": "added-records",
    "deleted-records": "removed-records",
    "total-records": "total-records",
    "added-files-size": "added-files-size-bytes",
    "removed-files-size": "removed-files-size-bytes",
    "total-files-size": "total-files-size-bytes",
    "added-position-deletes": "added-positional-deletes",
    "removed-position-deletes": "removed-positional-deletes",
    "total-position-deletes": "total-positional-deletes",
    "added-equality-deletes": "added-equality-deletes",
    "removed-equality-deletes": "removed-equality-deletes",
    "total-equality-deletes": "total-equality-deletes",
}
_NANOS_PER_MILLI = 1_000_000


def _counter(value: int) -> dict[str, Any]:
    return {"unit": "count", "value": value}


def _timer(nanos: int) -> dict[str, Any]:
    return {"count": 1, "time-unit": "nanoseconds", "total-duration": nanos}


def commit_report(record: CommitRecord, engine_version: str) -> dict[str, Any]:
    """The commit report for a pyiceberg commit: the last snapshot it added, counters over all of them, the
    attempts it took and the time from its first attempt to its end."""
    metrics: dict[str, Any] = {
        "total-duration": _timer(record.duration_ms * _NANOS_PER_MILLI),
        "attempts": _counter(record.attempts),
    }
    for summary_key, metric in SUMMARY_TO_COMMIT_METRIC.items():
        values = [int(s.summary[summary_key]) for s in record.snapshots if _is_int(s.summary.get(summary_key))]
        if not values:
            continue
        metrics[metric] = _counter(values[-1] if summary_key.startswith("total-") else sum(values))
    report: dict[str, Any] = {
        "table-name": record.table.identifier,
        "metrics": metrics,
        "metadata": {"engine-name": "pyiceberg", "engine-version": engine_version},
    }
    if record.snapshots:
        last = record.snapshots[-1]
        report.update({"snapshot-id": last.snapshot_id, "sequence-number": last.sequence_number})
        report["operation"] = combined_operation(record.snapshots)
    return report


def combined_operation(snapshots: list[SnapshotInfo]) -> str | None:
    """The Iceberg operation a commit performed as a whole. One snapshot: its own. A delete (or a rewrite)
    followed by an append, as pyiceberg's overwrite and upsert commit them, is an ``overwrite``: files were
    both removed and added."""
    operations = [s.operation for s in snapshots if s.operation]
    if not operations:
        return None
    if len(set(operations)) > 1 and "append" in operations:
        return "overwrite"
    return operations[-1]


def scan_report(record: ScanRecord, engine_version: str) -> dict[str, Any]:
    """The scan report for a materialized pyiceberg scan. Files pruned are the snapshot's data files that the
    plan did not keep, whether a manifest or a file's own statistics excluded them."""
    metrics: dict[str, Any] = {
        "total-planning-duration": _timer(record.planning_ns),
        "result-data-files": _counter(record.result_data_files),
        "result-delete-files": _counter(record.result_delete_files),
        "total-file-size-in-bytes": _counter(record.total_file_size_bytes),
    }
    if record.total_data_files is not None:
        metrics["skipped-data-files"] = _counter(max(record.total_data_files - record.result_data_files, 0))
    report: dict[str, Any] = {
        "table-name": record.table.identifier,
        "snapshot-id": record.snapshot_id,
        "filter": record.filter,
        "schema-id": record.schema_id,
        "projected-field-names": record.projected_field_names,
        "metrics": metrics,
        "metadata": {"engine-name": "pyiceberg", "engine-version": engine_version},
    }
    return report


def _is_int(value: Any) -> bool:
    try:
        int(value)
    except (TypeError, ValueError):
        return False
    return True
