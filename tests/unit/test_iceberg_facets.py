"""Iceberg report JSON -> facets, and Iceberg catalog naming, without a JVM."""

from __future__ import annotations

import json

from openlineage.client.serde import Serde

from spark_lineage.facets.iceberg import commit_report_facet, describe_filter, duration_millis, scan_report_facet
from spark_lineage.naming import IcebergCatalog, TableName

COMMIT = {
    "table-name": "jcat.db.t",
    "snapshot-id": 7923391125037110634,
    "sequence-number": 1,
    "operation": "append",
    "metrics": {
        "total-duration": {"count": 1, "time-unit": "nanoseconds", "total-duration": 407843749},
        "attempts": {"unit": "count", "value": 2},
        "added-data-files": {"unit": "count", "value": 2},
        "total-data-files": {"unit": "count", "value": 2},
        "added-records": {"unit": "count", "value": 5},
        "added-files-size-bytes": {"unit": "bytes", "value": 1264},
        "manifests-created": {"unit": "count", "value": 1},
    },
    "metadata": {"engine-name": "spark"},
}
SCAN = {
    "table-name": "jcat.db.t",
    "snapshot-id": 11,
    "filter": {
        "type": "and",
        "left": {"type": "not-null", "term": "id"},
        "right": {"type": "gt", "term": "id", "value": "(1-digit-int)"},
    },
    "schema-id": 0,
    "projected-field-names": ["id", "v"],
    "metrics": {
        "total-planning-duration": {"count": 1, "time-unit": "nanoseconds", "total-duration": 108452380},
        "result-data-files": {"unit": "count", "value": 1},
        "skipped-data-files": {"unit": "count", "value": 1},
    },
}


def test_commit_report_facet() -> None:
    facet = commit_report_facet(COMMIT, "https://example.com/producer")
    assert json.loads(Serde.to_json(facet)) == {
        "_producer": "https://example.com/producer",
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-2/IcebergCommitReportOutputDatasetFacet.json"
        "#/$defs/IcebergCommitReportOutputDatasetFacet",
        "snapshotId": 7923391125037110634,
        "sequenceNumber": 1,
        "operation": "append",
        "commitMetrics": {
            "totalDuration": 407,
            "attempts": 2,
            "addedDataFiles": 2,
            "totalDataFiles": 2,
            "addedRecords": 5,
            "addedFilesSizeInBytes": 1264,
        },
        "metadata": {"engine-name": "spark"},
    }


def test_scan_report_facet() -> None:
    facet = scan_report_facet(SCAN, "p")
    assert facet.snapshotId == 11
    assert facet.filterDescription == "(not-null(id) and id > (1-digit-int))"
    assert facet.projectedFieldNames == ["id", "v"]
    assert facet.scanMetrics == {"totalPlanningDuration": 108, "resultDataFiles": 1, "skippedDataFiles": 1}
    assert facet.metadata is None


def test_durations_and_filters() -> None:
    assert duration_millis({"time-unit": "microseconds", "total-duration": 2500}) == 2
    assert duration_millis({"count": 0}) is None
    assert describe_filter(True) == ""
    assert describe_filter({"type": "in", "term": "x", "values": [1, 2]}) == "in(x, [1, 2])"


def test_iceberg_catalogs_from_spark_conf() -> None:
    conf = {
        "spark.sql.catalog.h": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.h.type": "hadoop",
        "spark.sql.catalog.h.warehouse": "/data/wh/",
        "spark.sql.catalog.r": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.r.catalog-impl": "org.apache.iceberg.rest.RESTCatalog",
        "spark.sql.catalog.r.uri": "http://rest:8181",
        "spark.sql.catalog.m": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.m.uri": "thrift://metastore:9083",
        "spark.sql.catalog.other": "com.example.Catalog",
    }
    hadoop = IcebergCatalog.from_spark_conf("h", conf)
    assert hadoop == IcebergCatalog("h", "hadoop", "/data/wh/", None)
    assert hadoop.symlink("db.t") == TableName("file:/data/wh", "db.t")
    assert hadoop.default_table_location("db.t") == "file:/data/wh/db/t"
    rest = IcebergCatalog.from_spark_conf("r", conf)
    assert rest is not None and rest.type == "rest"
    assert rest.symlink("db.t") == TableName("http://rest:8181", "db.t")
    hive = IcebergCatalog.from_spark_conf("m", conf)
    assert hive is not None and hive.symlink("db.t") == TableName("hive://metastore:9083", "db.t")
    assert IcebergCatalog.from_spark_conf("other", conf) is None
