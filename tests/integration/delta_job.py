"""A Spark application that does every Delta Lake operation spark_lineage reports, with lineage on, for
``tests/integration/test_delta.py``: Delta needs its session extension and its catalog as ``spark_catalog``,
which the test run's shared session must not get, so Delta runs in an application of its own.

    python -m tests.integration.delta_job --url http://127.0.0.1:PORT --base DIR [--client PYTHON]

Events go over HTTP to ``--url``. With ``--client``, the application is a Spark Connect server too, and at the
end, its own lineage off, a client process of that interpreter saves to a Delta path with lineage of its own
(``tests/integration/delta_connect_client.py``). Each operation writes tables and paths of its own, so that
the test finds its run by name; the operations run one after the other, each waiting until its events are delivered.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

APP_NAME = "Delta Lineage Tests"


def session(base: Path, kafka: str | None = None, connect_port: int | None = None) -> Any:
    """The application's session; with ``connect_port``, a Spark Connect server too, on that port."""
    import pyspark
    from pyspark.sql import SparkSession

    from spark_lineage.connect.server import connect_package, spark_jars_dir
    from tests.jars import CONNECT_PLUGIN, SPARK_SHIPS, delta_spark, spark_kafka
    from tests.parity.delta_scenarios import delta_confs

    packages = [str(delta_spark(pyspark.__version__))]
    if kafka:
        packages += filter(None, [spark_kafka(pyspark.__version__)])
    if connect_port is not None:
        packages += filter(None, [connect_package(pyspark.__version__, spark_jars_dir(os.environ), {})])

    builder = (
        SparkSession.builder.master("local[1]")
        .appName(APP_NAME)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.warehouse.dir", str(base / "warehouse"))
        .config("spark.jars.packages", ",".join(packages))
        .config("spark.jars.excludes", SPARK_SHIPS)
    )
    for key, value in delta_confs().items():
        builder = builder.config(key, value)
    if connect_port is not None:
        builder = builder.config("spark.plugins", CONNECT_PLUGIN).config(
            "spark.connect.grpc.binding.port", str(connect_port)
        )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def operations(spark: Any, base: Path, stamps: dict[str, str]) -> dict[str, Callable[[], object]]:
    """The operations, in order, by name; ``stamps`` gets the timestamp a time-travel read uses."""
    from delta.tables import DeltaTable

    paths = base / "paths"
    people, moves = str(paths / "people"), str(paths / "moves")
    source = spark.read.parquet(str(base / "source"))  # id, name, city

    def timestamp_between_commits() -> None:
        time.sleep(1.1)
        stamps["after_first_write"] = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
        time.sleep(1.1)

    def stream_through_foreach_batch() -> None:
        """A Delta table read as a stream, each batch appended to parquet by a foreachBatch function."""
        table = str(paths / "stream_source")
        source.write.format("delta").save(table)

        def write(batch: Any, batch_id: int) -> None:
            batch.write.mode("append").parquet(str(base / "out" / "from_delta_stream"))

        spark.readStream.format("delta").load(table).writeStream.foreachBatch(write).option(
            "checkpointLocation", str(base / "checkpoints" / "delta_stream")
        ).trigger(availableNow=True).start().awaitTermination(120)

    def merge_into_path() -> None:
        DeltaTable.forPath(spark, moves).alias("t").merge(
            source.where("city = 'oslo'").alias("s"), "t.id = s.id"
        ).whenMatchedUpdate(set={"city": "upper(s.city)"}).whenNotMatchedInsertAll().execute()

    return {
        # Path tables: save, append, overwrite, then reads of the latest version and back in time.
        "path_save": lambda: source.write.format("delta").save(people),
        "stamp": timestamp_between_commits,
        "path_append": lambda: source.where("id > 1").write.format("delta").mode("append").save(people),
        "path_overwrite": lambda: (
            source.selectExpr("id", "upper(name) AS name", "city").write.format("delta").mode("overwrite").save(people)
        ),
        "path_read": lambda: spark.read.format("delta").load(people).write.parquet(str(base / "out" / "latest")),
        "path_read_version": lambda: (
            spark.read.format("delta")
            .option("versionAsOf", 1)
            .load(people)
            .write.parquet(str(base / "out" / "version_1"))
        ),
        "path_read_timestamp": lambda: (
            spark.read.format("delta")
            .option("timestampAsOf", stamps["after_first_write"])
            .load(people)
            .write.parquet(str(base / "out" / "at_timestamp"))
        ),
        # Catalog tables: saveAsTable (create, then append), CREATE TABLE and INSERT INTO, CTAS.
        "save_as_table": lambda: source.write.format("delta").saveAsTable("people_saved"),
        "save_as_table_append": lambda: source.write.format("delta").mode("append").saveAsTable("people_saved"),
        "create_table": lambda: spark.sql("CREATE TABLE cities (city STRING, residents BIGINT) USING delta"),
        "insert_into": lambda: spark.sql("INSERT INTO cities SELECT city, count(*) FROM people_saved GROUP BY city"),
        "ctas": lambda: spark.sql(
            "CREATE TABLE paris USING delta AS SELECT id, upper(name) AS name FROM people_saved WHERE city = 'paris'"
        ),
        # Row-level commands on a catalog table.
        "merge": lambda: spark.sql(
            "MERGE INTO cities c USING (SELECT DISTINCT city, 10 AS residents FROM people_saved WHERE id < 3) s "
            "ON c.city = s.city WHEN MATCHED THEN UPDATE SET c.residents = c.residents + s.residents "
            "WHEN NOT MATCHED THEN INSERT *"
        ),
        "update": lambda: spark.sql("UPDATE paris SET name = lower(name) WHERE id = 1"),
        "delete": lambda: spark.sql("DELETE FROM cities WHERE city = 'oslo'"),
        # Reads of a catalog table back in time, in SQL.
        "table_version_as_of": lambda: spark.sql("SELECT * FROM cities VERSION AS OF 1").write.parquet(
            str(base / "out" / "cities_v1")
        ),
        # The Python API on a path table: MERGE (no alias of its own) and DELETE.
        "path_table_create": lambda: source.write.format("delta").save(moves),
        "path_merge": merge_into_path,
        "path_delete": lambda: DeltaTable.forPath(spark, moves).delete("id = 2"),
        "stream_foreach_batch": stream_through_foreach_batch,
    }


