"""What a query costs the py4j edge, on real local Spark: its capture makes the same few JVM round trips
whatever the number of its datasets, and its Spark jobs reach its RUNNING events without a callback into
Python (the job listener keeps them in the JVM; the capture reads them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from spark_lineage import costs
from spark_lineage.costs import Stage, StageCost
from spark_lineage.jvm import round_trips
from tests.support import LineageReceiver, datasets, runs_by_job

pytestmark = pytest.mark.spark

MAX_ROUND_TRIPS = 5
SCHEMA = "id BIGINT, bucket BIGINT"


def _inputs(spark: Any, data_dir: Path, count: int) -> list[Path]:
    paths = [data_dir / f"round_trips_{count}_in_{index}" for index in range(count)]
    for path in paths:
        spark.range(0, 10, 1, 1).selectExpr("id", "id % 3 AS bucket").write.parquet(str(path))
    return paths


def _union_write(spark: Any, paths: list[Path], target: Path, lineage: Any) -> dict[Stage, StageCost]:
    """Write the union of ``paths`` to ``target`` with round trips counted; what each stage cost meanwhile."""
    # Read with a schema: parquet's schema inference would run Spark jobs of its own (RDD jobs, whose starts
    # and ends are passed to Python, as they should be).
    frames = [spark.read.schema(SCHEMA).parquet(str(path)) for path in paths]
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    written = union.groupBy("bucket").count()
    assert lineage.flush(60)
    with round_trips.counting():
        before = costs.snapshot()
        written.write.parquet(str(target))
        assert lineage.flush(60)
        return costs.since(before)


def test_a_query_costs_the_same_few_round_trips_with_3_or_30_inputs(
    spark: Any, lineage: Any, receiver: LineageReceiver, data_dir: Path
) -> None:
    few, many = _inputs(spark, data_dir, 3), _inputs(spark, data_dir, 30)
    # A first query of the same shape meets the plan's classes (their JVM-side probers are made once).
    _union_write(spark, few, data_dir / "round_trips_warm_up", lineage)

    small = _union_write(spark, few, data_dir / "round_trips_few", lineage)
    large = _union_write(spark, many, data_dir / "round_trips_many", lineage)

    assert small[Stage.CAPTURE].calls == large[Stage.CAPTURE].calls == 1
    assert small[Stage.CAPTURE].round_trips == large[Stage.CAPTURE].round_trips <= MAX_ROUND_TRIPS
    # The query's Spark jobs cost no callback into Python: none of its jobs is an RDD job.
    assert small[Stage.JOB_LISTENER] == large[Stage.JOB_LISTENER] == StageCost(0, 0, 0)

    for paths, name in ((few, "round_trips_few"), (many, "round_trips_many")):
        (run,) = runs_by_job(receiver.events, name)
        types = [event["eventType"] for event in run]
        # START, a RUNNING at each Spark job's start and one at the first job's end, COMPLETE
        assert types[0] == "START" and types[-1] == "COMPLETE" and types.count("RUNNING") >= 2, types
        details = [event["run"]["facets"].get("spark_jobDetails") for event in run]
        assert all(isinstance(facet["jobId"], int) for facet in details if facet is not None)
        assert len([facet for facet in details if facet is not None]) == types.count("RUNNING") - 1
        for event in run:
            assert sorted(datasets(event, "inputs")) == sorted(("file", str(path)) for path in paths)
            assert datasets(event, "outputs") == [("file", str(data_dir / name))]


def _tables(spark: Any, count: int) -> list[str]:
    names = [f"round_trips_{count}_table_{index}" for index in range(count)]
    for name in names:
        spark.range(0, 10, 1, 1).selectExpr("id", "id % 3 AS bucket").write.saveAsTable(name)
    return names


def _insert(spark: Any, names: list[str], target: str, lineage: Any) -> dict[Stage, StageCost]:
    """Insert the union of the tables ``names`` into the table ``target``, with round trips counted."""
    union = spark.table(names[0])
    for name in names[1:]:
        union = union.unionByName(spark.table(name))
    assert lineage.flush(60)
    with round_trips.counting():
        before = costs.snapshot()
        union.write.insertInto(target)
        assert lineage.flush(60)
        return costs.since(before)


def test_reading_and_writing_catalog_tables_costs_the_same_few_round_trips(
    spark: Any, lineage: Any, receiver: LineageReceiver, warehouse: Path
) -> None:
    few, many = _tables(spark, 3), _tables(spark, 30)
    spark.sql(f"CREATE TABLE round_trips_target ({SCHEMA}) USING parquet")
    _insert(spark, few, "round_trips_target", lineage)  # the plan's classes met once

    small = _insert(spark, few, "round_trips_target", lineage)
    large = _insert(spark, many, "round_trips_target", lineage)

    assert small[Stage.CAPTURE].calls == large[Stage.CAPTURE].calls == 1
    assert small[Stage.CAPTURE].round_trips == large[Stage.CAPTURE].round_trips <= MAX_ROUND_TRIPS
    assert small[Stage.JOB_LISTENER] == large[Stage.JOB_LISTENER] == StageCost(0, 0, 0)
    runs = runs_by_job(receiver.events, "round_trips_target")  # the table's creation, then the three inserts
    for run, names in zip(runs[-2:], (few, many)):
        assert run[-1]["eventType"] == "COMPLETE"
        assert sorted(datasets(run[-1], "inputs")) == sorted(("file", str(warehouse / name)) for name in names)
        assert datasets(run[-1], "outputs") == [("file", str(warehouse / "round_trips_target"))]


def test_a_query_of_another_session_gets_its_jobs_the_same_way(
    spark: Any, lineage: Any, receiver: LineageReceiver, data_dir: Path
) -> None:
    """A session lineage was not enabled in (a Spark Connect client's, here ``newSession()``'s) is heard on the
    listener bus: its queries are read as the enabled session's, their jobs with them."""
    other = spark.newSession()
    paths = _inputs(other, data_dir, 3)
    _union_write(other, paths, data_dir / "round_trips_warm_up_elsewhere", lineage)

    cost = _union_write(other, paths, data_dir / "round_trips_elsewhere", lineage)

    assert cost[Stage.CAPTURE].calls == 1 and cost[Stage.CAPTURE].round_trips <= MAX_ROUND_TRIPS
    assert cost[Stage.JOB_LISTENER] == StageCost(0, 0, 0)
    (run,) = runs_by_job(receiver.events, "round_trips_elsewhere")
    types = [event["eventType"] for event in run]
    assert types[0] == "START" and types[-1] == "COMPLETE" and types.count("RUNNING") >= 2, types
    assert any("spark_jobDetails" in event["run"]["facets"] for event in run)
    assert sorted(datasets(run[-1], "inputs")) == sorted(("file", str(path)) for path in paths)


