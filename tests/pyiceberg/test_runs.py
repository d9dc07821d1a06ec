"""``iceberg_facets.run()`` makes a block's scans and commits one run; outside a block each is its own."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import iceberg_facets
from tests.pyiceberg.conftest import location_name, rows, runs_named


def only_run(events: list[dict[str, Any]], job: str) -> list[dict[str, Any]]:
    job_runs = runs_named(events, job)
    assert len(job_runs) == 1, f"{job}: {len(job_runs)} runs"
    return job_runs[0]


def test_a_block_is_one_run_from_the_tables_it_scanned_to_the_tables_it_committed(catalog: Any, events: Any) -> None:
    source = catalog.create_table("db.source", schema=rows([1]).schema)
    source.append(rows([1, 2, 3]))
    target = catalog.create_table("db.target", schema=rows([1]).schema)
    before = len(events())

    with iceberg_facets.run("daily_load") as block:
        data = source.scan(row_filter="id > 1").to_arrow()
        target.append(data)
        target.append(data)

    assert len(events()) == before + 2, "a block is one START and one COMPLETE, nothing more"
    start, complete = only_run(events(), "daily_load")
    assert (start["eventType"], complete["eventType"]) == ("START", "COMPLETE")
    assert start["run"]["runId"] == complete["run"]["runId"] == block.run_id
    assert start["inputs"] == start["outputs"] == []
    assert [(d["namespace"], d["name"]) for d in complete["inputs"]] == [("file", location_name(source))]
    assert [(d["namespace"], d["name"]) for d in complete["outputs"]] == [("file", location_name(target))]
    assert (
        complete["inputs"][0]["inputFacets"]["icebergScanReport"]["snapshotId"] == source.metadata.current_snapshot_id
    )
    report = complete["outputs"][0]["outputFacets"]["icebergCommitReport"]
    target.refresh()
    assert report["snapshotId"] == target.metadata.current_snapshot_id
    assert report["commitMetrics"]["addedRecords"] == 4, "two commits of two rows, added up"
    assert report["commitMetrics"]["totalRecords"] == 4
    assert report["commitMetrics"]["attempts"] == 2, "one attempt per commit"
    assert complete["job"]["facets"]["jobType"]["jobType"] == "JOB"


def test_a_block_that_raises_is_a_failed_run_and_the_error_reaches_the_caller(catalog: Any, events: Any) -> None:
    table = catalog.create_table("db.partial", schema=rows([1]).schema)

    with pytest.raises(ValueError, match="bad batch"), iceberg_facets.run("fragile"):
        table.append(rows([1]))
        raise ValueError("bad batch")

    _, fail = only_run(events(), "fragile")
    assert fail["eventType"] == "FAIL"
    error = fail["run"]["facets"]["errorMessage"]
    assert error["message"] == "ValueError: bad batch"
    assert "raise ValueError" in error["stackTrace"]
    assert [d["name"] for d in fail["outputs"]] == [location_name(table)], "what it committed before failing"


def test_a_nested_block_is_its_own_run_with_the_outer_one_as_parent(catalog: Any, events: Any) -> None:
    outer_table = catalog.create_table("db.outer", schema=rows([1]).schema)
    inner_table = catalog.create_table("db.inner", schema=rows([1]).schema)

    with iceberg_facets.run("outer") as outer:
        outer_table.append(rows([1]))
        with iceberg_facets.run("inner") as inner:
            inner_table.append(rows([2]))
        outer_table.append(rows([3]))

    _, outer_end = only_run(events(), "outer")
    _, inner_end = only_run(events(), "inner")
    assert [d["name"] for d in outer_end["outputs"]] == [location_name(outer_table)]
    assert [d["name"] for d in inner_end["outputs"]] == [location_name(inner_table)]
    parent = inner_end["run"]["facets"]["parent"]
    assert parent["run"]["runId"] == outer.run_id != inner.run_id
    assert (parent["job"]["namespace"], parent["job"]["name"]) == ("tests", "outer")
    assert "parent" not in outer_end["run"]["facets"]


def test_runs_in_different_threads_never_mix(catalog: Any, events: Any) -> None:
    tables = {name: catalog.create_table(f"db.{name}", schema=rows([1]).schema) for name in ("left", "right")}
    both_inside = threading.Barrier(2)
    errors: list[BaseException] = []

    def load(name: str) -> None:
        try:
            with iceberg_facets.run(f"load_{name}"):
                both_inside.wait(10)
                tables[name].append(rows([1]))
                both_inside.wait(10)
                tables[name].append(rows([2]))
        except BaseException as error:  # noqa: BLE001 - re-raised in the test thread
            errors.append(error)

    threads = [threading.Thread(target=load, args=(name,)) for name in tables]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors

    for name, table in tables.items():
        _, complete = only_run(events(), f"load_{name}")
        assert [d["name"] for d in complete["outputs"]] == [location_name(table)]
        assert complete["outputs"][0]["outputFacets"]["icebergCommitReport"]["commitMetrics"]["addedRecords"] == 2
    assert not [e for e in events() if "append" in e["job"]["name"]], "no commit escaped its block"


def test_outside_a_block_each_commit_is_its_own_run(catalog: Any, events: Any) -> None:
    table = catalog.create_table("db.loose", schema=rows([1]).schema)
    table.append(rows([1]))
    table.append(rows([2]))

    appends = runs_named(events(), "etl.append.pycat_db_loose")
    assert [[e["eventType"] for e in run] for run in appends] == [["COMPLETE"]] * 2, "one event: it is over when sent"


def test_a_block_without_enable_does_nothing(catalog: Any) -> None:
    with iceberg_facets.run("quiet") as block:
        catalog.create_table("db.quiet", schema=rows([1]).schema).append(rows([1]))
    assert block.run_id is None


def test_a_block_needs_a_job_name() -> None:
    with pytest.raises(ValueError, match="needs a job name"):
        iceberg_facets.run("")
