"""An Iceberg table as an OpenLineage dataset, and Iceberg's commit and scan metrics as its facets: the same
from Spark and from pyiceberg.

The table's location is the dataset; its name in the catalog goes into ``symlinks``; ``catalog``, ``storage``
and ``version`` describe it, with :mod:`spark_lineage.naming` deciding every name, so one table has one
identity in the lineage graph whichever engine wrote it. The Spark handlers
(:mod:`spark_lineage.handlers.iceberg`) and :mod:`iceberg_facets` both build their Iceberg datasets here.

The facet classes follow openlineage-python's pattern (attrs subclasses that name their schema). The builders
read Iceberg's own report JSON, as ``CommitReportParser`` / ``ScanReportParser`` write it in the JVM, so Spark
(reports from the driver JVM) and pyiceberg (reports measured in Python, in the same layout) share one
conversion.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attr
from openlineage.client.facet_v2 import dataset_version_dataset, storage_dataset
from openlineage.client.generated.base import InputDatasetFacet, OutputDatasetFacet
from openlineage.client.generated.lifecycle_state_change_dataset import LifecycleStateChange

from spark_lineage import naming
from spark_lineage.facets import PRODUCER, catalog_facet
from spark_lineage.lineage import DatasetLineage, OutputStatistics, SchemaField

COMMIT_REPORT_SCHEMA = (
    "https://openlineage.io/spec/facets/1-0-2/IcebergCommitReportOutputDatasetFacet.json"
    "#/$defs/IcebergCommitReportOutputDatasetFacet"
)
SCAN_REPORT_SCHEMA = (
    "https://openlineage.io/spec/facets/1-0-1/IcebergScanReportInputDatasetFacet.json"
    "#/$defs/IcebergScanReportInputDatasetFacet"
)

# Iceberg metric name -> facet field, for the counters each facet carries.
COMMIT_COUNTERS = {
    "attempts": "attempts",
    "added-data-files": "addedDataFiles",
    "removed-data-files": "removedDataFiles",
    "total-data-files": "totalDataFiles",
    "added-delete-files": "addedDeleteFiles",
    "added-equality-delete-files": "addedEqualityDeleteFiles",
    "added-positional-delete-files": "addedPositionalDeleteFiles",
    "added-dvs": "addedDVs",
    "removed-delete-files": "removedDeleteFiles",
    "removed-equality-delete-files": "removedEqualityDeleteFiles",
    "removed-positional-delete-files": "removedPositionalDeleteFiles",
    "removed-dvs": "removedDVs",
    "total-delete-files": "totalDeleteFiles",
    "added-records": "addedRecords",
    "removed-records": "removedRecords",
    "total-records": "totalRecords",
    "added-files-size-bytes": "addedFilesSizeInBytes",
    "removed-files-size-bytes": "removedFilesSizeInBytes",
    "total-files-size-bytes": "totalFilesSizeInBytes",
    "added-positional-deletes": "addedPositionalDeletes",
    "removed-positional-deletes": "removedPositionalDeletes",
    "total-positional-deletes": "totalPositionalDeletes",
    "added-equality-deletes": "addedEqualityDeletes",
    "removed-equality-deletes": "removedEqualityDeletes",
    "total-equality-deletes": "totalEqualityDeletes",
}
SCAN_COUNTERS = {
    "result-data-files": "resultDataFiles",
    "result-delete-files": "resultDeleteFiles",
    "total-data-manifests": "totalDataManifests",
    "total-delete-manifests": "totalDeleteManifests",
    "scanned-data-manifests": "scannedDataManifests",
    "skipped-data-manifests": "skippedDataManifests",
    "total-file-size-in-bytes": "totalFileSizeInBytes",
    "total-delete-file-size-in-bytes": "totalDeleteFileSizeInBytes",
    "skipped-data-files": "skippedDataFiles",
    "skipped-delete-files": "skippedDeleteFiles",
    "scanned-delete-manifests": "scannedDeleteManifests",
    "skipped-delete-manifests": "skippedDeleteManifests",
    "indexed-delete-files": "indexedDeleteFiles",
    "equality-delete-files": "equalityDeleteFiles",
    "positional-delete-files": "positionalDeleteFiles",
}
_NANOS_PER = {"nanoseconds": 1, "microseconds": 1_000, "milliseconds": 1_000_000, "seconds": 1_000_000_000}


@attr.define
class IcebergCommitReportOutputDatasetFacet(OutputDatasetFacet):
    """``icebergCommitReport``: what one Iceberg commit did to the table, from Iceberg's CommitReport."""

    snapshotId: int | None = None
    sequenceNumber: int | None = None
    operation: str | None = None
    commitMetrics: dict[str, int] = attr.field(factory=dict)
    metadata: dict[str, str] | None = None

    @staticmethod
    def _get_schema() -> str:
        return COMMIT_REPORT_SCHEMA


@attr.define
class IcebergScanReportInputDatasetFacet(InputDatasetFacet):
    """``icebergScanReport``: how an Iceberg scan was planned, from Iceberg's ScanReport."""

    snapshotId: int | None = None
    filterDescription: str | None = None
    schemaId: int | None = None
    projectedFieldNames: list[str] = attr.field(factory=list)
    scanMetrics: dict[str, int] = attr.field(factory=dict)
    metadata: dict[str, str] | None = None

    @staticmethod
    def _get_schema() -> str:
        return SCAN_REPORT_SCHEMA


def duration_millis(timer: Mapping[str, Any] | None) -> int | None:
    """An Iceberg timer (``{"time-unit": "nanoseconds", "total-duration": 123}``) in whole milliseconds."""
    if not timer or "total-duration" not in timer:
        return None
    nanos = int(timer["total-duration"]) * _NANOS_PER.get(str(timer.get("time-unit", "nanoseconds")), 1)
    return nanos // 1_000_000


