"""Structured Streaming against a real Kafka broker: each query is a run from start to end, with its sources and
its sink, and each micro-batch a run under it; a DSv2 sink's nested write is not reported again; a foreachBatch
write is reported once, under the application run of the session that started the stream."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import LineageReceiver, datasets, query_events, run_ends

pytestmark = pytest.mark.spark


@pytest.fixture()
def servers(kafka: Any) -> str:
    if kafka is None:
        pytest.skip("no Kafka broker here (scripts/test fetches and starts one)")
    return str(kafka.bootstrap)


def _produce(spark: Any, servers: str, topic: str, rows: int = 3) -> None:
    data = spark.createDataFrame([(str(i), f"v{i}") for i in range(rows)], "key string, value string")
    data.write.format("kafka").option("kafka.bootstrap.servers", servers).option("topic", topic).save()


def _kafka_stream(spark: Any, servers: str, topic: str) -> Any:
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", f"{servers},other-broker:9092")
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )


def _to_parquet_until_caught_up(stream: Any, out: Path, tmp_path: Path) -> None:
    query = (
        stream.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)


def _json_source(tmp_path: Path, record: dict[str, Any]) -> Path:
    """A directory for a file stream to watch, holding one JSON file of one record."""
    source = tmp_path / "incoming"
    source.mkdir()
    (source / "part-1.json").write_text(json.dumps(record) + "\n")
    return source


def _stream_runs(events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    runs: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        if event["job"]["facets"]["jobType"]["jobType"] == "STREAMING_QUERY":
            runs.setdefault(event["run"]["runId"], []).append(event)
    return runs


def _only_stream(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    runs = _stream_runs(events)
    assert len(runs) == 1, runs
    (run,) = runs.values()
    return run


def _batches_of(events: list[dict[str, Any]], stream_run_id: str) -> list[dict[str, Any]]:
    return [e for e in query_events(events) if e["run"]["facets"]["parent"]["run"]["runId"] == stream_run_id]


def test_kafka_to_kafka_is_a_run_with_its_topics_and_a_run_per_micro_batch(
    spark: Any, lineage: Any, receiver: LineageReceiver, servers: str, tmp_path: Path
) -> None:
    namespace = f"kafka://{servers}"
    _produce(spark, servers, "stream_src")
    query = (
        _kafka_stream(spark, servers, "stream_src")
        .selectExpr("key", "upper(CAST(value AS STRING)) AS value")
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", servers)
        .option("topic", "stream_dst")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .queryName("copy topics")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert lineage.flush(60)

    run = _only_stream(receiver.events)
    assert [e["eventType"] for e in run] == ["START", "RUNNING", "COMPLETE"]
    assert {e["job"]["name"] for e in run} == {"lineage_tests.copy_topics"}
    assert run[0]["job"]["facets"]["jobType"]["processingType"] == "STREAMING"
    assert run[0]["run"]["facets"]["parent"]["run"]["runId"] == lineage.app_run_id
    for event in run[1:]:
        assert datasets(event, "inputs") == [(namespace, "stream_src")]
        assert datasets(event, "outputs") == [(namespace, "stream_dst")]
        assert "extractionError" not in event["run"]["facets"], event["run"]["facets"].get("extractionError")

    # One run per micro-batch, under the query's run; the sink's nested collect is not a run of its own.
    batches = _batches_of(receiver.events, run[0]["run"]["runId"])
    # As openlineage-spark: START, RUNNING as its Spark job starts (with the job's details) and as it ends.
    assert [e["eventType"] for e in batches] == ["START", "RUNNING", "RUNNING", "COMPLETE"]
    _, job_started, _, complete = batches
    details = job_started["run"]["facets"]["spark_jobDetails"]
    assert details["jobGroup"] == str(query.runId)
    assert details["jobDescription"] == f"copy topics\nid = {query.id}\nrunId = {query.runId}\nbatch = 0"
    assert [e for e in batches if "spark_jobDetails" in e["run"]["facets"]] == [job_started]
    assert {e["job"]["name"] for e in batches} == {"lineage_tests.write_to_data_source_v2"}
    assert complete["job"]["facets"]["jobType"]["processingType"] == "STREAMING"
    assert datasets(complete, "inputs") == [(namespace, "stream_src")]
    assert datasets(complete, "outputs") == [(namespace, "stream_dst")]
    assert complete["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 3
    assert complete["run"]["facets"]["parent"]["root"]["run"]["runId"] == lineage.app_run_id
    assert [e for e in query_events(receiver.events) if e not in batches and "data_source_v2" in e["job"]["name"]] == []


def test_files_to_parquet_reports_the_sink(spark: Any, lineage: Any, receiver: LineageReceiver, tmp_path: Path) -> None:
    source = _json_source(tmp_path, {"id": 1, "name": "ann"})
    out = tmp_path / "table"
    _to_parquet_until_caught_up(spark.readStream.schema("id long, name string").json(str(source)), out, tmp_path)
    assert lineage.flush(60)

    run = _only_stream(receiver.events)
    assert run[-1]["eventType"] == "COMPLETE"
    assert run[-1]["job"]["name"] == "lineage_tests.streaming_query"
    assert datasets(run[-1], "inputs") == [("file", str(source))]
    assert datasets(run[-1], "outputs") == [("file", str(out))]
    (complete,) = [e for e in _batches_of(receiver.events, run[0]["run"]["runId"]) if e["eventType"] == "COMPLETE"]
    # openlineage-spark names the batch after its scan and reports no output: the output is reported here.
    assert complete["job"]["name"].startswith("lineage_tests.scan_json.")
    assert datasets(complete, "outputs") == [("file", str(out))]


def test_foreach_batch_writes_are_reported_once_under_the_application_run(
    spark: Any, lineage: Any, receiver: LineageReceiver, servers: str, tmp_path: Path
) -> None:
    # Configured lineage is what the start-up hook acts on: the session foreachBatch builds around the
    # stream's clone must find the listener it inherits, not register a second one.
    spark.conf.set("spark.openlineage.transport.type", "http")
    spark.conf.set("spark.openlineage.transport.url", receiver.url)
    try:
        _produce(spark, servers, "batched_src")
        out = str(tmp_path / "batched")

        def write(batch: Any, batch_id: int) -> None:
            batch.selectExpr("CAST(value AS STRING) AS value").write.mode("append").parquet(out)

        query = (
            _kafka_stream(spark, servers, "batched_src")
            .writeStream.foreachBatch(write)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        assert lineage.flush(60)
    finally:
        spark.conf.unset("spark.openlineage.transport.type")
        spark.conf.unset("spark.openlineage.transport.url")

    writes = [e for e in query_events(receiver.events) if e["job"]["name"].endswith("_batched")]
    assert run_ends([e["eventType"] for e in writes]) == ("START", "COMPLETE"), [e["job"]["name"] for e in writes]
    assert {e["run"]["facets"]["parent"]["run"]["runId"] for e in writes} == {lineage.app_run_id}
    assert datasets(writes[-1], "outputs") == [("file", out)]
    applications = {
        e["run"]["runId"] for e in receiver.events if e["job"]["facets"]["jobType"]["jobType"] == "APPLICATION"
    }
    assert applications == {lineage.app_run_id}
    run = _only_stream(receiver.events)
    assert datasets(run[-1], "inputs") == [(f"kafka://{servers}", "batched_src")]
    assert datasets(run[-1], "outputs") == []
    # The batch DataFrame is an RDD of the micro-batch's plan: the write reads what the stream reads.
    assert datasets(writes[-1], "inputs") == [(f"kafka://{servers}", "batched_src")]
    assert "extractionError" not in writes[-1]["run"]["facets"]


def test_kafka_to_parquet_names_the_topic_and_the_directory(
    spark: Any, lineage: Any, receiver: LineageReceiver, servers: str, tmp_path: Path
) -> None:
    _produce(spark, servers, "to_files_src")
    out = tmp_path / "from_kafka"
    values = _kafka_stream(spark, servers, "to_files_src").selectExpr("CAST(value AS STRING) AS value")
    _to_parquet_until_caught_up(values, out, tmp_path)
    assert lineage.flush(60)

    run = _only_stream(receiver.events)
    assert [e["eventType"] for e in run] == ["START", "RUNNING", "COMPLETE"]
    for event in [*run[1:], *_batches_of(receiver.events, run[0]["run"]["runId"])]:
        assert datasets(event, "inputs") == [(f"kafka://{servers}", "to_files_src")]
        assert datasets(event, "outputs") == [("file", str(out))]
        assert "extractionError" not in event["run"]["facets"]


def test_a_failed_query_ends_its_run_as_failed(
    spark: Any, lineage: Any, receiver: LineageReceiver, tmp_path: Path
) -> None:
    from pyspark.errors import StreamingQueryException

    source = _json_source(tmp_path, {"id": 1})

    def fail(batch: Any, batch_id: int) -> None:
        raise ValueError("this batch cannot be written")

    query = (
        spark.readStream.schema("id long")
        .json(str(source))
        .writeStream.foreachBatch(fail)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .queryName("doomed")
        .start()
    )
    with pytest.raises(StreamingQueryException):
        query.awaitTermination(120)
    assert lineage.flush(60)

    run = _only_stream(receiver.events)
    assert [e["eventType"] for e in run][0 :: len(run) - 1] == ["START", "FAIL"]
    assert "this batch cannot be written" in run[-1]["run"]["facets"]["errorMessage"]["message"]
    assert datasets(run[-1], "inputs") == [("file", str(source))]


@pytest.mark.iceberg
def test_a_stream_into_an_iceberg_table_names_the_table(
    spark: Any, lineage: Any, receiver: LineageReceiver, iceberg_dir: Path, tmp_path: Path
) -> None:
    spark.sql("CREATE NAMESPACE IF NOT EXISTS hcat.db")
    spark.sql("CREATE TABLE hcat.db.streamed (id BIGINT, name STRING) USING iceberg")
    try:
        source = tmp_path / "incoming"
        source.mkdir()
        (source / "part-1.json").write_text(json.dumps({"id": 1, "name": "ann"}) + "\n")
        stream = spark.readStream.schema("id long, name string").json(str(source))
        stream.writeStream.option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(
            availableNow=True
        ).toTable("hcat.db.streamed").awaitTermination(120)
        assert lineage.flush(60)
    finally:
        spark.sql("DROP TABLE IF EXISTS hcat.db.streamed")

    run = _only_stream(receiver.events)
    assert datasets(run[-1], "inputs") == [("file", str(source))]
    assert datasets(run[-1], "outputs") == [("file", str(iceberg_dir / "hadoop_warehouse" / "db" / "streamed"))]
    assert "extractionError" not in run[-1]["run"]["facets"]


def _foreach_batch_writes(spark: Any, stream: Any, out: str, tmp_path: Path) -> None:
    """Run ``stream`` over what its source holds now, each batch appended to parquet at ``out`` by a
    foreachBatch function."""

    def write(batch: Any, batch_id: int) -> None:
        batch.write.mode("append").parquet(out)

    stream.writeStream.foreachBatch(write).option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(
        availableNow=True
    ).start().awaitTermination(120)


def test_a_foreach_batch_write_reads_the_directory_of_a_file_stream(
    spark: Any, lineage: Any, receiver: LineageReceiver, tmp_path: Path
) -> None:
    source = _json_source(tmp_path, {"id": 1})
    out = str(tmp_path / "from_files")
    _foreach_batch_writes(spark, spark.readStream.schema("id long").json(str(source)), out, tmp_path)
    assert lineage.flush(60)

    writes = [e for e in query_events(receiver.events) if e["job"]["name"].endswith("_from_files")]
    assert run_ends([e["eventType"] for e in writes]) == ("START", "COMPLETE")
    for event in writes:
        assert datasets(event, "inputs") == [("file", str(source))]
        assert datasets(event, "outputs") == [("file", out)]


@pytest.mark.iceberg
def test_a_foreach_batch_write_reads_the_table_of_an_iceberg_stream(
    spark: Any, lineage: Any, receiver: LineageReceiver, iceberg_dir: Path, tmp_path: Path
) -> None:
    spark.sql("CREATE NAMESPACE IF NOT EXISTS hcat.db")
    spark.sql("CREATE TABLE hcat.db.stream_source (id BIGINT) USING iceberg")
    out = str(tmp_path / "from_iceberg")
    try:
        spark.sql("INSERT INTO hcat.db.stream_source VALUES (1), (2)")
        _foreach_batch_writes(spark, spark.readStream.format("iceberg").load("hcat.db.stream_source"), out, tmp_path)
        assert lineage.flush(60)
    finally:
        spark.sql("DROP TABLE IF EXISTS hcat.db.stream_source")

    table = ("file", str(iceberg_dir / "hadoop_warehouse" / "db" / "stream_source"))
    run = _only_stream(receiver.events)
    assert datasets(run[-1], "inputs") == [table], run[-1]["run"]["facets"].get("extractionError")
    writes = [e for e in query_events(receiver.events) if e["job"]["name"].endswith("_from_iceberg")]
    assert run_ends([e["eventType"] for e in writes]) == ("START", "COMPLETE")
    assert datasets(writes[-1], "inputs") == [table]
    assert datasets(writes[-1], "outputs") == [("file", out)]
