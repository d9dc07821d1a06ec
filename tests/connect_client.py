"""A pipeline an analyst would run, as a Spark Connect client in a process of its own, or on a classic session
in the tests' own process (the oracle the clients' lineage is held to). Shared by tests/integration/test_connect.py
and the parity harness's Connect suite (tests/parity/connect_scenarios.py).

Run as ``python -m tests.connect_client '<json>'`` (:func:`run_client` does); the JSON gives ``url`` (the
server), ``confs`` (set on the remote builder), ``settings`` (set with ``spark.conf.set`` once connected),
``tag``, ``lineage`` (when given: :func:`spark_lineage.enable`'s settings, for the client's own lineage),
``more_writes`` (run :func:`more_writes` after the pipeline, with ``kafka`` when given), ``failing_sql`` (a
statement run last, meant to fail), ``kill`` (the process kills itself with SIGKILL once lineage's worker has
analyzed every action, instead of stopping), and what :func:`pipeline` takes. It prints the client's session id
as its last line.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

ICEBERG_CATALOG = "hcat"
"""The Iceberg catalog the pipeline writes its Iceberg table to: a server that runs it with ``iceberg`` has one
of this name."""
CLIENT_TIMEOUT_SECONDS = 600


def pipeline(spark: Any, user: str, data: str, out: str, iceberg: bool, jdbc: dict[str, str] | None) -> None:
    """Files, a V1 table, CTAS, INSERT, a join, an Iceberg table (with ``iceberg``) and a JDBC table (with
    ``jdbc``: its ``url``), every name prefixed with ``user``."""
    people = spark.read.option("header", True).csv(f"{data}/people.csv")
    people.write.mode("overwrite").parquet(f"{out}/{user}/people")
    people.write.saveAsTable(f"{user}_people")
    spark.sql(f"CREATE TABLE {user}_paris USING parquet AS SELECT id, name FROM {user}_people WHERE city = 'paris'")
    spark.sql(f"INSERT INTO {user}_paris SELECT id, name FROM {user}_people WHERE city = 'oslo'")
    paris = spark.table(f"{user}_paris").withColumnRenamed("name", "resident")
    joined = spark.table(f"{user}_people").join(paris, "id").select("id", "city", "resident")
    joined.write.mode("overwrite").parquet(f"{out}/{user}/joined")
    if iceberg:
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ICEBERG_CATALOG}.db")
        spark.sql(f"CREATE TABLE {ICEBERG_CATALOG}.db.{user}_ice USING iceberg AS SELECT id, name FROM {user}_people")
    if jdbc is not None:
        properties = {"driver": "org.postgresql.Driver"}
        spark.table(f"{user}_paris").write.jdbc(jdbc["url"], f"public.{user}_paris", "overwrite", properties)


def more_writes(
    spark: Any, user: str, out: str, iceberg: bool, jdbc: dict[str, str] | None, kafka: str | None = None
) -> None:
    """After :func:`pipeline`: the other ways a client writes, each named by its request alone (an
    ``insertInto``, a ``spark.sql`` DataFrame written, an Iceberg ``writeTo().append()`` and ``saveAsTable``, a JDBC
    read written, and with ``kafka`` (a broker's ``bootstrap.servers``) a write to a Kafka topic and that topic
    read back and written)."""
    spark.table(f"{user}_people").select("id", "name").write.insertInto(f"{user}_paris")
    spark.sql(f"SELECT id, name FROM {user}_people WHERE city = 'oslo'").write.mode("overwrite").parquet(
        f"{out}/{user}/oslo"
    )
    if iceberg:
        spark.table(f"{user}_people").select("id", "name").writeTo(f"{ICEBERG_CATALOG}.db.{user}_ice").append()
        spark.table(f"{user}_people").select("id", "city").write.saveAsTable(f"{ICEBERG_CATALOG}.db.{user}_saved")
    if jdbc is not None:
        properties = {"driver": "org.postgresql.Driver"}
        spark.read.jdbc(jdbc["url"], f"public.{user}_paris", properties=properties).write.mode("overwrite").parquet(
            f"{out}/{user}/from_postgres"
        )
    if kafka is not None:
        topic = f"{user}_people_topic"
        people = spark.table(f"{user}_people").selectExpr("CAST(id AS STRING) AS key", "name AS value")
        people.write.format("kafka").option("kafka.bootstrap.servers", kafka).option("topic", topic).save()
        read = spark.read.format("kafka").option("kafka.bootstrap.servers", kafka).option("subscribe", topic)
        read.option("startingOffsets", "earliest").load().selectExpr("CAST(value AS STRING) AS name").write.mode(
            "overwrite"
        ).parquet(f"{out}/{user}/from_kafka")
    column_writes(spark, user, out)


def column_writes(spark: Any, user: str, out: str) -> None:
    """Writes whose column lineage a client derives from the plan it sends: grouping and aggregates, new columns,
    conditions, a sort, joins by alias and by DataFrame, hashes and casts, SQL expressions, a union; and a window
    function, which it does not follow."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F  # noqa: N812 - as PySpark writes it

    people = spark.table(f"{user}_people")
    paris = spark.table(f"{user}_paris")

    def write(frame: Any, name: str) -> None:
        frame.write.mode("overwrite").parquet(f"{out}/{user}/{name}")

    write(people.groupBy("city").agg(F.count("id").alias("n"), F.max("name").alias("last")), "grouped")
    write(
        people.filter(F.col("city") == "paris")
        .withColumn("up", F.upper("name"))
        .withColumn("k", F.when(F.col("id") > 1, F.col("name")).otherwise(F.lit("x")))
        .orderBy("id"),
        "derived",
    )
    write(
        people.alias("a")
        .join(people.alias("b"), F.col("a.id") == F.col("b.id"), "left")
        .select(F.col("a.id"), F.col("b.city").alias("c2"), F.concat("a.name", "b.name").alias("nn")),
        "self_joined",
    )
    write(people.join(paris, people["id"] == paris["id"]).select(people["city"], paris["name"].alias("pn")), "by_frame")
    write(people.select(F.sha2("name", 256).alias("h"), F.col("id").cast("int").alias("i")).distinct(), "hashed")
    write(people.filter("city = 'oslo'").selectExpr("id", "upper(name) AS u"), "expressed")
    write(people.union(people), "unioned")
    write(people.select("id", F.row_number().over(Window.orderBy("name")).alias("rank")), "ranked")


def write_people(data: str) -> None:
    """The CSV file the pipeline reads, in directory ``data``."""
    (Path(data) / "people.csv").write_text("id,name,city\n1,ann,paris\n2,bob,oslo\n3,cy,paris\n")


def run_client(args: dict[str, Any], python: str = sys.executable) -> str:
    """Run the pipeline as a client in a process of its own, with ``python`` (one with PySpark's Connect client:
    :func:`tests.support.client_python`), as ``args`` says (see the module's docstring); returns its Connect
    session id. With ``kill`` in ``args``, the process must end killed by SIGKILL."""
    done = subprocess.run(
        [python, "-m", "tests.connect_client", json.dumps(args)],
        cwd=Path(__file__).resolve().parent.parent,
        # The client's own PySpark, not the server's (which PySpark put on PYTHONPATH and SPARK_HOME).
        env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME")},
        capture_output=True,
        text=True,
        timeout=CLIENT_TIMEOUT_SECONDS,
        check=False,
    )
    assert done.returncode == (-signal.SIGKILL if args.get("kill") else 0), done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def main(argv: list[str]) -> None:
    from pyspark.sql import SparkSession

    args = json.loads(argv[1])
    builder = SparkSession.builder.remote(args["url"])
    for key, value in args.get("confs", {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if args.get("tag"):
        spark.addTag(args["tag"])
    for key, value in args.get("settings", {}).items():
        spark.conf.set(key, value)
    handle = None
    if "lineage" in args:  # the client's own lineage (a server that runs none)
        import spark_lineage

        handle = spark_lineage.enable(spark, **args["lineage"])
    pipeline(spark, args["user"], args["data"], args["out"], args["iceberg"], args.get("jdbc"))
    if args.get("more_writes"):
        more_writes(spark, args["user"], args["out"], args["iceberg"], args.get("jdbc"), args.get("kafka"))
    if args.get("failing_sql"):
        try:
            spark.sql(args["failing_sql"])
        except Exception as error:  # noqa: BLE001 - it is meant to fail
            print(f"FAILED AS MEANT: {type(error).__name__}")
    session_id = spark.client._session_id
    if args.get("kill"):
        print(session_id, flush=True)
        if handle is not None:
            handle._runtime.worker.flush(60)  # every action's events are made, and kept or spooled
        os.kill(os.getpid(), signal.SIGKILL)
    spark.stop()
    print(session_id)


if __name__ == "__main__":
    main(sys.argv)
