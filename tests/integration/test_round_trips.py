"""What a query costs the py4j edge, on real local Spark: its capture makes the same few JVM round trips
whatever the number of its datasets, and its Spark jobs reach its RUNNING events without a callback into
Python (the job listener keeps them in the JVM; the capture reads them). Spark's own RDD jobs (a parquet
read's schema inference) cross into Python only if they fail."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
from py4j.protocol import Py4JJavaError

from spark_lineage import costs
from spark_lineage.costs import Stage, StageCost
from spark_lineage.jvm import round_trips
from spark_lineage.jvm.spark import QueryReader, read_session_conf
from spark_lineage.jvm.values import JvmClasses, call
from tests.integration.test_rdd import _rdd_runs
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
    # After a query read through the same plan accessors: its body (with that query's options) and header at
    # once, and the release of its QueryExecution.
    assert small[Stage.CAPTURE].round_trips == 2
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


def test_descriptions_and_unknown_nodes_cost_no_round_trip_more(
    spark: Any, receiver: LineageReceiver, data_dir: Path
) -> None:
    """``columnLineage.descriptionsEnabled`` and ``facets.spark_unknown.disabled=false`` read the SQL of each
    expression a plan node holds, each output column's type and the plan's JSON within the capture's own
    calls: a query costs the round trips it costs without them."""
    import spark_lineage

    source = data_dir / "described_source"
    spark.range(0, 10, 1, 1).selectExpr("id", "id % 3 AS bucket").write.parquet(str(source))
    handle = spark_lineage.enable(
        spark,
        transport={"type": "http", "url": receiver.url},
        columnLineage={"descriptionsEnabled": "true", "datasetLineageEnabled": "false"},
        facets={"spark_unknown": {"disabled": "false"}},
    )
    try:

        def write(name: str) -> dict[Stage, StageCost]:
            more = spark.range(0, 3, 1, 1).selectExpr("id", "id % 3 AS bucket")
            frame = spark.read.schema(SCHEMA).parquet(str(source)).unionByName(more).where("id > 2")
            grouped = frame.groupBy("bucket").agg({"id": "sum"}).withColumnRenamed("sum(id)", "total")
            assert handle.flush(60)
            with round_trips.counting():
                before = costs.snapshot()
                grouped.write.parquet(str(data_dir / name))
                assert handle.flush(60)
                return costs.since(before)

        for warm_up in ("warm_up_once", "warm_up_twice"):  # the plan's classes met, probers made
            write(warm_up)
        spent = write("described")
    finally:
        handle.disable(timeout=30)
    assert spent[Stage.CAPTURE].calls == 1 and spent[Stage.CAPTURE].round_trips == 2
    (run,) = runs_by_job(receiver.events, "described")
    complete = run[-1]
    assert complete["eventType"] == "COMPLETE"
    fields = complete["outputs"][0]["facets"]["columnLineage"]["fields"]
    described = {
        (field["field"], t["subtype"], t["description"])
        for field in fields["total"]["inputFields"]
        for t in field["transformations"]
    }
    assert described == {
        ("bucket", "GROUP_BY", "GROUP BY bucket"),
        ("id", "AGGREGATION", "sum(id) AS total"),
        ("id", "FILTER", "WHERE ((id IS NOT NULL) AND (id > 2L))"),
    }
    # The Range the union reads is the plan's one leaf no handler names a dataset with.
    unknown = complete["run"]["facets"]["spark_unknown"]
    (leaf,) = unknown["inputs"]
    assert leaf["description"]["class"] == "org.apache.spark.sql.catalyst.plans.logical.Range"
    assert leaf["outputAttributes"] == [{"name": "id", "type": "long", "metadata": {}}]
    assert "output" not in unknown


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


def _count_rdd_jobs(spark: Any) -> tuple[Any, Any]:
    """A listener of the test's own on the bus, composed in the JVM as the job listener is, that adds to a JVM
    set the id of each job whose properties name no SQL execution (no callback into Python): the listener, to
    remove, and the set."""
    from spark_lineage.jvm.listener import ListenerProxyBuilder
    from spark_lineage.jvm.values import JvmClasses

    classes = JvmClasses(spark.sparkContext._jvm)
    builder = ListenerProxyBuilder(spark.sparkContext._gateway, classes)
    start, obj = "org.apache.spark.scheduler.SparkListenerJobStart", "java.lang.Object"
    ids = classes("java.util.concurrent.ConcurrentHashMap").newKeySet()
    add = builder.mh.insertArguments(builder._method("java.util.Set", "add", obj), 0, builder._objects(ids))
    job_id = builder._boxed(builder._method(start, "jobId"))
    count = builder._void(builder.mh.filterArguments(add, 0, builder._handles(job_id)))
    execution_id = builder._after(
        builder._method(start, "properties"),
        builder.mh.insertArguments(
            builder._method("java.util.Properties", "getProperty", "java.lang.String"),
            1,
            builder._objects("spark.sql.execution.id"),
        ),
    )
    no_execution = builder._after(execution_id, builder._is_null())
    listener = builder.proxy(
        {"onJobStart": builder.mh.guardWithTest(no_execution, count, builder._ignore())},
        "spark_lineage test: RDD job counter",
    )
    spark.sparkContext._jsc.sc().addSparkListener(listener)
    return listener, ids


def _drained(spark: Any) -> None:
    """Wait until every listener heard what Spark posted so far."""
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(10_000)


def test_spark_s_own_rdd_jobs_cost_a_query_no_callback_and_no_round_trip(
    spark: Any, lineage: Any, receiver: LineageReceiver, data_dir: Path
) -> None:
    """Reading parquet without a schema runs Spark jobs outside any SQL execution (the footers' schema
    inference, one per input here): they write nothing and succeed, so the JVM never passes them to Python, and
    the whole query, from its reads to its write's events, makes at most MAX_ROUND_TRIPS round trips."""
    paths = _inputs(spark, data_dir, 2)
    listener, rdd_job_ids = _count_rdd_jobs(spark)

    def query(target: Path) -> None:
        left, right = (spark.read.parquet(str(path)) for path in paths)  # no schema: Spark infers it
        left.unionByName(right).groupBy("bucket").count().write.parquet(str(target))
        _drained(spark)
        assert lineage.flush(60)

    try:
        query(data_dir / "round_trips_warm_up_own_jobs")  # the plan's classes met once
        sink = lineage._runtime.job_sink
        calls, rdd_jobs = sink.calls, int(rdd_job_ids.size())
        with round_trips.counting():
            before = costs.snapshot()
            query(data_dir / "round_trips_own_jobs")
            cost = costs.since(before)
        rdd_jobs = int(rdd_job_ids.size()) - rdd_jobs
    finally:
        spark.sparkContext._jsc.sc().removeSparkListener(listener)

    assert rdd_jobs >= 2  # Spark's own jobs ran
    assert sink.calls == calls  # and none crossed into Python
    assert cost[Stage.JOB_LISTENER] == cost[Stage.RDD_JOBS] == StageCost(0, 0, 0)
    assert cost[Stage.CAPTURE].calls == 1
    spent = {stage.name: trips.round_trips for stage, trips in cost.items() if trips.round_trips}
    assert sum(spent.values()) <= MAX_ROUND_TRIPS, spent
    (run,) = runs_by_job(receiver.events, "round_trips_own_jobs")
    assert run[-1]["eventType"] == "COMPLETE"
    assert sorted(datasets(run[-1], "inputs")) == sorted(("file", str(path)) for path in paths)


