"""An Iceberg table as an OpenLineage dataset, the same from Spark and from pyiceberg.

The table's location is the dataset; its name in the catalog goes into ``symlinks``; ``catalog``, ``storage``
and ``version`` describe it. Both engines build their Iceberg datasets here, with :mod:`spark_lineage.naming`
deciding every name, so one table has one identity in the lineage graph whichever engine wrote it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openlineage.client.facet_v2 import dataset_version_dataset, storage_dataset

from iceberg_facets.facets import commit_report_facet, scan_report_facet
from spark_lineage import naming
from spark_lineage.facets import PRODUCER, catalog_facet
from spark_lineage.lineage import DatasetLineage, OutputStatistics, SchemaField


def iceberg_table_dataset(
    catalog: naming.IcebergCatalog, identifier: str, location: str, *, source: str, lifecycle: str | None = None
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
