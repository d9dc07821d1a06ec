"""The jobs the parity harness runs under both openlineage-spark and spark_lineage: every plan shape column
lineage must handle, and every JDBC case. Each scenario is a function of the session and a
:class:`Workspace`; it writes to its own output so that its datasets are its own."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Workspace:
    """Where a run keeps its data: the same paths in both runs, so that dataset names compare."""

    base: Path
    postgres_url: str | None = None
    """``jdbc:postgresql://127.0.0.1:<port>/<db>?user=<u>&password=<p>`` when a server runs, else ``None``."""
    kafka_servers: str | None = None
    """``127.0.0.1:<port>`` when a Kafka broker runs, else ``None``."""
    iceberg: bool = True
    """Whether Iceberg has a Spark runtime for this PySpark line (the ``ice`` catalog exists)."""

    def has(self, service: str) -> bool:
        return bool({"postgres": self.postgres_url, "kafka": self.kafka_servers, "iceberg": self.iceberg}[service])

    def out(self, name: str) -> str:
        return str(self.base / "out" / name)

    @property
    def sqlite_url(self) -> str:
        return f"jdbc:sqlite:{self.base / 'shop.db'}"


Scenario = Callable[[Any, Workspace], None]
SCENARIOS: dict[str, Scenario] = {}
SERVICE_NEEDED: dict[str, str] = {}
"""Scenarios that need a server (``postgres``, ``kafka``) or Iceberg's Spark runtime (``iceberg``), by name."""


def scenario(function: Scenario) -> Scenario:
    SCENARIOS[function.__name__] = function
    return function


def needs_postgres(function: Scenario) -> Scenario:
    SERVICE_NEEDED[function.__name__] = "postgres"
    return scenario(function)


def needs_kafka(function: Scenario) -> Scenario:
    SERVICE_NEEDED[function.__name__] = "kafka"
    return scenario(function)


def needs_iceberg(function: Scenario) -> Scenario:
    SERVICE_NEEDED[function.__name__] = "iceberg"
    return scenario(function)


def prepare(spark: Any, workspace: Workspace) -> None:
    """The inputs every scenario reads: parquet tables ``t1``, ``t2``, ``s`` (as temporary views), a sqlite
    database and, when a server runs, PostgreSQL tables. Created before lineage is on."""
    spark.createDataFrame([(1, "ann", 10), (2, "bob", 20), (3, "cy", 30)], "a int, b string, c int").write.mode(
        "overwrite"
    ).parquet(str(workspace.base / "t1"))
    spark.createDataFrame([(1, "x"), (2, "y"), (4, "z")], "a int, d string").write.mode("overwrite").parquet(
        str(workspace.base / "t2")
    )
    spark.createDataFrame(
        [(1, ["p", "q"], (1, "m")), (2, ["r"], (2, "n"))], "id int, tags array<string>, st struct<x:int,y:string>"
    ).write.mode("overwrite").parquet(str(workspace.base / "s"))
    for name in ("t1", "t2", "s"):
        spark.read.parquet(str(workspace.base / name)).createOrReplaceTempView(name)
    write_shop_database(workspace.base / "shop.db")


def write_shop_database(path: Path) -> None:
    """A sqlite database with tables ``orders``, ``customers`` and an empty ``big_orders``."""
    with sqlite3.connect(path) as db:
        db.executescript(
            "CREATE TABLE orders (id INTEGER, cid INTEGER, amount REAL);"
            "CREATE TABLE customers (id INTEGER, name TEXT);"
            "INSERT INTO orders VALUES (1, 1, 10.5), (2, 2, 99.0), (3, 1, 5.0);"
            "INSERT INTO customers VALUES (1, 'ann'), (2, 'bob');"
            # Spark 4.1 cannot append to a sqlite table that does not exist yet (its existence check fails).
            "CREATE TABLE big_orders (id INTEGER, name TEXT);"
        )


def _sql_to(spark: Any, workspace: Workspace, name: str, sql: str) -> None:
    spark.sql(sql).write.mode("overwrite").parquet(workspace.out(name))