def test_an_rdd_job_crosses_into_python_only_if_it_writes_files_or_fails(
    spark: Any, lineage: Any, receiver: LineageReceiver, data_dir: Path
) -> None:
    """A job that writes nothing and succeeds is never passed to Python, and gets no run; one that fails is
    passed once, at its end, and reported as it always was: its RDD graph read then (its input), its error;
    a Hadoop save is passed at its start and its end, and reported with what it read and wrote."""
    context = spark.sparkContext
    sink = lineage._runtime.job_sink
    people = str(data_dir / "people.csv")
    copy = data_dir / "people_copy"

    def calls(action: Any) -> int:
        """How many times the job listener called Python for what ``action`` ran."""
        before = sink.calls
        with contextlib.suppress(Exception):  # the failing job
            action()
        _drained(spark)
        assert lineage.flush(60)
        return int(sink.calls - before)

    crossings = [
        calls(lambda: context.textFile(people).count()),
        calls(lambda: context.textFile(people).map(lambda line: len(line) // 0).count()),
        calls(lambda: context.textFile(people).saveAsTextFile(str(copy))),
    ]

    (start, fail), (saved_start, complete) = list(_rdd_runs(receiver.events).values())
    assert [start["eventType"], fail["eventType"]] == ["START", "FAIL"]
    for event in (start, fail):
        assert event["job"]["name"] == "lineage_tests.python_map_partitions_hadoop"  # named after its graph
        assert datasets(event, "inputs") == [("file", str(data_dir))]
        assert datasets(event, "outputs") == []
    error = fail["run"]["facets"]["errorMessage"]
    assert error["stackTrace"].startswith(error["message"])  # the job's exception, and its stack trace
    assert "ZeroDivisionError" in error["stackTrace"]
    assert [saved_start["eventType"], complete["eventType"]] == ["START", "COMPLETE"]
    for event in (saved_start, complete):
        assert event["job"]["name"] == "lineage_tests.map_partitions_python_map_partitions_hadoop"
        assert datasets(event, "inputs") == [("file", str(data_dir))]
        assert datasets(event, "outputs") == [("file", str(copy))]
    assert complete["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 4
    assert crossings == [0, 1, 2]


def test_the_jvm_keeps_an_rdd_job_until_it_ends_and_a_bounded_number_of_them(
    spark: Any, lineage: Any, receiver: LineageReceiver
) -> None:
    """The job listener on made-up job events (jobs Spark holds no ``ActiveJob`` for, as for a job over before
    the listener heard its start: they write nothing): each is kept until its end, which crosses into Python
    only if the job failed, and is then reported as such a job always was, after its id; beyond RDD_JOBS_KEPT
    kept (ends Spark never posted), all are forgotten."""
    from spark_lineage.jvm.listener import RDD_JOBS_KEPT

    jvm = spark.sparkContext._jvm
    scheduler = jvm.org.apache.spark.scheduler
    job_listener = lineage._runtime.bridge._job_listener
    listener = job_listener._listener
    no_stages = jvm.org.apache.spark.api.python.PythonUtils.toSeq(jvm.java.util.ArrayList())
    succeeded = getattr(getattr(scheduler, "JobSucceeded$"), "MODULE$")
    failed = scheduler.JobFailed(jvm.java.lang.IllegalStateException("made up"))
    sink = lineage._runtime.job_sink
    first = 1_000_000

    def start(job_id: int) -> None:
        listener.onJobStart(
            scheduler.SparkListenerJobStart(job_id, 1_700_000_000_000, no_stages, jvm.java.util.Properties())
        )

    calls = sink.calls
    start(first)
    start(first + 1)
    listener.onJobEnd(scheduler.SparkListenerJobEnd(first, 1_700_000_000_005, succeeded))
    listener.onJobEnd(scheduler.SparkListenerJobEnd(first + 1, 1_700_000_000_006, failed))
    assert sink.calls == calls + 1  # the failed job's end, alone
    assert lineage.flush(60)
    ((started, fail),) = list(_rdd_runs(receiver.events).values())
    assert {started["job"]["name"], fail["job"]["name"]} == {f"lineage_tests.{first + 1}"}
    assert fail["run"]["facets"]["errorMessage"]["message"] == "java.lang.IllegalStateException: made up"
    assert [started["eventTime"], fail["eventTime"]] == [
        "2023-11-14T22:13:20.000+00:00",
        "2023-11-14T22:13:20.006+00:00",
    ]

    kept = job_listener.rdd_jobs_started
    assert int(kept.size()) == 0
    try:
        for job_id in range(first, first + RDD_JOBS_KEPT + 1):
            start(job_id)
        assert int(kept.size()) == RDD_JOBS_KEPT + 1
        start(first + RDD_JOBS_KEPT + 1)  # one too many: those kept are forgotten
        assert int(kept.size()) == 1
    finally:
        kept.clear()


def _bound_ids(spark: Any) -> set[str]:
    """The ids of what py4j's gateway holds for Python now (its bindings' keys: one round trip)."""
    keys = str(spark.sparkContext._gateway.java_gateway_server.getGateway().getBindings().keySet().toString())
    return set(keys[1:-1].split(", ")) if len(keys) > 2 else set()


def _bound_query_executions(spark: Any, before: set[str]) -> list[str]:
    """The query executions py4j's gateway has come to hold for Python since ``before`` (what :func:`_bound_ids`
    said), and the execution ends that hold one, by class name. Only what was bound since is looked at, and
    each object looked at is let go at once: looking at every binding would bind each again (py4j binds what
    it returns), and the bindings would grow with each look (to 10,000 and a minute's round trips)."""
    gateway = spark.sparkContext._gateway
    bindings = gateway.java_gateway_server.getGateway().getBindings()
    names = []
    for key in sorted(_bound_ids(spark) - before):
        value = bindings.get(key)
        if not hasattr(value, "getClass"):  # let go meanwhile, or a value py4j converts (a string)
            continue
        of = value.getClass()
        names.append(str(of.getName()))
        gateway.detach(of)
        gateway.detach(value)
    return [name for name in names if name.endswith(("QueryExecution", "IncrementalExecution", "ExecutionEnd"))]


@pytest.mark.parametrize("session", ["enabled", "another session"])
def test_a_read_querys_execution_is_let_go_at_once(
    spark: Any, lineage: Any, receiver: LineageReceiver, data_dir: Path, session: str
) -> None:
    """Once a query is read, py4j's gateway no longer holds its ``QueryExecution`` (with its plans and its
    broadcast relations) for Python: released there and then, not when py4j's finalizer thread next looks (once
    a second), by which time a young collection would have moved it all to the old generation."""
    before = _bound_ids(spark)
    target = spark if session == "enabled" else spark.newSession()
    paths = _inputs(target, data_dir, 2)
    left, right = (target.read.schema(SCHEMA).parquet(str(path)) for path in paths)
    assert lineage.flush(60)
    assert _bound_query_executions(spark, before) == []
    left.join(right.withColumnRenamed("bucket", "b"), "id").write.parquet(str(data_dir / f"released_{session[0]}"))
    assert lineage.flush(60)
    assert _bound_query_executions(spark, before) == []
    (run,) = runs_by_job(receiver.events, f"released_{session[0]}")
    assert run[-1]["eventType"] == "COMPLETE"


def test_a_sessions_confs_are_read_in_one_round_trip(spark: Any) -> None:
    """What a Spark Connect query's identity reads of its session, every conf it sees (the client's
    ``spark.conf.set`` values among them): one round trip, the same map as asking py4j step by step (four)."""
    other = spark.newSession()
    other.conf.set("spark.openlineage.appName", "read in one call")
    gateway = spark.sparkContext._gateway
    reader = QueryReader(other._jsparkSession, gateway, JvmClasses(gateway.jvm), lambda _: {})
    reader.session_conf()  # composes the function
    spent = []
    with round_trips.counting():
        for read in (reader.session_conf, lambda: read_session_conf(other._jsparkSession)):
            before = costs.snapshot()
            with costs.stage(Stage.CAPTURE):
                conf = read()
            spent.append((conf, costs.since(before)[Stage.CAPTURE].round_trips))
    (in_one_call, one), (step_by_step, four) = spent
    assert (one, four) == (1, 4)
    assert in_one_call == step_by_step
    assert in_one_call["spark.openlineage.appName"] == "read in one call"
    assert "spark.openlineage.appName" not in read_session_conf(spark._jsparkSession)


def test_a_call_without_py4js_layers_answers_as_py4j_does(spark: Any) -> None:
    """The capture's calls skip py4j's and PySpark's per-call layers: the same answers, the same errors."""
    jvm = spark.sparkContext._jvm
    built = jvm.java.lang.StringBuilder("ab;c")
    assert call(built, "indexOf", ";", 0) == built.indexOf(";", 0) == 2
    assert call(built, "toString") == "ab;c"
    assert call(built, "insert", 0, True).toString() == "trueab;c"  # a JVM object out
    items = jvm.java.util.ArrayList()
    assert call(items, "add", jvm.java.lang.StringBuilder("xyz")) is True  # a JVM object in
    assert call(items, "add", None) is True
    assert (call(items, "size"), call(items, "get", 0).toString(), call(items, "get", 1)) == (2, "xyz", None)
    with pytest.raises(Py4JJavaError, match="IndexOutOfBoundsException"):
        call(built, "charAt", 99)
