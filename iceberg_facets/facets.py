"""Iceberg's commit and scan metrics as OpenLineage facets, under this package's name.

They are defined in :mod:`spark_lineage.facets.iceberg`, beside the Iceberg datasets both engines build, so the
Spark side needs nothing of this package (``iceberg_facets`` depends on ``spark_lineage``, never the reverse).
"""

from __future__ import annotations

from spark_lineage.facets.iceberg import (
    COMMIT_REPORT_SCHEMA,
    SCAN_REPORT_SCHEMA,
    IcebergCommitReportOutputDatasetFacet,
    IcebergScanReportInputDatasetFacet,
    commit_report_facet,
    scan_report_facet,
)

__all__ = [
    "COMMIT_REPORT_SCHEMA",
    "SCAN_REPORT_SCHEMA",
    "IcebergCommitReportOutputDatasetFacet",
    "IcebergScanReportInputDatasetFacet",
    "commit_report_facet",
    "scan_report_facet",
]