# --- projections and expressions -------------------------------------------------------------------------


@scenario
def projection(spark: Any, workspace: Workspace) -> None:
    _sql_to(spark, workspace, "projection", "SELECT a AS x, b, c + 1 AS c1, concat(b, CAST(c AS STRING)) AS bc FROM t1")


@scenario
def masking(spark: Any, workspace: Workspace) -> None:
    _sql_to(spark, workspace, "masking", "SELECT sha2(b, 256) AS h, md5(b) AS m, hash(a) AS ha, upper(b) AS u FROM t1")


@scenario
def literals_only(spark: Any, workspace: Workspace) -> None:
    _sql_to(spark, workspace, "literals_only", "SELECT a, 1 AS one, 'k' AS k FROM t1")


# --- joins -----------------------------------------------------------------------------------------------


@scenario
def join_inner_where(spark: Any, workspace: Workspace) -> None:
    _sql_to(spark, workspace, "join_inner_where", "SELECT t1.a, t2.d FROM t1 JOIN t2 ON t1.a = t2.a WHERE t1.c > 1")


@scenario
def join_left(spark: Any, workspace: Workspace) -> None:
    _sql_to(spark, workspace, "join_left", "SELECT t1.a, t2.d FROM t1 LEFT JOIN t2 ON t1.a = t2.a")


@scenario
def join_full(spark: Any, workspace: Workspace) -> None:
    _sql_to(spark, workspace, "join_full", "SELECT t1.b, t2.d FROM t1 FULL OUTER JOIN t2 ON t1.a = t2.a")


@scenario
def join_semi_in_subquery(spark: Any, workspace: Workspace) -> None:
    _sql_to(spark, workspace, "join_semi_in_subquery", "SELECT a, b FROM t1 WHERE a IN (SELECT a FROM t2)")


@scenario
def join_anti_not_exists(spark: Any, workspace: Workspace) -> None:
    _sql_to(
        spark,
        workspace,
        "join_anti_not_exists",
        "SELECT a, b FROM t1 WHERE NOT EXISTS (SELECT 1 FROM t2 WHERE t2.a = t1.a)",
    )


@scenario
def join_cross(spark: Any, workspace: Workspace) -> None:
    _sql_to(spark, workspace, "join_cross", "SELECT t1.b, t2.d FROM t1 CROSS JOIN t2")


# --- aggregates and windows --------------------------------------------------------------------------------


@scenario
def aggregate_having(spark: Any, workspace: Workspace) -> None:
    _sql_to(
        spark,
        workspace,
        "aggregate_having",
        "SELECT b, sum(c) AS total, count(a) AS n FROM t1 GROUP BY b HAVING sum(c) > 1",
    )


@scenario
def aggregate_distinct_counts(spark: Any, workspace: Workspace) -> None:
    _sql_to(
        spark,
        workspace,
        "aggregate_distinct_counts",
        "SELECT b, count(DISTINCT a) AS da, count(DISTINCT c) AS dc FROM t1 GROUP BY b",
    )


@scenario
def aggregate_rollup(spark: Any, workspace: Workspace) -> None:
    _sql_to(spark, workspace, "aggregate_rollup", "SELECT b, a, sum(c) AS sc FROM t1 GROUP BY ROLLUP(b, a)")


@scenario
def window_functions(spark: Any, workspace: Workspace) -> None:
    _sql_to(
        spark,
        workspace,
        "window_functions",
        "SELECT a, sum(c) OVER (PARTITION BY b ORDER BY a) AS running, "
        "row_number() OVER (PARTITION BY b ORDER BY c) AS rn FROM t1",
    )


# --- set operations, conditionals, generators -----------------------------------------------------------


@scenario
def union_all(spark: Any, workspace: Workspace) -> None:
    _sql_to(spark, workspace, "union_all", "SELECT a, b FROM t1 UNION ALL SELECT a, d FROM t2")


@scenario
def union_distinct(spark: Any, workspace: Workspace) -> None:
    _sql_to(spark, workspace, "union_distinct", "SELECT a, b FROM t1 UNION SELECT a, d FROM t2")


