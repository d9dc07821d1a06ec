"""pyiceberg commits and scans as Iceberg reports, from plain records: no pyiceberg needed except where its own
expression and type objects are converted."""

from __future__ import annotations

import pytest

from iceberg_facets.records import CommitRecord, ScanRecord, SnapshotInfo, TableInfo
from iceberg_facets.reports import combined_operation, commit_report, scan_report
from spark_lineage.facets.iceberg import commit_report_facet, scan_report_facet

TABLE = TableInfo("cat", "SqlCatalog", {}, "db.t", "file:///wh/db/t")


def snapshot(snapshot_id: int, operation: str, **summary: int) -> SnapshotInfo:
    return SnapshotInfo(snapshot_id, snapshot_id, operation, {k.replace("_", "-"): str(v) for k, v in summary.items()})


def test_a_commit_of_several_snapshots_adds_up_changes_and_keeps_the_last_totals() -> None:
    delete = snapshot(1, "delete", deleted_data_files=2, deleted_records=5, removed_files_size=900, total_records=0)
    append = snapshot(2, "append", added_data_files=1, added_records=4, added_files_size=500, total_records=4)
    record = CommitRecord(TABLE, [delete, append], attempts=2, duration_ms=12, start_ms=0, end_ms=20)

    facet = commit_report_facet(commit_report(record, "0.12.0"), "producer")

    assert (facet.snapshotId, facet.sequenceNumber, facet.operation) == (2, 2, "overwrite")
    assert facet.commitMetrics == {
        "totalDuration": 12,
        "attempts": 2,
        "addedDataFiles": 1,
        "removedDataFiles": 2,
        "addedRecords": 4,
        "removedRecords": 5,
        "totalRecords": 4,
        "addedFilesSizeInBytes": 500,
        "removedFilesSizeInBytes": 900,
    }
    assert facet.metadata == {"engine-name": "pyiceberg", "engine-version": "0.12.0"}


def test_a_commit_without_snapshots_has_only_attempts_and_duration() -> None:
    record = CommitRecord(TABLE, [], attempts=3, duration_ms=7, start_ms=0, end_ms=9, error="CommitFailedException: x")
    facet = commit_report_facet(commit_report(record, "0.12.0"), "producer")
    assert (facet.snapshotId, facet.operation, facet.commitMetrics) == (None, None, {"totalDuration": 7, "attempts": 3})


@pytest.mark.parametrize(
    ("operations", "combined"),
    [
        (["append"], "append"),
        (["delete"], "delete"),
        (["overwrite"], "overwrite"),
        (["delete", "append"], "overwrite"),
        (["overwrite", "append"], "overwrite"),
        (["append", "append"], "append"),
        ([], None),
    ],
)
def test_the_operation_of_a_commit(operations: list[str], combined: str | None) -> None:
    assert combined_operation([snapshot(i, op) for i, op in enumerate(operations)]) == combined


def test_a_scan_report_counts_what_pruning_skipped() -> None:
    record = ScanRecord(
        table=TABLE,
        snapshot_id=9,
        schema_id=0,
        filter={"type": "eq", "term": "day", "value": "(1-digit-int)"},
        projected_field_names=["id", "day"],
        planning_ns=3_500_000,
        result_data_files=1,
        result_delete_files=0,
        total_data_files=3,
        total_file_size_bytes=1234,
        start_ms=0,
        end_ms=5,
    )
    facet = scan_report_facet(scan_report(record, "0.12.0"), "producer")
    assert (facet.snapshotId, facet.filterDescription, facet.projectedFieldNames) == (
        9,
        "day == (1-digit-int)",
        ["id", "day"],
    )
    assert facet.scanMetrics == {
        "totalPlanningDuration": 3,
        "resultDataFiles": 1,
        "resultDeleteFiles": 0,
        "totalFileSizeInBytes": 1234,
        "skippedDataFiles": 2,
    }


def test_row_filters_become_iceberg_expression_json_with_masked_values() -> None:
    pytest.importorskip("pyiceberg")
    from pyiceberg.expressions import And, EqualTo, GreaterThanOrEqual, In, IsNull, Not

    from iceberg_facets.visitors import expression_json

    expression = And(And(GreaterThanOrEqual("id", 100), Not(IsNull("name"))), In("day", {1, 22}))
    assert expression_json(expression) == {
        "type": "and",
        "left": {
            "type": "and",
            "left": {"type": "gt-eq", "term": "id", "value": "(3-digit-int)"},
            "right": {"type": "not", "child": {"type": "is-null", "term": "name"}},
        },
        "right": {"type": "in", "term": "day", "values": ["(1-digit-int)", "(2-digit-int)"]},
    }
    assert expression_json(EqualTo("flag", True))["value"] == "(boolean)"


def test_a_bound_row_filter_reads_as_its_unbound_form() -> None:
    """A scan may hold its filter bound to the table's schema: the same JSON, by pyiceberg's own visitor."""
    pytest.importorskip("pyiceberg")
    from pyiceberg.expressions import AlwaysTrue, EqualTo, LessThan, NotNull, Or
    from pyiceberg.expressions.visitors import bind
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    from iceberg_facets.visitors import expression_json

    schema = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType()))
    unbound = Or(LessThan("id", 7), EqualTo("name", "ann"))
    expected = {
        "type": "or",
        "left": {"type": "lt", "term": "id", "value": "(1-digit-int)"},
        "right": {"type": "eq", "term": "name", "value": expression_json(EqualTo("name", "ann"))["value"]},
    }
    assert expression_json(unbound) == expression_json(bind(schema, unbound, case_sensitive=True)) == expected
    assert expected["right"]["value"].startswith("(hash-")  # a string value is never sent, only its hash
    assert expression_json(bind(schema, NotNull("id"), case_sensitive=True)) == {"type": "not-null", "term": "id"}
    assert expression_json(AlwaysTrue()) is True


def test_iceberg_types_get_spark_type_names() -> None:
    pytest.importorskip("pyiceberg")
    from pyiceberg.schema import Schema
    from pyiceberg.types import (
        DecimalType,
        FixedType,
        ListType,
        LongType,
        MapType,
        NestedField,
        StringType,
        StructType,
        TimestampType,
        TimestamptzType,
        UUIDType,
    )

    from iceberg_facets.visitors import spark_schema
    from spark_lineage.lineage import SchemaField

    schema = Schema(
        NestedField(1, "id", LongType()),
        NestedField(2, "price", DecimalType(10, 2)),
        NestedField(3, "at", TimestamptzType()),
        NestedField(4, "local", TimestampType()),
        NestedField(5, "key", UUIDType()),
        NestedField(6, "hash", FixedType(16)),
        NestedField(7, "tags", ListType(8, StringType())),
        NestedField(9, "attrs", MapType(10, StringType(), 11, LongType())),
        NestedField(12, "point", StructType(NestedField(13, "x", LongType()))),
    )
    assert spark_schema(schema) == [
        SchemaField("id", "long"),
        SchemaField("price", "decimal"),
        SchemaField("at", "timestamp"),
        SchemaField("local", "timestamp_ntz"),
        SchemaField("key", "string"),
        SchemaField("hash", "binary"),
        SchemaField("tags", "array", (SchemaField("_element", "string"),)),
        SchemaField("attrs", "map", (SchemaField("key", "string"), SchemaField("value", "long"))),
        SchemaField("point", "struct", (SchemaField("x", "long"),)),
    ]
