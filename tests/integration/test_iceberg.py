"""Iceberg tables in Spark: identity, lifecycle, versions, and commit and scan reports from Iceberg itself.

Runs on the session's two Iceberg catalogs: ``hcat`` (Hadoop) and ``jcat`` (JDBC on sqlite). Every commit
facet is checked against the table's own snapshot summary.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import spark_lineage
from tests.support import LineageReceiver, datasets, only_run, query_events, runs_by_job

pytestmark = [pytest.mark.spark, pytest.mark.iceberg]


def rtas_data_write(spark_version: str) -> tuple[str, str | None]:
    """The plan node of the data write Spark runs inside an RTAS (``replace()``), and its lifecycle: Spark
    3.5.0 appends into the replaced table, later releases (3.5.9 and 4.x here) overwrite it."""
    return ("append_data", None) if spark_version == "3.5.0" else ("overwrite_by_expression", "OVERWRITE")


_names = itertools.count()


@pytest.fixture(params=["hcat", "jcat"])
def catalog(request: pytest.FixtureRequest, spark: Any) -> str:
    name = str(request.param)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {name}.db")
    return name


@pytest.fixture()
def table(spark: Any, catalog: str) -> Iterator[str]:
    """A fresh table name in the catalog under test, dropped afterwards."""
    name = f"{catalog}.db.t{next(_names)}"
    yield name
    spark.sql(f"DROP TABLE IF EXISTS {name}")


def _add_catalog(spark: Any, name: str, **properties: str) -> None:
    """Configure one more Iceberg SparkCatalog at runtime (Spark starts catalogs on first use)."""
    spark.conf.set(f"spark.sql.catalog.{name}", "org.apache.iceberg.spark.SparkCatalog")
    for key, value in properties.items():
        spark.conf.set(f"spark.sql.catalog.{name}.{key.replace('_', '-')}", value)


def _location(iceberg_dir: Path, catalog: str, table: str) -> str:
    warehouse = "hadoop_warehouse" if catalog == "hcat" else "jdbc_warehouse"
    return str(iceberg_dir / warehouse / table.split(".", 1)[1].replace(".", "/"))


def _symlink(iceberg_dir: Path, catalog: str, table: str) -> dict[str, str]:
    namespace = (
        f"file:{iceberg_dir / 'hadoop_warehouse'}" if catalog == "hcat" else f"jdbc:sqlite:{iceberg_dir / 'catalog.db'}"
    )
    return {"namespace": namespace, "name": table.split(".", 1)[1], "type": "TABLE"}


def _snapshots(spark: Any, table: str) -> list[dict[str, Any]]:
    rows = spark.sql(f"SELECT snapshot_id, operation, summary FROM {table}.snapshots ORDER BY committed_at").collect()
    return [{"id": r.snapshot_id, "operation": r.operation, "summary": dict(r.summary)} for r in rows]


def _assert_commit_matches(output: dict[str, Any], snapshot: dict[str, Any]) -> None:
    report = output["outputFacets"]["icebergCommitReport"]
    summary = snapshot["summary"]
    assert report["snapshotId"] == snapshot["id"]
    assert report["operation"] == snapshot["operation"]
    metrics = report["commitMetrics"]
    assert metrics["attempts"] == 1
    assert metrics["totalDuration"] >= 0
    for field, key in (
        ("addedDataFiles", "added-data-files"),
        ("addedRecords", "added-records"),
        ("removedDataFiles", "deleted-data-files"),
    ):
        assert metrics.get(field, 0) == int(summary.get(key, 0)), field
    assert output["facets"]["version"]["datasetVersion"] == str(snapshot["id"])
    stats = output["outputFacets"]["outputStatistics"]
    assert stats["rowCount"] == int(summary.get("added-records", 0))
    assert stats["fileCount"] == int(summary.get("added-data-files", 0))


def test_create_insert_and_commit_report(
    spark: Any, lineage: Any, receiver: LineageReceiver, catalog: str, table: str, iceberg_dir: Path
) -> None:
    spark.sql(f"CREATE TABLE {table} (id BIGINT, name STRING) USING iceberg")
    spark.sql(f"INSERT INTO {table} VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    assert lineage.flush(60)

    location = _location(iceberg_dir, catalog, table)
    _, create = only_run(receiver.events, "create_table")
    # As openlineage-spark names V2 table commands: the identifier in its catalog, without the catalog.
    assert create["job"]["name"] == f"lineage_tests.create_table.{table.split('.', 1)[1].replace('.', '_')}"
    assert datasets(create, "outputs") == [("file", location)]
    out = create["outputs"][0]
    assert out["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "CREATE"
    assert out["facets"]["symlinks"]["identifiers"] == [_symlink(iceberg_dir, catalog, table)]
    catalog_facet = out["facets"]["catalog"]
    assert (catalog_facet["framework"], catalog_facet["type"], catalog_facet["name"], catalog_facet["source"]) == (
        "iceberg",
        "hadoop" if catalog == "hcat" else "jdbc",
        catalog,
        "spark",
    )
    assert out["facets"]["storage"] == {**out["facets"]["storage"], "storageLayer": "iceberg", "fileFormat": "parquet"}

    _, insert = only_run(receiver.events, "append_data")
    assert datasets(insert, "outputs") == [("file", location)]
    (snapshot,) = _snapshots(spark, table)
    _assert_commit_matches(insert["outputs"][0], snapshot)
    assert [f["name"] for f in insert["outputs"][0]["facets"]["schema"]["fields"]] == ["id", "name"]


def test_insert_select_from_another_table(
    spark: Any, lineage: Any, receiver: LineageReceiver, catalog: str, table: str, iceberg_dir: Path
) -> None:
    source = f"{catalog}.db.src{next(_names)}"
    spark.sql(f"CREATE TABLE {source} USING iceberg AS SELECT id, 'x' AS name FROM range(5)")
    spark.sql(f"CREATE TABLE {table} (id BIGINT, name STRING) USING iceberg")
    try:
        spark.sql(f"INSERT INTO {table} SELECT id * 10, name FROM {source} WHERE id > 1")
        assert lineage.flush(60)
        (source_snapshot,) = _snapshots(spark, source)
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {source}")

    _, insert = only_run(receiver.events, f"append_data.{table.replace('.', '_')}")
    assert datasets(insert, "inputs") == [("file", _location(iceberg_dir, catalog, source))]
    assert datasets(insert, "outputs") == [("file", _location(iceberg_dir, catalog, table))]
    read = insert["inputs"][0]
    assert read["facets"]["version"]["datasetVersion"] == str(source_snapshot["id"])
    assert read["facets"]["symlinks"]["identifiers"] == [_symlink(iceberg_dir, catalog, source)]
    (snapshot,) = _snapshots(spark, table)
    _assert_commit_matches(insert["outputs"][0], snapshot)
    assert insert["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 3


def test_dataframe_writer_v2(
    spark: Any, lineage: Any, receiver: LineageReceiver, catalog: str, table: str, iceberg_dir: Path
) -> None:
    frame = spark.range(6).selectExpr("id", "id % 2 AS part")
    frame.writeTo(table).partitionedBy("part").create()
    frame.writeTo(table).append()
    frame.where("part = 1").writeTo(table).overwritePartitions()
    frame.writeTo(table).replace()
    assert lineage.flush(60)

    location = _location(iceberg_dir, catalog, table)
    snapshots = _snapshots(spark, table)
    writes = [run[-1] for run in runs_by_job(receiver.events, "") if run[-1]["outputs"]]
    by_node = [
        (
            e["job"]["name"].split(".")[1],
            e["outputs"][0].get("facets", {}).get("lifecycleStateChange", {}).get("lifecycleStateChange"),
        )
        for e in writes
    ]
    assert by_node == [
        ("append_data", None),
        ("atomic_create_table_as_select", "CREATE"),
        ("append_data", None),
        ("overwrite_partitions_dynamic", "OVERWRITE"),
        rtas_data_write(spark.version),
        ("atomic_replace_table_as_select", "OVERWRITE"),
    ]
    data_writes = [e for e in writes if "icebergCommitReport" in e["outputs"][0].get("outputFacets", {})]
    assert len(data_writes) == len(snapshots) == 4
    for event, snapshot in zip(data_writes, snapshots):
        assert datasets(event, "outputs") == [("file", location)]
        _assert_commit_matches(event["outputs"][0], snapshot)


def test_insert_overwrite_merge_update_delete(
    spark: Any, lineage: Any, receiver: LineageReceiver, catalog: str, table: str, iceberg_dir: Path
) -> None:
    source = f"{table}_src"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, v STRING) USING iceberg")
    spark.sql(f"CREATE TABLE {source} (id BIGINT, v STRING) USING iceberg")
    spark.sql(f"INSERT INTO {source} VALUES (1, 'one'), (2, 'two'), (3, 'three')")
    try:
        spark.sql(f"INSERT OVERWRITE {table} SELECT * FROM {source} WHERE id < 3")
        spark.sql(
            f"MERGE INTO {table} t USING {source} s ON t.id = s.id "
            "WHEN MATCHED THEN UPDATE SET v = upper(s.v) WHEN NOT MATCHED THEN INSERT *"
        )
        spark.sql(f"UPDATE {table} SET v = 'x' WHERE id = 1")
        spark.sql(f"DELETE FROM {table} WHERE id = 2")
        assert lineage.flush(60)
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {source}")

    location, source_location = _location(iceberg_dir, catalog, table), _location(iceberg_dir, catalog, source)
    snapshots = _snapshots(spark, table)
    assert [s["operation"] for s in snapshots] == ["overwrite", "overwrite", "overwrite", "overwrite"] or len(
        snapshots
    ) == 4
    writes = [
        run[-1]
        for run in runs_by_job(receiver.events, "")
        if datasets(run[-1], "outputs") == [("file", location)]
        and "icebergCommitReport" in run[-1]["outputs"][0].get("outputFacets", {})
    ]
    assert [w["job"]["name"].split(".")[1] for w in writes] == [
        "overwrite_by_expression",
        "replace_data",
        "replace_data",
        "replace_data",
    ]
    for event, snapshot in zip(writes, snapshots):
        _assert_commit_matches(event["outputs"][0], snapshot)
    overwrite, merge, update, delete = writes
    assert datasets(overwrite, "inputs") == [("file", source_location)]
    # MERGE, UPDATE and DELETE read their target too (the rows they keep come from it), as the reference says.
    assert datasets(merge, "inputs") == sorted([("file", location), ("file", source_location)])
    assert datasets(update, "inputs") == datasets(delete, "inputs") == [("file", location)]
    assert merge["job"]["facets"]["sql"]["query"].startswith("MERGE INTO")


def test_reads_with_filters_and_time_travel(
    spark: Any,
    lineage: Any,
    receiver: LineageReceiver,
    catalog: str,
    table: str,
    iceberg_dir: Path,
    data_dir: Path,
) -> None:
    spark.sql(f"CREATE TABLE {table} (id BIGINT, v STRING) USING iceberg")
    spark.sql(f"INSERT INTO {table} VALUES (1, 'a')")
    spark.sql(f"INSERT INTO {table} VALUES (2, 'b'), (3, 'c')")
    first, second = _snapshots(spark, table)
    spark.table(table).where("id > 1").write.parquet(str(data_dir / "filtered"))
    spark.sql(f"SELECT * FROM {table} VERSION AS OF {first['id']}").write.parquet(str(data_dir / "travelled"))
    assert lineage.flush(60)

    location = _location(iceberg_dir, catalog, table)
    _, filtered = only_run(receiver.events, "data_filtered")
    assert datasets(filtered, "inputs") == [("file", location)]
    read = filtered["inputs"][0]
    assert read["facets"]["version"]["datasetVersion"] == str(second["id"])
    scan = read["inputFacets"]["icebergScanReport"]
    assert scan["snapshotId"] == second["id"]
    assert scan["projectedFieldNames"] == ["id", "v"]
    assert "id >" in scan["filterDescription"]
    assert scan["scanMetrics"]["resultDataFiles"] + scan["scanMetrics"]["skippedDataFiles"] == 2
    assert scan["scanMetrics"]["skippedDataFiles"] >= 1  # the first insert's file holds only id 1: pruned
    # As openlineage-spark counts a scan: the files it plans, their bytes and their records.
    statistics = read["inputFacets"]["inputStatistics"]
    assert (statistics["fileCount"], statistics["size"]) == (
        scan["scanMetrics"]["resultDataFiles"],
        scan["scanMetrics"]["totalFileSizeInBytes"],
    )
    assert statistics["rowCount"] == 2
    assert filtered["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 2

    _, travelled = only_run(receiver.events, "data_travelled")
    read = travelled["inputs"][0]
    assert read["facets"]["version"]["datasetVersion"] == str(first["id"])
    assert read["inputFacets"]["icebergScanReport"]["snapshotId"] == first["id"]
    assert read["inputFacets"]["inputStatistics"]["rowCount"] == 1
    assert travelled["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 1


def test_ctas_rtas_and_drop(
    spark: Any, lineage: Any, receiver: LineageReceiver, catalog: str, table: str, iceberg_dir: Path
) -> None:
    copy = f"{table}_copy"
    spark.sql(f"CREATE TABLE {table} USING iceberg AS SELECT id, id * 2 AS twice FROM range(4)")
    spark.sql(f"CREATE TABLE {copy} USING iceberg AS SELECT * FROM {table}")
    spark.sql(f"REPLACE TABLE {copy} USING iceberg AS SELECT * FROM {table} WHERE id > 1")
    spark.sql(f"DROP TABLE {copy}")
    assert lineage.flush(60)

    location, copy_location = _location(iceberg_dir, catalog, table), _location(iceberg_dir, catalog, copy)
    suffix = copy.split(".", 1)[1].replace(".", "_")
    _, ctas = only_run(receiver.events, f"atomic_create_table_as_select.{suffix}")
    assert datasets(ctas, "inputs") == [("file", location)]
    assert datasets(ctas, "outputs") == [("file", copy_location)]
    assert ctas["outputs"][0]["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "CREATE"
    _, rtas = only_run(receiver.events, f"atomic_replace_table_as_select.{suffix}")
    assert rtas["outputs"][0]["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "OVERWRITE"
    _, drop = only_run(receiver.events, "lineage_tests.drop_table")
    assert datasets(drop, "outputs") == [("file", copy_location)]
    assert drop["outputs"][0]["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "DROP"
    assert drop["outputs"][0]["facets"]["symlinks"]["identifiers"] == [_symlink(iceberg_dir, catalog, copy)]


def _reporter_field(spark: Any, catalog: str) -> Any:
    iceberg_catalog = spark._jsparkSession.sessionState().catalogManager().catalog(catalog).icebergCatalog()
    field = iceberg_catalog.getClass().getDeclaredField("catalog")
    field.setAccessible(True)
    real = field.get(iceberg_catalog)
    cls = real.getClass()
    while cls.getSimpleName() != "BaseMetastoreCatalog":
        cls = cls.getSuperclass()
    reporter_field = cls.getDeclaredField("metricsReporter")
    reporter_field.setAccessible(True)
    return reporter_field.get(real)


def test_user_reporter_keeps_working_and_disable_restores_it(
    spark: Any, receiver: LineageReceiver, iceberg_dir: Path
) -> None:
    _add_catalog(
        spark,
        "mcat",
        type="hadoop",
        warehouse=str(iceberg_dir / "mcat_warehouse"),
        metrics_reporter_impl="org.apache.iceberg.metrics.InMemoryMetricsReporter",
    )
    spark.sql("CREATE NAMESPACE IF NOT EXISTS mcat.db")
    spark.sql("CREATE TABLE mcat.db.loaded_before (id BIGINT) USING iceberg")  # cached before enable()
    user_reporter = _reporter_field(spark, "mcat")
    assert user_reporter.getClass().getSimpleName() == "InMemoryMetricsReporter"

    handle = spark_lineage.enable(spark, transport={"type": "http", "url": receiver.url})
    try:
        spark.sql("INSERT INTO mcat.db.loaded_before VALUES (1), (2)")
        assert handle.flush(60)
        (snapshot,) = _snapshots(spark, "mcat.db.loaded_before")
        assert user_reporter.commitReport().snapshotId() == snapshot["id"]  # the user's reporter still hears
        _, insert = only_run(receiver.events, "append_data")
        _assert_commit_matches(insert["outputs"][0], snapshot)
    finally:
        handle.disable(timeout=30)
    assert _reporter_field(spark, "mcat").equals(user_reporter)
    spark.sql("DROP TABLE mcat.db.loaded_before")


def test_metrics_reporter_disabled_leaves_the_facet_out(spark: Any, receiver: LineageReceiver, table: str) -> None:
    spark.sql(f"CREATE TABLE {table} (id BIGINT) USING iceberg")
    handle = spark_lineage.enable(
        spark, transport={"type": "http", "url": receiver.url}, vendors={"iceberg": {"metricsReporterDisabled": True}}
    )
    spark.sql(f"INSERT INTO {table} VALUES (1)")
    handle.disable(timeout=30)
    _, insert = only_run(receiver.events, "append_data")
    (snapshot,) = _snapshots(spark, table)
    output = insert["outputs"][0]
    assert "icebergCommitReport" not in output.get("outputFacets", {})  # absent, never zeros
    assert output["facets"]["version"]["datasetVersion"] == str(snapshot["id"])


class _CommitRace:
    """An Iceberg ``LockManager`` put into one table's Hadoop operations. Iceberg takes the lock inside a commit
    attempt, after writing the new metadata and before publishing it; the first time, this lock lets a second
    catalog commit to the same table first (and waits a while), so the attempt loses the race and Iceberg
    retries it."""

    def __init__(self, rival_commit: Any, wait_seconds: float) -> None:
        self.rival_commit = rival_commit
        self.wait_seconds = wait_seconds
        self.calls = 0

    def acquire(self, entity_id: str, owner_id: str) -> bool:
        import time

        self.calls += 1
        if self.calls == 1:
            self.rival_commit()
            time.sleep(self.wait_seconds)
        return True

    def release(self, entity_id: str, owner_id: str) -> bool:
        return True

    def initialize(self, properties: Any) -> None:
        pass

    def close(self) -> None:
        pass

    class Java:
        implements = ["org.apache.iceberg.LockManager"]


def test_commit_that_loses_a_race_reports_its_retry(spark: Any, receiver: LineageReceiver, iceberg_dir: Path) -> None:
    warehouse = str(iceberg_dir / "race_warehouse")
    for name in ("race", "rival"):
        _add_catalog(spark, name, type="hadoop", warehouse=warehouse)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS race.db")
    spark.sql("CREATE TABLE race.db.contested (id BIGINT) USING iceberg")
    jvm = spark.sparkContext._jvm
    identifier = jvm.org.apache.iceberg.catalog.TableIdentifier.parse("db.contested")
    manager = spark._jsparkSession.sessionState().catalogManager()
    ours = manager.catalog("race").icebergCatalog().loadTable(identifier)
    theirs = manager.catalog("rival").icebergCatalog().loadTable(identifier)
    race = _CommitRace(lambda: theirs.updateProperties().set("rival", "was-first").commit(), wait_seconds=0.5)
    from pyspark.java_gateway import ensure_callback_server_started

    ensure_callback_server_started(spark.sparkContext._gateway)
    lock_field = ours.operations().getClass().getDeclaredField("lockManager")
    lock_field.setAccessible(True)
    lock_field.set(ours.operations(), race)

    handle = spark_lineage.enable(spark, transport={"type": "http", "url": receiver.url})
    try:
        spark.sql("INSERT INTO race.db.contested VALUES (1), (2)")
        assert handle.flush(60)
    finally:
        handle.disable(timeout=30)
        spark.sql("DROP TABLE IF EXISTS race.db.contested")

    assert race.calls == 2  # the first attempt lost, the second won
    _, insert = only_run(receiver.events, "append_data")
    report = insert["outputs"][0]["outputFacets"]["icebergCommitReport"]
    assert report["commitMetrics"]["attempts"] == 2
    assert report["commitMetrics"]["totalDuration"] >= 500  # the lost attempt's wait is inside the commit


def test_catalog_without_cache(spark: Any, receiver: LineageReceiver, iceberg_dir: Path) -> None:
    warehouse = iceberg_dir / "uncached_warehouse"
    _add_catalog(spark, "ncat", type="hadoop", warehouse=str(warehouse), cache_enabled="false")
    spark.sql("CREATE NAMESPACE IF NOT EXISTS ncat.db")
    spark.sql("CREATE TABLE ncat.db.plain (id BIGINT) USING iceberg")
    handle = spark_lineage.enable(spark, transport={"type": "http", "url": receiver.url})
    try:
        spark.sql("INSERT INTO ncat.db.plain VALUES (7)")
    finally:
        handle.disable(timeout=30)
    _, insert = only_run(receiver.events, "append_data")
    assert datasets(insert, "outputs") == [("file", str(warehouse / "db" / "plain"))]
    (snapshot,) = _snapshots(spark, "ncat.db.plain")
    _assert_commit_matches(insert["outputs"][0], snapshot)
    spark.sql("DROP TABLE ncat.db.plain")


SESSION_CATALOG_JOB = """
import json
import sys
from pyspark.sql import SparkSession
import spark_lineage