def test_the_jvm_keeps_no_job_once_its_query_is_read_or_its_execution_ended(
    spark: Any, lineage: Any, data_dir: Path
) -> None:
    """Neither a reported query nor one that is not (a ``collect``, a ``count``) leaves a job in the JVM once it
    was read, nor a job or an execution that ended."""
    from spark_lineage.jvm.sql_jobs import sql_job_store
    from spark_lineage.jvm.values import JvmClasses

    store = sql_job_store(spark.sparkContext._gateway, JvmClasses(spark.sparkContext._jvm))
    assert lineage.flush(60)
    kept = int(store.by_query.size())
    path = data_dir / "round_trips_kept"
    spark.range(0, 10, 1, 2).write.parquet(str(path))
    spark.read.parquet(str(path)).where("id > 3").collect()
    spark.read.parquet(str(path)).groupBy().count().collect()
    assert lineage.flush(60)
    assert int(store.by_query.size()) == kept
    assert int(store.buffer_of_job.size()) == int(store.query_of_execution.size()) == 0


def test_the_jvm_files_each_job_under_its_query_and_keeps_a_bounded_number_of_queries(spark: Any) -> None:
    """The store's functions on made-up events (``[job id, query id, execution id]`` lists): a job reached once
    Spark no longer held its query goes with the one an earlier job of its execution named, an end with its
    start, and beyond the queries kept the oldest's jobs are dropped."""
    from spark_lineage.jvm.sql_jobs import SqlJobHandles, SqlJobStore, job_texts
    from spark_lineage.jvm.values import JvmClasses

    jvm, gateway = spark.sparkContext._jvm, spark.sparkContext._gateway
    classes = JvmClasses(jvm)
    store = SqlJobStore(classes, kept=2)
    handles = SqlJobHandles(gateway, classes)
    method_type = jvm.java.lang.invoke.MethodType.methodType
    to_object = method_type(handles.OBJ, handles.OBJ)
    getter = handles.lookup.findVirtual(
        classes.java_class("java.util.List"), "get", method_type(handles.OBJ, handles.INT)
    )

    def item(index: int) -> Any:
        """``(event) -> Object``: a field of the made-up event."""
        args = gateway.new_array(classes("java.lang.Object"), 1)
        args[0] = index
        return handles.mh.insertArguments(getter, 1, args).asType(to_object)

    text = handles.lookup.findVirtual(handles.OBJ, "toString", method_type(handles.STR)).asType(to_object)
    start = handles.filing_start(store, text, item(1), item(2), item(0))
    end = handles.filing_end(store, text, item(0))

    def post(handle: Any, *fields: str) -> None:
        event = jvm.java.util.ArrayList()
        for field in fields:
            event.add(field)
        args = gateway.new_array(classes("java.lang.Object"), 1)
        args[0] = event
        handle.invokeWithArguments(args)

    post(start, "1", "7", "40")
    post(start, "2", "", "40")  # reached once the execution had ended: filed under query 7 all the same
    post(start, "3", "", "41")  # no job of execution 41 named its query: dropped
    post(end, "1", "ended")
    assert job_texts(store.take_slowly(7)) == ["[1, 7, 40]", "[2, , 40]", "[1, ended]"]
    assert store.take_slowly(7) is None  # taken once
    for query in ("8", "9", "10"):
        post(start, f"1{query}", query, f"5{query}")
    assert store.take_slowly(8) is None  # two queries kept: the oldest went
    assert job_texts(store.take_slowly(10)) == ["[110, 10, 510]"]
