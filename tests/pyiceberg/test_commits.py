"""Every kind of pyiceberg commit becomes a run whose output carries the commit's metrics, checked against the
table's own metadata."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import IntegerType, LongType, NestedField, StringType

from tests.pyiceberg.conftest import CATALOG, SCHEMA, final_event, location_name, rows, runs, runs_named, sql_catalog

PYICEBERG_RETRIES = hasattr(
    __import__("pyiceberg.table", fromlist=["TableProperties"]).TableProperties, "COMMIT_NUM_RETRIES"
)
"""pyiceberg 0.12 retries a commit that lost a race; 0.10 and 0.11 make one attempt."""


def snapshot_ids(table: Any) -> set[int]:
    return {s.snapshot_id for s in table.metadata.snapshots}


def added_snapshots(table: Any, before: set[int]) -> list[Any]:
    return sorted((s for s in table.metadata.snapshots if s.snapshot_id not in before), key=lambda s: s.sequence_number)


def summed(snapshots: list[Any], key: str) -> int:
    return sum(int(s.summary.additional_properties.get(key, 0)) for s in snapshots)


def commit_report(event: dict[str, Any]) -> dict[str, Any]:
    (output,) = event["outputs"]
    return output["outputFacets"]["icebergCommitReport"]


def assert_report_matches(event: dict[str, Any], table: Any, before: set[int], operation: str) -> dict[str, Any]:
    """The commit report of ``event`` against the snapshots the commit added to ``table``."""
    table.refresh()
    added = added_snapshots(table, before)
    assert added, "the commit added no snapshot"
    report = commit_report(event)
    last = added[-1]
    assert report["snapshotId"] == last.snapshot_id == table.metadata.current_snapshot_id
    assert report["sequenceNumber"] == last.sequence_number
    assert report["operation"] == operation
    metrics = report["commitMetrics"]
    expected = {
        "addedDataFiles": summed(added, "added-data-files"),
        "removedDataFiles": summed(added, "deleted-data-files"),
        "addedRecords": summed(added, "added-records"),
        "removedRecords": summed(added, "deleted-records"),
        "addedFilesSizeInBytes": summed(added, "added-files-size"),
        "removedFilesSizeInBytes": summed(added, "removed-files-size"),
        "addedDeleteFiles": summed(added, "added-delete-files"),
    }
    for name, value in expected.items():
        assert metrics.get(name, 0) == value, (name, metrics)
    totals = last.summary.additional_properties
    assert metrics["totalRecords"] == int(totals["total-records"])
    assert metrics["totalDataFiles"] == int(totals["total-data-files"])
    assert metrics["totalFilesSizeInBytes"] == int(totals["total-files-size"])
    assert metrics["attempts"] == 1
    assert 0 <= metrics["totalDuration"] < 60_000
    (output,) = event["outputs"]
    assert output["facets"]["version"]["datasetVersion"] == str(last.snapshot_id)
    return metrics


def test_append_is_a_run_with_the_commit_report_and_the_table_identity(
    catalog: Any, events: Any, tmp_path: Path
) -> None:
    table = catalog.create_table("db.events", schema=SCHEMA)
    before = snapshot_ids(table)
    table.append(rows([1, 2, 3]))

    complete = final_event(events(), "etl.append.pycat_db_events")
    assert complete["eventType"] == "COMPLETE"
    assert complete["job"]["namespace"] == "tests"
    assert complete["inputs"] == []
    metrics = assert_report_matches(complete, table, before, "append")
    assert (metrics["addedRecords"], metrics["addedDataFiles"], metrics["totalRecords"]) == (3, 1, 3)

    (output,) = complete["outputs"]
    assert (output["namespace"], output["name"]) == ("file", location_name(table))
    assert output["name"] == f"{tmp_path}/warehouse/db/events"  # the same layout on pyiceberg 0.10, 0.11 and 0.12
    facets = output["facets"]
    assert facets["symlinks"]["identifiers"] == [
        {"namespace": f"jdbc:sqlite:{tmp_path}/catalog.db", "name": "db.events", "type": "TABLE"}
    ]
    catalog_facet = {k: v for k, v in facets["catalog"].items() if not k.startswith("_")}
    assert catalog_facet == {
        "framework": "iceberg",
        "type": "jdbc",
        "name": CATALOG,
        "warehouseUri": f"file://{tmp_path}/warehouse",
        "metadataUri": f"jdbc:sqlite:{tmp_path}/catalog.db",
        "source": "pyiceberg",
    }
    assert {k: v for k, v in facets["storage"].items() if not k.startswith("_")} == {
        "storageLayer": "iceberg",
        "fileFormat": "parquet",
    }
    assert [(f["name"], f["type"]) for f in facets["schema"]["fields"]] == [
        ("id", "long"),
        ("name", "string"),
        ("day", "integer"),
    ]
    stats = output["outputFacets"]["outputStatistics"]
    assert (stats["rowCount"], stats["size"], stats["fileCount"]) == (
        3,
        metrics["addedFilesSizeInBytes"],
        1,
    )
    engine = complete["run"]["facets"]["processing_engine"]
    assert engine["name"] == "pyiceberg"
    assert engine["version"] == __import__("pyiceberg").__version__
    assert complete["job"]["facets"]["jobType"]["integration"] == "PYICEBERG"


def test_create_and_drop_table_are_runs_with_their_lifecycle_state(catalog: Any, events: Any, tmp_path: Path) -> None:
    table = catalog.create_table("db.made", schema=SCHEMA)
    catalog.drop_table("db.made")

    created = final_event(events(), "etl.create_table.pycat_db_made")
    dropped = final_event(events(), "etl.drop_table.pycat_db_made")
    for event, state in ((created, "CREATE"), (dropped, "DROP")):
        (output,) = event["outputs"]
        assert (output["namespace"], output["name"]) == ("file", location_name(table))
        assert output["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == state
        assert output["facets"]["symlinks"]["identifiers"][0]["name"] == "db.made"
    assert "schema" in created["outputs"][0]["facets"]
    assert "version" not in dropped["outputs"][0]["facets"]


def test_create_table_transaction_with_data_is_one_create_run_with_its_commit(catalog: Any, events: Any) -> None:
    with catalog.create_table_transaction("db.staged", schema=SCHEMA) as transaction:
        transaction.append(rows([1, 2]))
    table = catalog.load_table("db.staged")

    complete = final_event(events(), "etl.create_table.pycat_db_staged")
    (output,) = complete["outputs"]
    assert output["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "CREATE"
    assert_report_matches(complete, table, set(), "append")
    staged = [e["job"]["name"] for e in events() if "staged" in e["job"]["name"]]
    assert staged == ["etl.create_table.pycat_db_staged"], "creating and filling the table is one commit"


def test_overwrite_sums_the_delete_and_the_append_it_commits(catalog: Any, events: Any) -> None:
    table = catalog.create_table("db.over", schema=SCHEMA)
    table.append(rows([1, 2, 3]))
    table.append(rows([4, 5]))
    before = snapshot_ids(table)
    table.overwrite(rows([7, 8, 9, 10]))

    complete = final_event(events(), "etl.overwrite.pycat_db_over")
    assert len(added_snapshots(table, before)) == 2, "pyiceberg commits an overwrite as a delete and an append"
    metrics = assert_report_matches(complete, table, before, "overwrite")
    assert (metrics["removedRecords"], metrics["addedRecords"], metrics["totalRecords"]) == (5, 4, 4)
    assert (metrics["removedDataFiles"], metrics["addedDataFiles"]) == (2, 1)


def test_delete_reports_the_records_it_removed(catalog: Any, events: Any) -> None:
    table = catalog.create_table("db.del", schema=SCHEMA)
    table.append(rows([1, 2, 3]))
    table.append(rows([4]))
    before = snapshot_ids(table)
    table.delete("id = 4")

    complete = final_event(events(), "etl.delete.pycat_db_del")
    metrics = assert_report_matches(complete, table, before, "delete")
    assert (metrics["removedRecords"], metrics["removedDataFiles"], metrics["totalRecords"]) == (1, 1, 3)


def test_upsert_is_one_commit_and_its_own_read_is_not_a_scan(catalog: Any, events: Any) -> None:
    table = catalog.create_table("db.up", schema=SCHEMA)
    table.append(rows([1, 2]))
    before = snapshot_ids(table)
    changes = pa.table({"id": [2, 3], "name": ["changed", "new"], "day": [1, 1]}, schema=SCHEMA)
    result = table.upsert(changes, join_cols=["id"])
    assert (result.rows_updated, result.rows_inserted) == (1, 1)

    names = sorted(runs(events()))
    assert names == ["etl.append.pycat_db_up", "etl.create_table.pycat_db_up", "etl.overwrite.pycat_db_up"], names
    complete = final_event(events(), "etl.overwrite.pycat_db_up")
    metrics = assert_report_matches(complete, table, before, "overwrite")
    assert (metrics["addedRecords"] - metrics["removedRecords"], metrics["totalRecords"]) == (1, 3)


def test_add_files_reports_the_files_it_registered(catalog: Any, events: Any, tmp_path: Path) -> None:
    table = catalog.create_table("db.files", schema=SCHEMA)
    path = tmp_path / "external.parquet"
    pq.write_table(rows([1, 2, 3, 4]), path)
    before = snapshot_ids(table)
    table.add_files([str(path)])

    complete = final_event(events(), "etl.append.pycat_db_files")
    metrics = assert_report_matches(complete, table, before, "append")
    assert (metrics["addedDataFiles"], metrics["addedRecords"]) == (1, 4)
    assert metrics["addedFilesSizeInBytes"] == path.stat().st_size


def partitioned_table(catalog: Any, name: str) -> Any:
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "name", StringType(), required=False),
        NestedField(3, "day", IntegerType(), required=False),
    )
    spec = PartitionSpec(PartitionField(source_id=3, field_id=1000, transform=IdentityTransform(), name="day"))
    return catalog.create_table(name, schema=schema, partition_spec=spec)


def test_dynamic_partition_overwrite_replaces_only_the_partition_written(catalog: Any, events: Any) -> None:
    table = partitioned_table(catalog, "db.parts")
    table.append(pa.concat_tables([rows([1, 2], day=1), rows([3], day=2)]))
    before = snapshot_ids(table)
    table.dynamic_partition_overwrite(rows([5, 6, 7], day=2))

    complete = final_event(events(), "etl.overwrite.pycat_db_parts")
    metrics = assert_report_matches(complete, table, before, "overwrite")
    assert (metrics["removedRecords"], metrics["addedRecords"], metrics["totalRecords"]) == (1, 3, 5)


def test_schema_and_property_changes_are_alter_runs(catalog: Any, events: Any) -> None:
    table = catalog.create_table("db.alter", schema=SCHEMA)
    table.append(rows([1]))
    with table.update_schema() as update:
        update.add_column("note", StringType())
    with table.transaction() as transaction:
        transaction.set_properties(owner="data-team")

    schema_change, property_change = (run[-1] for run in runs_named(events(), "etl.alter_table.pycat_db_alter"))
    for event in (schema_change, property_change):
        assert event["eventType"] == "COMPLETE"
        (output,) = event["outputs"]
        assert output["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "ALTER"
        report = output["outputFacets"]["icebergCommitReport"]
        assert "snapshotId" not in report and report["commitMetrics"]["attempts"] == 1
        assert output["facets"]["version"]["datasetVersion"] == str(table.metadata.current_snapshot_id)
    fields = [f["name"] for f in schema_change["outputs"][0]["facets"]["schema"]["fields"]]
    assert fields == ["id", "name", "day", "note"]


def test_a_lost_race_is_retried_and_counted(catalog: Any, events: Any) -> None:
    first = catalog.create_table("db.race", schema=SCHEMA)
    second = catalog.load_table("db.race")
    first.append(rows([1]))  # ``second`` still holds the metadata from before this commit

    if not PYICEBERG_RETRIES:
        with pytest.raises(CommitFailedException):
            second.append(rows([2]))
        failed = [run for run in runs_named(events(), "etl.append.pycat_db_race") if run[-1]["eventType"] == "FAIL"]
        assert [[e["eventType"] for e in run] for run in failed] == [["FAIL"]]
        assert failed[0][0]["outputs"][0]["outputFacets"]["icebergCommitReport"]["commitMetrics"]["attempts"] == 1
        return
    second.append(rows([2]))

    appends = runs_named(events(), "etl.append.pycat_db_race")
    assert len(appends) == 2
    retried = appends[-1][-1]
    assert retried["eventType"] == "COMPLETE"
    report = retried["outputs"][0]["outputFacets"]["icebergCommitReport"]
    assert report["commitMetrics"]["attempts"] == 2
    second.refresh()
    assert report["snapshotId"] == second.metadata.current_snapshot_id
    assert report["commitMetrics"]["totalRecords"] == 2


def test_a_commit_that_finally_fails_is_a_fail_event_and_the_error_is_the_users(tmp_path: Path, events: Any) -> None:
    from pyiceberg.catalog.sql import SqlCatalog

    class AlwaysLosingCatalog(SqlCatalog):  # type: ignore[misc]
        """Another writer commits to the table just before each of this catalog's attempts, from its own
        thread as a real concurrent writer would, so every attempt loses the race."""

        def commit_table(self, table: Any, requirements: Any, updates: Any) -> Any:
            rival = threading.Thread(target=lambda: sql_catalog(tmp_path).load_table("db.lost").append(rows([0])))
            rival.start()
            rival.join()
            return super().commit_table(table, requirements, updates)

    sql_catalog(tmp_path).create_namespace("db")
    losing = AlwaysLosingCatalog(
        CATALOG, uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/warehouse"
    )
    table = losing.create_table(
        "db.lost",
        schema=SCHEMA,
        properties={"commit.retry.num-retries": "2", "commit.retry.min-wait-ms": "1", "commit.retry.max-wait-ms": "5"},
    )

    with pytest.raises(CommitFailedException) as raised:
        table.append(rows([1, 2]))

    appends = runs_named(events(), "etl.append.pycat_db_lost")
    failed = [run for run in appends if run[-1]["eventType"] == "FAIL"]
    assert [[e["eventType"] for e in run] for run in failed] == [["FAIL"]]
    fail = failed[0][0]
    expected_attempts = 3 if PYICEBERG_RETRIES else 1
    assert str(raised.value).startswith("Requirement failed: branch main")
    assert fail["run"]["facets"]["errorMessage"]["message"] == f"CommitFailedException: {raised.value}"
    assert fail["run"]["facets"]["errorMessage"]["programmingLanguage"] == "PYTHON"
    report = fail["outputs"][0]["outputFacets"]["icebergCommitReport"]
    assert report["commitMetrics"]["attempts"] == expected_attempts
    assert "snapshotId" not in report and "version" not in fail["outputs"][0]["facets"]
    rivals = [run for run in appends if run[-1]["eventType"] == "COMPLETE"]
    assert len(rivals) == expected_attempts, "each rival commit is a run of its own"


def test_each_quick_commit_reports_its_own_snapshot_while_the_worker_lags_behind(
    catalog: Any, events: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from iceberg_facets import instrument

    # The worker makes records only once every commit below is done, as a busy worker would: each record
    # must still say what its own commit left, not what the table holds by then.
    behind = threading.Event()
    for name in ("commit_record", "table_change_record"):
        made = getattr(instrument, name)
        monkeypatch.setattr(instrument, name, lambda capture, make=made: behind.wait(30) and make(capture))
    table = catalog.create_table("db.quick", schema=SCHEMA)
    table.append(rows([1]))
    first = table.metadata.current_snapshot()
    table.append(rows([2, 3]))
    second = table.metadata.current_snapshot()
    behind.set()

    created = final_event(events(), "etl.create_table.pycat_db_quick")
    assert "version" not in created["outputs"][0]["facets"], "the table had no snapshot when it was created"
    reports = [commit_report(run[0]) for run in runs_named(events(), "etl.append.pycat_db_quick")]
    assert [
        (r["snapshotId"], r["commitMetrics"]["addedRecords"], r["commitMetrics"]["totalRecords"]) for r in reports
    ] == [(first.snapshot_id, 1, 1), (second.snapshot_id, 2, 3)]
    assert first.snapshot_id != second.snapshot_id