spark = (
    SparkSession.builder.master("local[1]").appName("Session Catalog Job")
    .config("spark.ui.enabled", "false")
    .config("spark.sql.warehouse.dir", sys.argv[2])
    .config("spark.jars.packages", sys.argv[3])
    .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
    .config("spark.sql.catalog.spark_catalog", "org.apache.iceberg.spark.SparkSessionCatalog")
    .config("spark.sql.catalog.spark_catalog.type", "hadoop")
    .config("spark.sql.catalog.spark_catalog.warehouse", sys.argv[2])
    .getOrCreate()
)
handle = spark_lineage.enable(spark, transport={"type": "http", "url": sys.argv[1]})
spark.sql("CREATE TABLE default.ice (id BIGINT, v STRING) USING iceberg")
spark.sql("INSERT INTO default.ice VALUES (1, 'a'), (2, 'b')")
spark.table("default.ice").where("id > 1").write.parquet(sys.argv[2] + "/out")
spark.sql("CREATE TABLE ice_copy USING iceberg AS SELECT id, upper(v) AS uv FROM default.ice")
handle.flush(60)  # the CTAS's table is read after it ran: before the RTAS replaces it
spark.sql("CREATE OR REPLACE TABLE ice_copy USING iceberg AS SELECT id, v AS uv FROM default.ice WHERE id > 1")
spark.sql("ALTER TABLE default.ice ADD COLUMN extra DOUBLE")
handle.flush(60)  # the same: before the DROP
history = "SELECT snapshot_id FROM {}.snapshots ORDER BY committed_at"
tables = ("default.ice", "default.ice_copy")
snapshots = {t: [r.snapshot_id for r in spark.sql(history.format(t)).collect()] for t in tables}
print("SNAPSHOTS " + json.dumps(snapshots))
spark.sql("DROP TABLE default.ice")
spark.stop()
"""


def test_session_catalog_iceberg_tables(tmp_path: Path, receiver: LineageReceiver) -> None:
    """``spark_catalog`` replaced by Iceberg's SparkSessionCatalog, in a job of its own (the session catalog is
    fixed when a session starts)."""
    import subprocess
    import sys

    import pyspark

    from tests.jars import iceberg_runtime

    script = tmp_path / "job.py"
    script.write_text(SESSION_CATALOG_JOB)
    warehouse = tmp_path / "warehouse"
    result = subprocess.run(
        [sys.executable, str(script), receiver.url, str(warehouse), iceberg_runtime(pyspark.__version__)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    snapshots = json.loads(result.stdout.split("SNAPSHOTS ", 1)[1].splitlines()[0])
    location, copy_location = str(warehouse / "default" / "ice"), str(warehouse / "default" / "ice_copy")
    symlink = [{"namespace": f"file:{warehouse}", "name": "default.ice", "type": "TABLE"}]
    # As openlineage-spark names them: commands by <db>_<table> without the catalog, appends with it.
    names = sorted({e["job"]["name"] for e in query_events(receiver.events)})
    rtas_write, _ = rtas_data_write(pyspark.__version__)
    rtas_write_catalog = "spark_catalog_" if pyspark.__version__ >= "4" or rtas_write == "append_data" else ""
    assert names == sorted(
        {
            f"session_catalog_job.{job}"
            for job in (
                "alter_table.default_ice",
                "append_data.spark_catalog_default_ice",
                "append_data.spark_catalog_default_ice_copy",
                "atomic_create_table_as_select.default_ice_copy",
                "atomic_replace_table_as_select.default_ice_copy",
                "create_table.default_ice",
                "drop_table",
                "execute_insert_into_hadoop_fs_relation_command.warehouse_out",
                f"{rtas_write}.{rtas_write_catalog}default_ice_copy",
            )
        }
    ), names
    _, create = only_run(receiver.events, "create_table.default_ice")
    assert datasets(create, "outputs") == [("file", location)]
    assert create["outputs"][0]["facets"]["symlinks"]["identifiers"] == symlink
    # The schema the command declared, not the one a later ALTER left.
    assert _fields(create["outputs"][0]) == [("id", "long"), ("v", "string")]
    _, ctas = only_run(receiver.events, "atomic_create_table_as_select.default_ice_copy")
    assert datasets(ctas, "outputs") == [("file", copy_location)]
    assert _fields(ctas["outputs"][0]) == [("id", "long"), ("uv", "string")]
    # The replacement's snapshot: the CTAS's was the table's current one until the RTAS replaced it.
    first, replaced = snapshots["default.ice_copy"]
    assert ctas["outputs"][0]["facets"]["version"]["datasetVersion"] == str(first)
    _, rtas = only_run(receiver.events, "atomic_replace_table_as_select.default_ice_copy")
    assert rtas["outputs"][0]["facets"]["version"]["datasetVersion"] == str(replaced)
    assert rtas["outputs"][0]["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "OVERWRITE"
    _, alter = only_run(receiver.events, "alter_table.default_ice")
    assert datasets(alter, "outputs") == [("file", location)]
    assert alter["outputs"][0]["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "ALTER"
    assert _fields(alter["outputs"][0]) == [("id", "long"), ("v", "string"), ("extra", "double")]
    assert alter["outputs"][0]["facets"]["version"]["datasetVersion"] == str(snapshots["default.ice"][-1])
    (insert_run,) = [
        r
        for r in runs_by_job(receiver.events, "append_data.spark_catalog_default_ice")
        if r[0]["job"]["name"].endswith("_ice")
    ]
    insert = insert_run[-1]
    commit = insert["outputs"][0]["outputFacets"]["icebergCommitReport"]
    assert (commit["commitMetrics"]["addedRecords"], commit["commitMetrics"]["attempts"]) == (2, 1)
    assert insert["outputs"][0]["facets"]["version"]["datasetVersion"] == str(commit["snapshotId"])
    _, read = only_run(receiver.events, "insert_into_hadoop_fs_relation_command")
    assert datasets(read, "inputs") == [("file", location)]
    assert read["inputs"][0]["inputFacets"]["icebergScanReport"]["snapshotId"] == commit["snapshotId"]
    _, drop = only_run(receiver.events, "session_catalog_job.drop_table")
    assert datasets(drop, "outputs") == [("file", location)]
    assert drop["outputs"][0]["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "DROP"


def _fields(dataset: dict[str, Any]) -> list[tuple[str, str]]:
    return [(f["name"], f["type"]) for f in dataset["facets"]["schema"]["fields"]]


def test_rest_catalog(spark: Any, receiver: LineageReceiver, iceberg_dir: Path) -> None:
    """A real Iceberg REST catalog server on loopback (Iceberg's own RESTCatalogServer)."""
    from tests.rest_catalog.server import rest_catalog_server

    warehouse = iceberg_dir / "rest_warehouse"
    warehouse.mkdir()
    with rest_catalog_server(warehouse) as uri:
        _add_catalog(spark, "rcat", type="rest", uri=uri)
        spark.sql("CREATE NAMESPACE IF NOT EXISTS rcat.db")
        spark.sql("CREATE TABLE rcat.db.remote (id BIGINT, v STRING) USING iceberg")
        handle = spark_lineage.enable(spark, transport={"type": "http", "url": receiver.url})
        try:
            assert handle.flush(60)  # the reporter of a remote catalog is added on the worker thread
            spark.sql("INSERT INTO rcat.db.remote VALUES (1, 'a'), (2, 'b')")
            spark.sql("SELECT * FROM rcat.db.remote WHERE id = 2").write.parquet(str(warehouse.parent / "rest_out"))
            assert handle.flush(60)
            (snapshot,) = _snapshots(spark, "rcat.db.remote")
        finally:
            handle.disable(timeout=30)
            spark.sql("DROP TABLE IF EXISTS rcat.db.remote")
            spark.conf.unset("spark.sql.catalog.rcat")

    location = str(warehouse / "db" / "remote")
    _, insert = only_run(receiver.events, "append_data.rcat_db_remote")
    assert datasets(insert, "outputs") == [("file", location)]
    output = insert["outputs"][0]
    assert output["facets"]["symlinks"]["identifiers"] == [{"namespace": uri, "name": "db.remote", "type": "TABLE"}]
    assert output["facets"]["catalog"]["type"] == "rest"
    assert output["facets"]["catalog"]["metadataUri"] == uri
    _assert_commit_matches(output, snapshot)
    _, read = only_run(receiver.events, "rest_out")
    assert datasets(read, "inputs") == [("file", location)]
    assert read["inputs"][0]["inputFacets"]["icebergScanReport"]["snapshotId"] == snapshot["id"]