def kafka_pipeline(spark: Any, base: Path, servers: str) -> dict[str, Callable[[], object]]:
    """A new user's pipeline: records into a Kafka topic, then from the topic into Delta, in batch and as a
    stream."""
    delta = base / "paths"

    def topic_read() -> Any:
        return (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", servers)
            .option("subscribe", "people_topic")
            .load()
        )

    def stream_into_delta() -> None:
        stream = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", servers)
            .option("subscribe", "people_topic")
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("CAST(key AS STRING) AS id", "CAST(value AS STRING) AS name")
        )
        query = (
            stream.writeStream.format("delta")
            .option("checkpointLocation", str(base / "checkpoints" / "kafka_stream"))
            .queryName("kafka to delta")
            .trigger(availableNow=True)
            .start(str(delta / "from_kafka_stream"))
        )
        query.awaitTermination(120)

    return {
        "kafka_produce": lambda: (
            spark.read.parquet(str(base / "source"))
            .selectExpr("CAST(id AS STRING) AS key", "name AS value")
            .write.format("kafka")
            .option("kafka.bootstrap.servers", servers)
            .option("topic", "people_topic")
            .save()
        ),
        "kafka_to_delta": lambda: (
            topic_read()
            .selectExpr("CAST(key AS STRING) AS id", "CAST(value AS STRING) AS name")
            .write.format("delta")
            .save(str(delta / "from_kafka"))
        ),
        "kafka_stream_to_delta": stream_into_delta,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--base", type=Path, required=True)
    parser.add_argument("--kafka", help="a Kafka broker's bootstrap servers: also run the Kafka to Delta pipeline")
    parser.add_argument(
        "--client",
        help="an interpreter with PySpark's Connect client: at the end, with this application's lineage off, a "
        "client of its Connect server saves to a Delta path with lineage of its own (delta_connect_client)",
    )
    args = parser.parse_args()
    base = args.base.resolve()
    from tests.support import free_port

    connect_port = free_port() if args.client else None
    spark = session(base, args.kafka, connect_port)
    spark.createDataFrame(
        [(1, "ann", "paris"), (2, "bob", "oslo"), (3, "cy", "paris")], "id int, name string, city string"
    ).write.parquet(str(base / "source"))

    import spark_lineage

    handle = spark_lineage.enable(spark, transport={"type": "http", "url": args.url})
    stamps: dict[str, str] = {}
    steps = operations(spark, base, stamps)
    if args.kafka:
        steps.update(kafka_pipeline(spark, base, args.kafka))
    for name, operation in steps.items():
        operation()
        handle.flush(60)
        print(f"DONE {name}", flush=True)
    handle.disable(timeout=60)
    if args.client:
        rest = [args.url, str(base)]
        client = subprocess.run(
            [args.client, "-m", "tests.integration.delta_connect_client", f"sc://127.0.0.1:{connect_port}", *rest],
            cwd=Path(__file__).resolve().parents[2],
            # The client's own PySpark, not this application's (which PySpark put on PYTHONPATH and SPARK_HOME).
            env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME")},
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert client.returncode == 0, f"the Connect client failed:\n{client.stderr[-3000:]}"
        print("DONE connect client", flush=True)
    spark.stop()
    print("RESULT " + json.dumps({"stamps": stamps}), flush=True)


if __name__ == "__main__":
    main()
