"""RDD lineage on real Spark: DataFrames over RDDs report the files their RDD lineage reads; jobs on RDDs alone
are runs of their own, with what they read and write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_spark_submit import spark_submit
from tests.support import LineageReceiver, app_events, datasets, only_run, runs_by_job

pytestmark = pytest.mark.spark


def test_a_dataframe_over_a_text_file_rdd_reads_its_directory(
    spark: Any, lineage: Any, receiver: LineageReceiver, data_dir: Path
) -> None:
    lines = data_dir / "lines"
    lines.mkdir()
    (lines / "part-1.txt").write_text("a\nb\n")
    (lines / "part-2.txt").write_text("c\n")
    out = data_dir / "from_rdd"
    spark.sparkContext.textFile(str(lines)).map(lambda line: (line.upper(),)).toDF(["value"]).write.parquet(str(out))
    # A single file read the same way is reported as its directory, as openlineage-spark reports it.
    single = data_dir / "from_one_file"
    spark.sparkContext.textFile(str(lines / "part-1.txt")).map(lambda line: (line,)).toDF(["v"]).write.json(str(single))
    assert lineage.flush(60)

    _, complete = only_run(receiver.events, "data_from_rdd")
    assert datasets(complete, "inputs") == [("file", str(lines))]
    assert datasets(complete, "outputs") == [("file", str(out))]
    assert "columnLineage" not in complete["outputs"][0]["facets"]
    assert "extractionError" not in complete["run"]["facets"]
    _, complete = only_run(receiver.events, "data_from_one_file")
    assert datasets(complete, "inputs") == [("file", str(lines))]


@pytest.mark.iceberg
def test_an_iceberg_append_from_an_rdd_names_its_input_on_every_event(
    spark: Any, lineage: Any, receiver: LineageReceiver, data_dir: Path, iceberg_dir: Path
) -> None:
    """openlineage-spark's own integration test of this case expects the RDD's input on START too: every event of
    the run is built from the one finished query here."""
    lines = data_dir / "rows"
    lines.mkdir()
    (lines / "part-1.txt").write_text("1,a\n2,b\n")
    spark.sql("CREATE NAMESPACE IF NOT EXISTS hcat.db")
    spark.sql("CREATE TABLE hcat.db.from_rdd (a INT, b STRING) USING iceberg")
    try:
        rows = (
            spark.sparkContext.textFile(str(lines)).map(lambda line: line.split(",")).map(lambda p: (int(p[0]), p[1]))
        )
        spark.createDataFrame(rows, "a int, b string").writeTo("hcat.db.from_rdd").append()
        assert lineage.flush(60)
    finally:
        spark.sql("DROP TABLE IF EXISTS hcat.db.from_rdd")
    (run,) = runs_by_job(receiver.events, "append_data.hcat_db_from_rdd")
    assert [e["eventType"] for e in run] == ["START", "RUNNING", "RUNNING", "COMPLETE"]
    table = ("file", str(iceberg_dir / "hadoop_warehouse" / "db" / "from_rdd"))
    assert {(tuple(datasets(e, "inputs")), tuple(datasets(e, "outputs"))) for e in run} == {
        ((("file", str(lines)),), (table,))
    }


def test_a_dataframe_made_from_a_dataframes_rdd_reads_the_scanned_files(
    spark: Any, lineage: Any, receiver: LineageReceiver, data_dir: Path
) -> None:
    people = spark.read.option("header", True).csv(str(data_dir / "people.csv"))
    out = data_dir / "people_again"
    spark.createDataFrame(people.rdd).write.parquet(str(out))
    assert lineage.flush(60)
    _, complete = only_run(receiver.events, "data_people_again")
    assert datasets(complete, "inputs") == [("file", str(data_dir))]


# Pure RDD jobs through spark-submit: the job never imports spark_lineage (the start-up hook brings it in).
RDD_JOB = """
import sys
from pyspark.sql import SparkSession

