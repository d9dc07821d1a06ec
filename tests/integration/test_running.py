"""RUNNING events, ``spark_jobDetails`` and ``inputStatistics`` on real local Spark, as openlineage-spark sends
them: a query run is START, a RUNNING at each of its Spark jobs' starts and one at its first job's end, then
COMPLETE (or FAIL)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest

from tests.support import LineageReceiver, dataset, runs_by_job

pytestmark = pytest.mark.spark


def _details(event: dict[str, Any]) -> dict[str, Any] | None:
    facet = event["run"]["facets"].get("spark_jobDetails")
    return None if facet is None else {k: v for k, v in facet.items() if not k.startswith("_")}


def _part_files(directory: Path) -> list[Path]:
    return [p for p in directory.iterdir() if p.name.startswith("part-")]


def test_a_write_reports_its_job_with_running_events(
    spark: Any, lineage: Any, receiver: LineageReceiver, data_dir: Path
) -> None:
    source, target = data_dir / "running_in", data_dir / "running_out"
    spark.range(0, 100, 1, 2).write.parquet(str(source))  # before lineage is looked at: two files, 100 rows
    context = spark.sparkContext
    context.setJobGroup("nightly", "the nightly load")
    try:
        spark.read.parquet(str(source)).write.mode("overwrite").parquet(str(target))
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
        context.setLocalProperty("spark.job.description", None)
    assert lineage.flush(60)

    (run,) = runs_by_job(receiver.events, "running_out")
    assert [e["eventType"] for e in run] == ["START", "RUNNING", "RUNNING", "COMPLETE"]
    assert [e["eventTime"] for e in run] == sorted(e["eventTime"] for e in run)
    details = _details(run[1])
    assert details is not None and isinstance(details["jobId"], int)
    details.pop("jobCallSite", None)  # set where Spark's callSite.short is (PySpark may leave it unset)
    assert details == {"jobId": details["jobId"], "jobDescription": "the nightly load", "jobGroup": "nightly"}
    assert [_details(e) for e in (run[0], run[2], run[3])] == [None, None, None]
    assert "spark_applicationDetails" in run[1]["run"]["facets"]
    # The first job's end: the write's statistics are known.
    assert dataset(run[2], "outputs", str(target))["outputFacets"]["outputStatistics"]["rowCount"] == 100
    # The input's statistics on every event, as the reference gives a file relation's: its files and bytes.
    files = _part_files(source)
    assert len(files) == 2
    for event in run:
        stats = dataset(event, "inputs", str(source))["inputFacets"]["inputStatistics"]
        assert {k: v for k, v in stats.items() if not k.startswith("_")} == {
            "size": sum(p.stat().st_size for p in files),
            "fileCount": len(files),
        }


def test_a_failed_query_ends_with_fail_after_its_job_started(
    spark: Any, lineage: Any, receiver: LineageReceiver, data_dir: Path
) -> None:
    source = data_dir / "running_names"
    spark.createDataFrame([("ann",), ("bob",)], "name string").write.parquet(str(source))
    previous = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        with contextlib.suppress(Exception):  # the failure is the test
            spark.read.parquet(str(source)).selectExpr("CAST(name AS INT) AS n").write.parquet(
                str(data_dir / "running_failed")
            )
    finally:
        spark.conf.set("spark.sql.ansi.enabled", previous)
    assert lineage.flush(60)

    (run,) = runs_by_job(receiver.events, "running_failed")
    assert [e["eventType"] for e in run] == ["START", "RUNNING", "FAIL"]
    assert _details(run[1]) is not None


def test_an_rdd_job_start_carries_its_job_details(
    spark: Any, lineage: Any, receiver: LineageReceiver, data_dir: Path
) -> None:
    (data_dir / "lines.txt").write_text("a\nb\n")
    context = spark.sparkContext
    context.setJobGroup("rdd_group", "save the lines")
    try:
        context.textFile(str(data_dir / "lines.txt")).map(str.upper).saveAsTextFile(str(data_dir / "upper"))
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
        context.setLocalProperty("spark.job.description", None)
    assert lineage.flush(60)

    runs = [e for e in receiver.events if e["job"]["facets"]["jobType"]["jobType"] == "RDD_JOB"]
    assert [e["eventType"] for e in runs] == ["START", "COMPLETE"]
    details = _details(runs[0])
    assert details is not None and details["jobGroup"] == "rdd_group"
    assert details["jobDescription"] == "save the lines"
    assert _details(runs[1]) is None