@scenario
def case_when_if_coalesce(spark: Any, workspace: Workspace) -> None:
    _sql_to(
        spark,
        workspace,
        "case_when_if_coalesce",
        "SELECT CASE WHEN t1.c > 15 THEN t1.b ELSE 'none' END AS cw, IF(t1.a > 1, t1.c, 0) AS i, "
        "coalesce(t2.d, t1.b) AS co FROM t1 LEFT JOIN t2 ON t1.a = t2.a",
    )


@scenario
def explode_lateral_view(spark: Any, workspace: Workspace) -> None:
    _sql_to(spark, workspace, "explode_lateral_view", "SELECT id, tag FROM s LATERAL VIEW explode(tags) t AS tag")


@scenario
def posexplode(spark: Any, workspace: Workspace) -> None:
    _sql_to(spark, workspace, "posexplode", "SELECT id, posexplode(tags) AS (pos, tag) FROM s")


# --- subqueries, CTEs, caches, views, nested fields ------------------------------------------------------


@scenario
def scalar_subquery(spark: Any, workspace: Workspace) -> None:
    _sql_to(spark, workspace, "scalar_subquery", "SELECT a, (SELECT max(c) FROM t1) AS m FROM t2")


@scenario
def cte_twice(spark: Any, workspace: Workspace) -> None:
    _sql_to(
        spark,
        workspace,
        "cte_twice",
        "WITH x AS (SELECT a, upper(b) AS ub FROM t1 WHERE c > 5) "
        "SELECT x1.a, x2.ub FROM x x1 JOIN x x2 ON x1.a = x2.a",
    )


@scenario
def cached_dataframe(spark: Any, workspace: Workspace) -> None:
    cached = spark.table("t1").where("c > 5").selectExpr("a AS a2", "upper(b) AS ub").cache()
    cached.count()
    cached.write.mode("overwrite").parquet(workspace.out("cached_dataframe"))
    cached.unpersist()


@scenario
def temp_view(spark: Any, workspace: Workspace) -> None:
    spark.sql("CREATE OR REPLACE TEMPORARY VIEW v AS SELECT a, upper(b) AS ub FROM t1 WHERE c > 5")
    _sql_to(spark, workspace, "temp_view", "SELECT a, ub FROM v")


@scenario
def nested_struct_fields(spark: Any, workspace: Workspace) -> None:
    _sql_to(spark, workspace, "nested_struct_fields", "SELECT id, st.x AS sx, st FROM s WHERE st.y = 'm'")


@scenario
def sort_limit(spark: Any, workspace: Workspace) -> None:
    _sql_to(spark, workspace, "sort_limit", "SELECT a, b FROM t1 ORDER BY c DESC LIMIT 2")


# --- tables: V1 (session catalog) and Iceberg ------------------------------------------------------------


@scenario
def v1_ctas(spark: Any, workspace: Workspace) -> None:
    spark.sql("CREATE TABLE v1_ctas USING parquet AS SELECT a, upper(b) AS ub FROM t1 WHERE c > 5")


@scenario
def v1_insert_into(spark: Any, workspace: Workspace) -> None:
    spark.sql("CREATE TABLE v1_target (a INT, d STRING) USING parquet")
    spark.sql("INSERT INTO v1_target SELECT a, d FROM t2")


@scenario
def v1_save_as_table(spark: Any, workspace: Workspace) -> None:
    """``saveAsTable`` creating, appending to and overwriting a table, then ``insertInto`` it: Spark 4.1 plans
    a save as a command of its own around the CTAS or the insert it runs."""
    rows = spark.table("t1").selectExpr("a", "upper(b) AS ub")
    rows.write.saveAsTable("v1_saved")
    rows.where("a > 1").write.mode("append").saveAsTable("v1_saved")
    rows.write.mode("overwrite").saveAsTable("v1_saved")
    spark.table("t2").selectExpr("a", "d AS ub").write.insertInto("v1_saved")