spark = SparkSession.builder.appName("Rdd Words").getOrCreate()
sc = spark.sparkContext
sc.textFile(sys.argv[1]).map(lambda line: line.upper()).saveAsTextFile(sys.argv[2])
print("RESULT", sc.textFile(sys.argv[1]).count())  # writes nothing: no run
try:
    sc.textFile(sys.argv[1]).map(lambda line: 1 // 0).saveAsTextFile(sys.argv[2] + "_failed")
except Exception:
    pass
try:  # writes nothing, but fails: a run, with what it read (its graph read only once it failed)
    sc.textFile(sys.argv[1]).map(lambda line: len(line) // 0).count()
except Exception:
    pass
"""


def _rdd_runs(events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    runs: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        if event["job"]["facets"]["jobType"]["jobType"] == "RDD_JOB":
            runs.setdefault(event["run"]["runId"], []).append(event)
    return runs


def test_rdd_jobs_through_spark_submit_report_what_they_read_and_write(
    tmp_path: Path, receiver: LineageReceiver
) -> None:
    confs = {"spark.openlineage.transport.type": "http", "spark.openlineage.transport.url": receiver.url}
    _, orders, output = spark_submit(tmp_path, RDD_JOB, confs)

    app_start, app_end = app_events(receiver.events)
    runs = sorted(_rdd_runs(receiver.events).values(), key=lambda run: (run[-1]["eventType"], len(run[-1]["outputs"])))
    assert [[event["eventType"] for event in run] for run in runs] == [
        ["START", "COMPLETE"],
        ["START", "FAIL"],
        ["START", "FAIL"],
    ]
    (start, complete), (failed_count_start, failed_count), (_, fail) = runs
    name = "rdd_words.map_partitions_python_map_partitions_hadoop"
    assert {start["job"]["name"], complete["job"]["name"], fail["job"]["name"]} == {name}
    for event in (failed_count_start, failed_count):
        assert event["job"]["name"] == "rdd_words.python_map_partitions_hadoop"
        assert datasets(event, "inputs") == [("file", str(orders))]
        assert datasets(event, "outputs") == []
    assert "ZeroDivisionError" in failed_count["run"]["facets"]["errorMessage"]["stackTrace"]
    assert complete["job"]["facets"]["jobType"] == {**complete["job"]["facets"]["jobType"], "integration": "SPARK"}
    for event in (start, complete):
        assert datasets(event, "inputs") == [("file", str(orders))]
        assert datasets(event, "outputs") == [("file", str(output))]
        assert event["run"]["facets"]["parent"]["run"]["runId"] == app_start["run"]["runId"]
    assert start["eventTime"] <= complete["eventTime"]
    # What the job's tasks read and wrote (Spark's task metrics), as openlineage-spark reports a job with one
    # input and one output: four lines of 31 bytes read, and written again in upper case. Spark counts the bytes
    # its Hadoop file system wrote, 4 more than the lines: the checksum Hadoop's local file system keeps.
    assert sum(part.stat().st_size for part in output.glob("part-*")) == 31
    read_statistics = complete["inputs"][0]["inputFacets"]["inputStatistics"]
    write_statistics = complete["outputs"][0]["outputFacets"]["outputStatistics"]
    assert {key: read_statistics.get(key) for key in ("rowCount", "size", "fileCount")} == {
        "rowCount": 4,
        "size": 31,
        "fileCount": None,
    }
    assert {key: write_statistics.get(key) for key in ("rowCount", "size", "fileCount")} == {
        "rowCount": 4,
        "size": 35,
        "fileCount": None,
    }
    assert datasets(fail, "outputs") == [("file", f"{output}_failed")]
    # A failed job's task metrics count its failed tasks' partial work: a FAIL run carries no statistics.
    assert "inputStatistics" not in (fail["inputs"][0].get("inputFacets") or {})
    assert "outputStatistics" not in (fail["outputs"][0].get("outputFacets") or {})
    assert "ZeroDivisionError" in fail["run"]["facets"]["errorMessage"]["stackTrace"]
    assert app_end["eventType"] == "COMPLETE"


@pytest.mark.once  # a configuration key read in Python: a second PySpark line adds nothing
def test_rdd_events_disabled_keeps_rdd_jobs_unreported(tmp_path: Path, receiver: LineageReceiver) -> None:
    confs = {
        "spark.openlineage.transport.type": "http",
        "spark.openlineage.transport.url": receiver.url,
        "spark.openlineage.filter.rddEventsDisabled": "true",
    }
    spark_submit(tmp_path, RDD_JOB, confs)
    assert [e["eventType"] for e in app_events(receiver.events)] == ["START", "COMPLETE"]
    assert _rdd_runs(receiver.events) == {}


def test_an_rdd_job_is_one_run_whatever_the_sessions_and_outlives_the_first_one_disabled(
    spark: Any, receiver: LineageReceiver, data_dir: Path
) -> None:
    import spark_lineage

    first = spark_lineage.enable(spark, transport={"type": "http", "url": receiver.url})
    second = spark_lineage.enable(spark.newSession(), transport={"type": "http", "url": receiver.url})
    lines = data_dir / "people.csv"
    try:
        spark.sparkContext.textFile(str(lines)).saveAsTextFile(str(data_dir / "copy_1"))
        assert first.flush(60) and second.flush(60)
        first.disable(timeout=30)  # the job listener was the first session's: the second one takes it over
        spark.sparkContext.textFile(str(lines)).saveAsTextFile(str(data_dir / "copy_2"))
        assert second.flush(60)
    finally:
        first.disable(timeout=30)
        second.disable(timeout=30)
    runs = _rdd_runs(receiver.events)
    written = sorted(name for run in runs.values() for name in {o["name"] for e in run for o in e["outputs"]})
    assert written == [str(data_dir / "copy_1"), str(data_dir / "copy_2")]
    assert all([e["eventType"] for e in run] == ["START", "COMPLETE"] for run in runs.values())
