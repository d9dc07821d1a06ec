"""A materialized pyiceberg scan reports its table as an input with how the scan was planned."""

from __future__ import annotations

import zlib
from typing import Any

import pytest

from tests.pyiceberg.conftest import final_event, location_name, rows, runs_named
from tests.pyiceberg.test_commits import partitioned_table


@pytest.fixture()
def by_day(catalog: Any) -> Any:
    """A table partitioned by day with one data file per day, 1 to 3."""
    table = partitioned_table(catalog, "db.by_day")
    for day in (1, 2, 3):
        table.append(rows([day * 10, day * 10 + 1], day=day))
    return table


def scan_report(event: dict[str, Any]) -> dict[str, Any]:
    (scanned,) = event["inputs"]
    return scanned["inputFacets"]["icebergScanReport"]


def test_a_filtered_scan_reports_the_files_pruning_skipped(by_day: Any, events: Any) -> None:
    result = by_day.scan(row_filter="day = 2", selected_fields=("id", "day")).to_arrow()
    assert result.num_rows == 2

    complete = final_event(events(), "etl.scan.pycat_db_by_day")
    assert complete["eventType"] == "COMPLETE" and complete["outputs"] == []
    (scanned,) = complete["inputs"]
    assert (scanned["namespace"], scanned["name"]) == ("file", location_name(by_day))
    assert scanned["facets"]["symlinks"]["identifiers"][0]["name"] == "db.by_day"
    snapshot_id = by_day.metadata.current_snapshot_id
    assert scanned["facets"]["version"]["datasetVersion"] == str(snapshot_id)
    report = scan_report(complete)
    assert report["snapshotId"] == snapshot_id
    assert report["filterDescription"] == "day == (1-digit-int)"
    assert report["projectedFieldNames"] == ["id", "day"]
    assert report["schemaId"] == by_day.metadata.current_schema_id
    metrics = report["scanMetrics"]
    data_file = next(t.file for t in by_day.scan(row_filter="day = 2").plan_files())
    assert (metrics["resultDataFiles"], metrics["skippedDataFiles"], metrics["resultDeleteFiles"]) == (1, 2, 0)
    assert metrics["totalFileSizeInBytes"] == data_file.file_size_in_bytes
    assert 0 <= metrics["totalPlanningDuration"] < 60_000


def test_a_full_scan_skips_nothing_and_masks_no_filter(by_day: Any, events: Any) -> None:
    assert by_day.scan().to_arrow().num_rows == 6

    report = scan_report(final_event(events(), "etl.scan.pycat_db_by_day"))
    assert "filterDescription" not in report or report["filterDescription"] == ""
    assert report["projectedFieldNames"] == ["id", "name", "day"]
    assert (report["scanMetrics"]["resultDataFiles"], report["scanMetrics"]["skippedDataFiles"]) == (3, 0)


def test_a_range_filter_on_file_statistics_prunes_files_too(by_day: Any, events: Any) -> None:
    by_day.scan(row_filter="id >= 30 and name != 'x'").to_arrow()

    report = scan_report(final_event(events(), "etl.scan.pycat_db_by_day"))
    masked = f"(hash-{zlib.crc32(b'x'):08x})"
    assert report["filterDescription"] == f"(id >= (2-digit-int) and name != {masked})"
    assert (report["scanMetrics"]["resultDataFiles"], report["scanMetrics"]["skippedDataFiles"]) == (1, 2)


@pytest.mark.parametrize(
    "materialize",
    [
        pytest.param(lambda scan: scan.to_pandas(), id="to_pandas"),
        pytest.param(lambda scan: scan.to_arrow_batch_reader().read_all(), id="to_arrow_batch_reader"),
        pytest.param(lambda scan: scan.to_duckdb("t").execute("select count(*) from t").fetchall(), id="to_duckdb"),
    ],
)
def test_every_way_of_materializing_a_scan_reports_it_once(by_day: Any, events: Any, materialize: Any) -> None:
    materialize(by_day.scan(row_filter="day >= 2"))

    scan_runs = runs_named(events(), "etl.scan.pycat_db_by_day")
    assert len(scan_runs) == 1, "to_pandas and to_duckdb go through to_arrow: one scan, one run"
    assert scan_report(scan_runs[0][0])["scanMetrics"]["resultDataFiles"] == 2


def test_planning_alone_and_counting_are_not_reads(by_day: Any, events: Any) -> None:
    list(by_day.scan().plan_files())
    assert by_day.scan().count() == 6
    assert runs_named(events(), "etl.scan.pycat_db_by_day") == []


def test_a_table_loaded_before_enable_is_named_by_its_catalog(catalog: Any, receiver: Any) -> None:
    import iceberg_facets

    table = catalog.create_table("db.early", schema=rows([1]).schema)
    table.append(rows([1, 2]))
    handle = iceberg_facets.enable(transport={"type": "http", "url": receiver.url}, job_name="late")
    try:
        table.scan().to_arrow()
        assert handle.flush(30)
    finally:
        handle.disable()
    complete = final_event(receiver.events, "late.scan.pycat_db_early")
    assert complete["inputs"][0]["facets"]["catalog"]["name"] == "pycat"