def _counters(metrics: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, int]:
    return {
        field: int(metrics[key]["value"])
        for key, field in names.items()
        if isinstance(metrics.get(key), Mapping) and "value" in metrics[key]
    }


def _report_metrics(
    metrics: Mapping[str, Any], counters: Mapping[str, str], timer: str, timer_field: str
) -> dict[str, int]:
    values = _counters(metrics, counters)
    duration = duration_millis(metrics.get(timer))
    return values if duration is None else {timer_field: duration, **values}


def commit_report_facet(report: Mapping[str, Any], producer: str) -> IcebergCommitReportOutputDatasetFacet:
    """The facet for a commit report in Iceberg's JSON layout."""
    commit_metrics = _report_metrics(report.get("metrics", {}), COMMIT_COUNTERS, "total-duration", "totalDuration")
    return IcebergCommitReportOutputDatasetFacet(
        snapshotId=report.get("snapshot-id"),
        sequenceNumber=report.get("sequence-number"),
        operation=report.get("operation"),
        commitMetrics=commit_metrics,
        metadata=dict(report["metadata"]) if report.get("metadata") else None,
        producer=producer,
    )


def scan_report_facet(report: Mapping[str, Any], producer: str) -> IcebergScanReportInputDatasetFacet:
    """The facet for a scan report in Iceberg's JSON layout."""
    scan_metrics = _report_metrics(
        report.get("metrics", {}), SCAN_COUNTERS, "total-planning-duration", "totalPlanningDuration"
    )
    return IcebergScanReportInputDatasetFacet(
        snapshotId=report.get("snapshot-id"),
        filterDescription=describe_filter(report.get("filter")),
        schemaId=report.get("schema-id"),
        projectedFieldNames=list(report.get("projected-field-names", [])),
        scanMetrics=scan_metrics,
        metadata=dict(report["metadata"]) if report.get("metadata") else None,
        producer=producer,
    )


def describe_filter(expression: Any) -> str:
    """Iceberg's filter expression JSON as readable text: ``id > (1-digit-int) and not_null(id)``."""
    if expression is None or expression is True or expression == "true":
        return ""
    if not isinstance(expression, Mapping):
        return str(expression)
    kind = expression.get("type", "")
    if kind in ("and", "or"):
        return f"({describe_filter(expression.get('left'))} {kind} {describe_filter(expression.get('right'))})"
    if kind == "not":
        return f"not ({describe_filter(expression.get('child'))})"
    term = expression.get("term")
    operators = {"lt": "<", "lt-eq": "<=", "gt": ">", "gt-eq": ">=", "eq": "==", "not-eq": "!="}
    if kind in operators:
        return f"{term} {operators[kind]} {expression.get('value')}"
    if "values" in expression:
        return f"{kind}({term}, {expression['values']})"
    return f"{kind}({term})" if term is not None else str(kind)


def iceberg_table_dataset(
    catalog: naming.IcebergCatalog,
    identifier: str,
    location: str,
    *,
    source: str,
    lifecycle: LifecycleStateChange | None = None,
) -> DatasetLineage:
    """The dataset for table ``identifier`` (``db.table``) of ``catalog``, stored at ``location``; ``source`` is
    the engine that saw it (``spark``, ``pyiceberg``)."""
    dataset = DatasetLineage(naming.from_location(location), lifecycle=lifecycle)
    symlink = catalog.symlink(identifier)
    if symlink is not None:
        dataset.symlinks.append(symlink)
    dataset.extra_facets["catalog"] = catalog_facet(
        framework="iceberg",
        type=catalog.type,
        name=catalog.name,
        warehouse=catalog.warehouse,
        metadata=catalog.uri,
        source=source,
    )
    return dataset


def describe_table(
    dataset: DatasetLineage, *, schema: list[SchemaField] | None, file_format: str | None, version: Any = None
) -> None:
    """Add what the table's metadata says: its schema, its file format and the snapshot seen (``version``)."""
    dataset.schema = schema
    dataset.extra_facets["storage"] = storage_dataset.StorageDatasetFacet(
        storageLayer="iceberg", fileFormat=(file_format or "parquet").lower(), producer=PRODUCER
    )
    set_version(dataset, version)


def set_version(dataset: DatasetLineage, version: Any) -> None:
    """The ``version`` facet: the snapshot id the dataset was read at or written as."""
    if version is not None:
        dataset.extra_facets["version"] = dataset_version_dataset.DatasetVersionDatasetFacet(
            datasetVersion=str(version), producer=PRODUCER
        )


def attach_commit_report(dataset: DatasetLineage, report: Mapping[str, Any]) -> int | None:
    """Put a commit report (Iceberg's JSON layout) on an output dataset as ``icebergCommitReport`` and as its
    output statistics; returns the snapshot id it committed."""
    facet = commit_report_facet(report, PRODUCER)
    dataset.output_facets["icebergCommitReport"] = facet
    metrics = facet.commitMetrics
    dataset.statistics = OutputStatistics(
        metrics.get("addedRecords"), metrics.get("addedFilesSizeInBytes"), metrics.get("addedDataFiles")
    )
    return facet.snapshotId


def attach_scan_report(dataset: DatasetLineage, report: Mapping[str, Any]) -> int | None:
    """Put a scan report (Iceberg's JSON layout) on an input dataset as ``icebergScanReport``; returns the
    snapshot id it read."""
    facet = scan_report_facet(report, PRODUCER)
    dataset.input_facets["icebergScanReport"] = facet
    return facet.snapshotId
