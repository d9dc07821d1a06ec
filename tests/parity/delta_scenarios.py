"""The Delta Lake jobs the parity harness runs under both openlineage-spark and spark_lineage, in a Spark
application of their own: Delta needs its session extension and its catalog as ``spark_catalog``
(:func:`delta_confs`), which the main suite's application must not have. Each scenario writes to tables and
paths of its own; it reads the parquet views ``t1`` and ``t2`` of :func:`tests.parity.scenarios.prepare`."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tests.parity.scenarios import Workspace

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"

Scenario = Callable[[Any, Workspace], None]
DELTA_SCENARIOS: dict[str, Scenario] = {}


def delta_confs() -> dict[str, str]:
    """What a Spark application needs to use Delta tables; one snapshot partition keeps Delta's own log reads
    (50 tasks each by default) from dominating the run time."""
    return {
        "spark.sql.extensions": DELTA_EXTENSION,
        "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
        "spark.databricks.delta.snapshotPartitions": "1",
    }


def delta_scenario(function: Scenario) -> Scenario:
    DELTA_SCENARIOS[function.__name__] = function
    return function


def _rows(spark: Any) -> Any:
    return spark.table("t1").selectExpr("a", "upper(b) AS b", "c")


@delta_scenario
def delta_path_write(spark: Any, workspace: Workspace) -> None:
    path = workspace.out("delta_path")
    _rows(spark).write.format("delta").save(path)
    spark.table("t2").selectExpr("a", "d AS b", "a * 10 AS c").write.format("delta").mode("append").save(path)
    _rows(spark).where("c > 15").write.format("delta").mode("overwrite").save(path)


@delta_scenario
def delta_path_read_time_travel(spark: Any, workspace: Workspace) -> None:
    path = workspace.out("delta_versions")
    _rows(spark).write.format("delta").save(path)
    before_append = _timestamp_after_commit()
    _rows(spark).write.format("delta").mode("append").save(path)
    spark.read.format("delta").load(path).write.mode("overwrite").parquet(workspace.out("delta_read_latest"))
    spark.read.format("delta").option("versionAsOf", 0).load(path).selectExpr("a", "b").write.mode("overwrite").parquet(
        workspace.out("delta_read_version")
    )
    spark.read.format("delta").option("timestampAsOf", before_append).load(path).write.mode("overwrite").parquet(
        workspace.out("delta_read_timestamp")
    )


@delta_scenario
def delta_save_as_table(spark: Any, workspace: Workspace) -> None:
    _rows(spark).write.format("delta").saveAsTable("delta_saved")
    spark.table("t2").selectExpr("a", "d AS b", "a AS c").write.format("delta").mode("append").saveAsTable(
        "delta_saved"
    )


@delta_scenario
def delta_insert_into(spark: Any, workspace: Workspace) -> None:
    spark.sql("CREATE TABLE delta_inserted (a INT, d STRING) USING delta")
    spark.sql("INSERT INTO delta_inserted SELECT a, d FROM t2 WHERE a > 1")


@delta_scenario
def delta_ctas(spark: Any, workspace: Workspace) -> None:
    spark.sql("CREATE TABLE delta_ctas USING delta AS SELECT a, upper(b) AS ub FROM t1 WHERE c > 5")


@delta_scenario
def delta_merge_update_delete(spark: Any, workspace: Workspace) -> None:
    spark.sql("CREATE TABLE delta_merged (a INT, b STRING) USING delta")
    spark.sql("INSERT INTO delta_merged SELECT a, b FROM t1")
    spark.sql(
        "MERGE INTO delta_merged t USING t2 s ON t.a = s.a "
        "WHEN MATCHED THEN UPDATE SET t.b = s.d WHEN NOT MATCHED THEN INSERT (a, b) VALUES (s.a, s.d)"
    )
    spark.sql("UPDATE delta_merged SET b = upper(b) WHERE a = 1")
    spark.sql("DELETE FROM delta_merged WHERE a = 2")


@delta_scenario
def delta_path_merge(spark: Any, workspace: Workspace) -> None:
    path = workspace.out("delta_path_merged")
    spark.table("t1").selectExpr("a", "b").write.format("delta").save(path)
    spark.sql(
        f"MERGE INTO delta.`{path}` t USING (SELECT a, d AS b FROM t2) s ON t.a = s.a "
        "WHEN MATCHED THEN UPDATE SET t.b = s.b WHEN NOT MATCHED THEN INSERT *"
    )


@delta_scenario
def delta_table_time_travel(spark: Any, workspace: Workspace) -> None:
    spark.sql("CREATE TABLE delta_history USING delta AS SELECT a, b FROM t1")
    spark.sql("INSERT INTO delta_history SELECT a, d FROM t2")
    spark.sql("SELECT a, b FROM delta_history VERSION AS OF 0").write.mode("overwrite").parquet(
        workspace.out("delta_history_v0")
    )
    spark.sql("SELECT a, b FROM delta_history").write.mode("overwrite").parquet(workspace.out("delta_history_now"))


def _timestamp_after_commit() -> str:
    """A timestamp between two commits (Delta's commit times have millisecond resolution)."""
    time.sleep(1.1)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
    time.sleep(1.1)
    return stamp