@scenario
def v1_save_as_table_aggregate(spark: Any, workspace: Workspace) -> None:
    """A ``saveAsTable`` of a join and an aggregation: adaptive execution wraps the write it plans."""
    joined = spark.table("t1").join(spark.table("t2"), "a").groupBy("b").agg({"c": "sum"})
    joined.write.saveAsTable("v1_aggregated")


@scenario
def read_only_actions(spark: Any, workspace: Workspace) -> None:
    """Actions that write nothing: the reference reports some and filters others."""
    frame = spark.table("t1").where("c > 5")
    frame.count()
    frame.collect()
    frame.show()
    frame.toLocalIterator().__next__()
    spark.sql("SELECT max(c) FROM t1").collect()


@needs_iceberg
def iceberg_ctas_and_insert(spark: Any, workspace: Workspace) -> None:
    spark.sql("CREATE TABLE ice.db.target USING iceberg AS SELECT a, b, c FROM t1 WHERE c > 5")
    spark.sql("INSERT INTO ice.db.target SELECT a, d, a * 10 FROM t2")


@needs_iceberg
def iceberg_merge_update_delete(spark: Any, workspace: Workspace) -> None:
    spark.sql("CREATE TABLE ice.db.merged (a INT, b STRING) USING iceberg")
    spark.sql("INSERT INTO ice.db.merged SELECT a, b FROM t1")
    spark.sql(
        "MERGE INTO ice.db.merged t USING t2 s ON t.a = s.a "
        "WHEN MATCHED THEN UPDATE SET t.b = s.d WHEN NOT MATCHED THEN INSERT (a, b) VALUES (s.a, s.d)"
    )
    spark.sql("UPDATE ice.db.merged SET b = upper(b) WHERE a = 1")
    spark.sql("DELETE FROM ice.db.merged WHERE a = 2")


@needs_iceberg
def iceberg_replace_table_as_select(spark: Any, workspace: Workspace) -> None:
    spark.table("t2").writeTo("ice.db.replaced").using("iceberg").createOrReplace()
    spark.table("t1").selectExpr("a", "b AS d").writeTo("ice.db.replaced").using("iceberg").createOrReplace()


# --- commands: directories, failures ----------------------------------------------------------------------


@scenario
def insert_overwrite_directory(spark: Any, workspace: Workspace) -> None:
    spark.sql(
        f"INSERT OVERWRITE DIRECTORY '{workspace.out('dir_export')}' USING parquet SELECT a, upper(b) AS ub FROM t1"
    )


def _raise_on_two(value: int) -> int:
    if value == 2:
        raise ValueError("no twos")
    return value


@scenario
def failed_insert_udf(spark: Any, workspace: Workspace) -> None:
    """The same write succeeds, then fails in a Python UDF at run time: both runs are one job."""
    from pyspark.sql.functions import udf

    checked = udf(_raise_on_two, "int")
    path = workspace.out("failed_udf")
    spark.table("t1").where("a <> 2").select(checked("a").alias("a"), "b").write.mode("overwrite").parquet(path)
    with contextlib.suppress(Exception):  # the failure is the scenario
        spark.table("t1").select(checked("a").alias("a"), "b").write.mode("overwrite").parquet(path)


def _insert_then_fail_with_ansi(spark: Any, workspace: Workspace, table: str, failing_value: str) -> None:
    """``INSERT INTO`` a path table, once successfully, then with ``failing_value`` as its second column and ANSI
    on, which fails: both runs must be one job."""
    spark.sql(f"CREATE TABLE {table} (a INT, n INT) USING parquet LOCATION '{workspace.out(table)}'")
    spark.sql(f"INSERT INTO {table} SELECT a, c FROM t1")
    previous = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        with contextlib.suppress(Exception):  # the failure is the scenario
            spark.sql(f"INSERT INTO {table} SELECT a, {failing_value} FROM t1")
    finally:
        spark.conf.set("spark.sql.ansi.enabled", previous)


@scenario
def failed_insert_ansi_cast(spark: Any, workspace: Workspace) -> None:
    """Fails at run time, casting a column of names to numbers."""
    _insert_then_fail_with_ansi(spark, workspace, "failed_cast", "CAST(b AS INT)")


