"""The Hive jobs the parity harness runs under both openlineage-spark and spark_lineage, in a Spark application
of their own with Hive support (the PyPI pyspark ships Hive's jars; the metastore is an embedded Derby
database in the workspace): ``LOAD DATA``, ``INSERT OVERWRITE DIRECTORY … STORED AS`` and Hive-format tables,
which the main suite's in-memory catalog cannot hold. They read the parquet views ``t1`` and ``t2`` of
:func:`tests.parity.scenarios.prepare`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.parity.scenarios import Workspace

Scenario = Callable[[Any, Workspace], None]
HIVE_SCENARIOS: dict[str, Scenario] = {}


def hive_confs(workspace: Workspace, metastore: str | None = None) -> dict[str, str]:
    """Hive support with its metastore in the workspace, so that each run starts from an empty one: embedded,
    or the server at ``metastore`` (``thrift://host:port``), which names the tables ``hive://host:port``."""
    where = (
        {"spark.hadoop.hive.metastore.uris": metastore}
        if metastore
        else {
            "spark.hadoop.javax.jdo.option.ConnectionURL": (
                f"jdbc:derby:;databaseName={workspace.base / 'metastore_db'};create=true"
            )
        }
    )
    return {
        "spark.sql.catalogImplementation": "hive",
        **where,
        "spark.hadoop.hive.metastore.warehouse.dir": str(workspace.base / "warehouse"),
        # As OpenLineage's own Hive tests run: every transformation described by its SQL, and the plan nodes no
        # visitor (handler) knows listed.
        "spark.openlineage.columnLineage.descriptionsEnabled": "true",
        "spark.openlineage.facets.spark_unknown.disabled": "false",
        # Derby writes its log where it is told, not into the directory the tests run from.
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={workspace.base}",
    }


def hive_scenario(function: Scenario) -> Scenario:
    HIVE_SCENARIOS[function.__name__] = function
    return function


@hive_scenario
def hive_load_data(spark: Any, workspace: Workspace) -> None:
    incoming = workspace.base / "incoming"
    incoming.mkdir(exist_ok=True)
    (incoming / "rows.csv").write_text("1,ann\n2,bob\n")
    (incoming / "more.csv").write_text("3,cy\n")
    spark.sql("CREATE TABLE loaded (a INT, b STRING) ROW FORMAT DELIMITED FIELDS TERMINATED BY ','")
    spark.sql(f"LOAD DATA INPATH '{incoming / 'rows.csv'}' INTO TABLE loaded")
    spark.sql(f"LOAD DATA LOCAL INPATH '{incoming / 'more.csv'}' OVERWRITE INTO TABLE loaded")


@hive_scenario
def hive_insert_overwrite_directory(spark: Any, workspace: Workspace) -> None:
    # Parquet and ORC directories are written by Spark's own writer (InsertIntoDataSourceDirCommand, as in the
    # main suite); a text directory stays with Hive's SerDe: InsertIntoHiveDirCommand.
    spark.sql(
        f"INSERT OVERWRITE DIRECTORY '{workspace.out('hive_dir_export')}' "
        "ROW FORMAT DELIMITED FIELDS TERMINATED BY ',' STORED AS TEXTFILE SELECT a, upper(b) AS ub FROM t1"
    )


@hive_scenario
def hive_table_insert(spark: Any, workspace: Workspace) -> None:
    spark.sql("CREATE TABLE hive_target (a INT, d STRING) STORED AS PARQUET")
    spark.sql("INSERT INTO hive_target SELECT a, d FROM t2")
    # OpenLineage's own Hive test (spark_hive.py): rows from a VALUES list, a leaf no visitor knows.
    spark.sql("INSERT INTO hive_target VALUES (1, 'a'), (2, 'b')")
    spark.sql("CREATE TABLE ds_target USING parquet AS SELECT a, b FROM t1")


@hive_scenario
def hive_ctas_column_lineage(spark: Any, workspace: Workspace) -> None:
    """OpenLineage's own test of column lineage with descriptions (``spark_cll.py``): a Hive-format CTAS over a
    join of a filtered subquery, grouped, with a function and an aggregate."""
    spark.sql("CREATE TABLE cll_source1 (a int, b string)")
    spark.sql("CREATE TABLE cll_source2 (a int, c int)")
    spark.sql(
        f"CREATE TABLE cll_target USING hive LOCATION '{workspace.out('cll_target')}' "
        "AS SELECT t1.a AS ident, CONCAT(b, 'test') AS trans, SUM(c) AS agg "
        "FROM (SELECT a, c FROM cll_source2 WHERE a > 1) t2 JOIN cll_source1 t1 ON t1.a = t2.a GROUP BY t1.a, b"
    )


@hive_scenario
def hive_table_commands_and_read(spark: Any, workspace: Workspace) -> None:
    """What else happens to tables of a Hive session: a read, TRUNCATE, ALTER, RENAME, DROP; a Hive-format
    table's INSERT OVERWRITE and read."""
    spark.sql("CREATE TABLE kept USING parquet AS SELECT a, b FROM t1")
    spark.table("kept").where("a > 1").write.mode("overwrite").parquet(workspace.out("from_kept"))
    spark.sql("TRUNCATE TABLE kept")
    spark.sql("ALTER TABLE kept ADD COLUMNS (extra STRING)")
    spark.sql("ALTER TABLE kept RENAME TO kept_renamed")
    spark.sql("DROP TABLE kept_renamed")
    spark.sql("CREATE TABLE hive_text (a INT, b STRING) ROW FORMAT DELIMITED FIELDS TERMINATED BY ','")
    spark.sql("INSERT OVERWRITE TABLE hive_text SELECT a, b FROM t1")
    spark.table("hive_text").write.mode("overwrite").parquet(workspace.out("from_hive_text"))