@scenario
def failed_insert_while_planning(spark: Any, workspace: Workspace) -> None:
    """Fails before it runs: the optimizer folds the cast of a constant that is no number, and the error comes
    out of planning."""
    _insert_then_fail_with_ansi(spark, workspace, "failed_plan", "CAST('x' AS INT)")


# --- JDBC --------------------------------------------------------------------------------------------------


def _text_lines(workspace: Workspace) -> str:
    """A directory of two small text files (written here, not by Spark: it is input, not lineage)."""
    lines = workspace.base / "lines"
    lines.mkdir(exist_ok=True)
    (lines / "part-1.txt").write_text("ann paris\nbob oslo\n")
    (lines / "part-2.txt").write_text("cy paris\n")
    return str(lines)


def _slow_upper(line: str) -> str:
    # A job shorter than the listener's reaction loses its RDDs to both agents alike (Spark forgets a finished
    # job's ActiveJob): each task takes a moment, as the reference's own RDD tests make theirs.
    import time

    time.sleep(0.3)
    return line.upper()


@scenario
def rdd_to_dataframe(spark: Any, workspace: Workspace) -> None:
    rdd = spark.sparkContext.textFile(_text_lines(workspace)).map(lambda line: tuple(line.split(" ")))
    # A schema given: inferring one would run a job of its own (first()).
    spark.createDataFrame(rdd, "name string, city string").write.mode("overwrite").parquet(workspace.out("rdd_df"))


@scenario
def rdd_save_as_text_file(spark: Any, workspace: Workspace) -> None:
    spark.sparkContext.textFile(_text_lines(workspace)).map(_slow_upper).saveAsTextFile(workspace.out("rdd_text"))


def _jdbc(spark: Any, url: str) -> Any:
    return spark.read.format("jdbc").option("url", url).option("driver", _driver(url))


def _driver(url: str) -> str:
    return "org.postgresql.Driver" if url.startswith("jdbc:postgresql:") else "org.sqlite.JDBC"


@scenario
def jdbc_read_table(spark: Any, workspace: Workspace) -> None:
    _jdbc(spark, workspace.sqlite_url).option("dbtable", "orders").load().write.mode("overwrite").parquet(
        workspace.out("jdbc_read_table")
    )


@scenario
def jdbc_read_query(spark: Any, workspace: Workspace) -> None:
    query = "SELECT o.id, c.name, o.amount FROM orders o JOIN customers c ON o.cid = c.id WHERE o.amount > 6"
    _jdbc(spark, workspace.sqlite_url).option("query", query).load().write.mode("overwrite").parquet(
        workspace.out("jdbc_read_query")
    )


@scenario
def jdbc_write_append_and_overwrite(spark: Any, workspace: Workspace) -> None:
    frame = spark.table("t1").where("c > 5").selectExpr("a AS id", "upper(b) AS name")
    frame.write.jdbc(workspace.sqlite_url, "big_orders", mode="append", properties={"driver": "org.sqlite.JDBC"})
    frame.write.format("jdbc").option("url", workspace.sqlite_url).option("driver", "org.sqlite.JDBC").option(
        "dbtable", "big_orders"
    ).mode("overwrite").save()


@needs_postgres
def postgres_read_table_and_query(spark: Any, workspace: Workspace) -> None:
    assert workspace.postgres_url is not None
    _jdbc(spark, workspace.postgres_url).option("dbtable", "public.orders").load().write.mode("overwrite").parquet(
        workspace.out("postgres_read_table")
    )
    query = "SELECT o.id, c.name FROM public.orders o JOIN public.customers c ON o.cid = c.id"
    _jdbc(spark, workspace.postgres_url).option("query", query).load().write.mode("overwrite").parquet(
        workspace.out("postgres_read_query")
    )


@needs_postgres
def postgres_write(spark: Any, workspace: Workspace) -> None:
    assert workspace.postgres_url is not None
    spark.table("t1").selectExpr("a AS id", "b AS name").write.format("jdbc").option(
        "url", workspace.postgres_url
    ).option("driver", "org.postgresql.Driver").option("dbtable", "public.people").mode("overwrite").save()


def _kafka_topic(spark: Any, workspace: Workspace, topic: str) -> Any:
    """Write ``t1`` to ``topic``, then return a reader of the broker (to be told what to read)."""
    assert workspace.kafka_servers is not None
    spark.table("t1").selectExpr("CAST(a AS STRING) AS key", "b AS value").write.format("kafka").option(
        "kafka.bootstrap.servers", workspace.kafka_servers
    ).option("topic", topic).save()
    return spark.read.format("kafka").option("kafka.bootstrap.servers", workspace.kafka_servers)


@needs_kafka
def kafka_write_and_read(spark: Any, workspace: Workspace) -> None:
    topic = _kafka_topic(spark, workspace, "parity_orders").option("subscribe", "parity_orders").load()
    topic.selectExpr("CAST(key AS STRING) AS id", "CAST(value AS STRING) AS name").write.mode("overwrite").parquet(
        workspace.out("kafka_subscribed")
    )


@needs_kafka
def kafka_read_assign(spark: Any, workspace: Workspace) -> None:
    topic = _kafka_topic(spark, workspace, "parity_assigned").option("assign", '{"parity_assigned":[0]}').load()
    topic.selectExpr("CAST(value AS STRING) AS name").write.mode("overwrite").parquet(workspace.out("kafka_assigned"))


def _until_caught_up(writer: Any, workspace: Workspace, name: str) -> None:
    """Run a streaming query over what its source holds now, then let it end."""
    writer.option("checkpointLocation", str(workspace.base / "checkpoints" / name)).trigger(
        availableNow=True
    ).start().awaitTermination(300)


@scenario
def stream_files_to_parquet(spark: Any, workspace: Workspace) -> None:
    source = workspace.base / "stream_incoming"
    source.mkdir(parents=True, exist_ok=True)
    (source / "part-1.json").write_text('{"a": 1, "b": "ann"}\n{"a": 2, "b": "bob"}\n')
    stream = spark.readStream.schema("a int, b string").json(str(source)).selectExpr("a", "upper(b) AS b")
    _until_caught_up(stream.writeStream.format("parquet").option("path", workspace.out("streamed")), workspace, "files")


def _kafka_stream(spark: Any, workspace: Workspace, topic: str) -> Any:
    """A stream of ``topic`` from its start, once ``t1`` was written to it."""
    _kafka_topic(spark, workspace, topic)
    assert workspace.kafka_servers is not None
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", workspace.kafka_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )


@needs_kafka
def stream_kafka_to_kafka(spark: Any, workspace: Workspace) -> None:
    stream = _kafka_stream(spark, workspace, "parity_stream_in").selectExpr("key", "value")
    sink = (
        stream.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", workspace.kafka_servers)
        .option("topic", "parity_stream_out")
    )
    _until_caught_up(sink, workspace, "kafka")


def _foreach_batch_to_parquet(stream: Any, workspace: Workspace, name: str) -> None:
    """Each batch of ``stream`` appended to parquet at ``out/<name>`` by a foreachBatch function."""
    out = workspace.out(name)

    def write(batch: Any, batch_id: int) -> None:
        batch.write.mode("append").parquet(out)

    _until_caught_up(stream.writeStream.foreachBatch(write), workspace, name)


@needs_kafka
def stream_kafka_foreach_batch(spark: Any, workspace: Workspace) -> None:
    stream = _kafka_stream(spark, workspace, "parity_batched_in").selectExpr("CAST(value AS STRING) AS value")
    _foreach_batch_to_parquet(stream, workspace, "kafka_batched")


@scenario
def stream_files_foreach_batch(spark: Any, workspace: Workspace) -> None:
    source = workspace.base / "batched_incoming"
    source.mkdir(parents=True, exist_ok=True)
    (source / "part-1.json").write_text('{"a": 1, "b": "ann"}\n')
    _foreach_batch_to_parquet(spark.readStream.schema("a int, b string").json(str(source)), workspace, "files_batched")
