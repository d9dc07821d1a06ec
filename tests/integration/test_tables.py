"""Session-catalog tables: the location is the dataset, ``db.table`` under the warehouse is the symlink."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support import LineageReceiver, dataset, datasets, only_run, query_events, runs_by_job

pytestmark = pytest.mark.spark


def _people(spark: Any, data_dir: Path) -> Any:
    return spark.read.option("header", True).csv(str(data_dir / "people.csv"))


def _symlinks(out: dict[str, Any]) -> list[dict[str, str]]:
    return out["facets"]["symlinks"]["identifiers"]


def test_save_as_table_creates_a_table(
    spark: Any, lineage: Any, receiver: LineageReceiver, data_dir: Path, warehouse: Path
) -> None:
    _people(spark, data_dir).write.saveAsTable("people")
    assert lineage.flush(60)

    _, complete = only_run(receiver.events, "create_data_source_table_as_select_command")
    assert complete["job"]["name"] == "lineage_tests.execute_create_data_source_table_as_select_command.default_people"
    if spark.version >= "4.1":
        # Spark 4.1 runs that CTAS inside a command of its own, a run without datasets in openlineage-spark too.
        _, save = only_run(receiver.events, "save_as_v1_table_command")
        assert save["job"]["name"] == "lineage_tests.execute_save_as_v1_table_command"
        assert (save["inputs"], save["outputs"]) == ([], [])
    location = str(warehouse / "people")
    assert datasets(complete, "inputs") == [("file", str(data_dir / "people.csv"))]
    assert datasets(complete, "outputs") == [("file", location)]
    out = dataset(complete, "outputs", location)
    assert _symlinks(out) == [{"namespace": f"file:{warehouse}", "name": "default.people", "type": "TABLE"}]
    assert out["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "CREATE"
    assert [(f["name"], f["type"]) for f in out["facets"]["schema"]["fields"]] == [
        ("id", "string"),
        ("name", "string"),
        ("city", "string"),
    ]
    # Spark writes the data in a nested insert, which is a query of its own, as in the reference.
    _, insert = only_run(receiver.events, "insert_into_hadoop_fs_relation_command.warehouse")
    assert datasets(insert, "outputs") == [("file", location)]
    assert insert["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 3


def test_insert_into_and_append(
    spark: Any, lineage: Any, receiver: LineageReceiver, data_dir: Path, warehouse: Path
) -> None:
    spark.sql("CREATE TABLE target (id STRING, name STRING, city STRING) USING parquet")
    receiver_start = len(receiver.events)
    _people(spark, data_dir).write.insertInto("target")
    spark.sql("INSERT INTO target SELECT * FROM target WHERE city = 'oslo'")
    _people(spark, data_dir).write.mode("append").saveAsTable("target")
    assert lineage.flush(60)

    location = str(warehouse / "target")
    runs = runs_by_job(receiver.events[receiver_start:], "execute_insert_into_hadoop_fs_relation_command")
    assert len(runs) == 3
    first, second, third = (run[-1] for run in runs)
    for complete in (first, second, third):
        assert complete["eventType"] == "COMPLETE"
        assert complete["job"]["name"] == (
            f"lineage_tests.execute_insert_into_hadoop_fs_relation_command.{warehouse.name}_target"
        )
        out = dataset(complete, "outputs", location)
        assert _symlinks(out) == [{"namespace": f"file:{warehouse}", "name": "default.target", "type": "TABLE"}]
        assert "lifecycleStateChange" not in out["facets"]
    assert datasets(first, "inputs") == [("file", str(data_dir / "people.csv"))]
    assert first["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 3
    assert datasets(second, "inputs") == [("file", location)]
    assert dataset(second, "inputs", location)["facets"]["symlinks"] == first["outputs"][0]["facets"]["symlinks"]
    assert second["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 1
    assert second["job"]["facets"]["sql"]["query"] == "INSERT INTO target SELECT * FROM target WHERE city = 'oslo'"
    assert "sql" not in first["job"]["facets"]


def test_insert_overwrite_and_ctas(
    spark: Any, lineage: Any, receiver: LineageReceiver, data_dir: Path, warehouse: Path
) -> None:
    _people(spark, data_dir).createOrReplaceTempView("people_view")
    spark.sql("CREATE TABLE src USING parquet AS SELECT * FROM people_view")
    spark.sql("CREATE TABLE dst (id STRING, name STRING, city STRING) USING parquet")
    spark.sql("INSERT OVERWRITE TABLE dst SELECT * FROM src")
    assert lineage.flush(60)

    _, ctas = only_run(receiver.events, "create_data_source_table_as_select_command.default_src")
    assert datasets(ctas, "inputs") == [("file", str(data_dir / "people.csv"))]
    assert datasets(ctas, "outputs") == [("file", str(warehouse / "src"))]
    sql = "CREATE TABLE src USING parquet AS SELECT * FROM people_view"
    if spark.version >= "4.3":
        # Spark 4.3's CTAS command keeps no SQL text, nor anything it holds as a child: openlineage-spark gives it
        # no sql facet either. The write it runs has it.
        assert "sql" not in ctas["job"]["facets"]
        _, write = only_run(receiver.events, f"insert_into_hadoop_fs_relation_command.{warehouse.name}_src")
        assert write["job"]["facets"]["sql"]["query"] == sql
    else:
        assert ctas["job"]["facets"]["sql"]["query"] == sql
    (overwrite,) = [
        run[-1]
        for run in runs_by_job(receiver.events, "insert_into_hadoop_fs_relation_command")
        if run[-1]["job"]["facets"].get("sql", {}).get("query", "").startswith("INSERT OVERWRITE")
    ]
    assert datasets(overwrite, "inputs") == [("file", str(warehouse / "src"))]
    out = dataset(overwrite, "outputs", str(warehouse / "dst"))
    assert out["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "OVERWRITE"
    assert _symlinks(out)[0]["name"] == "default.dst"


def test_cached_relation_and_temp_view(spark: Any, lineage: Any, receiver: LineageReceiver, data_dir: Path) -> None:
    cached = _people(spark, data_dir).where("city = 'paris'").cache()
    cached.count()
    cached.createOrReplaceTempView("parisians")
    spark.sql("SELECT name FROM parisians").write.parquet(str(data_dir / "from_cache"))
    assert lineage.flush(60)

    _, complete = only_run(receiver.events, "data_from_cache")
    assert datasets(complete, "inputs") == [("file", str(data_dir / "people.csv"))]
    assert datasets(complete, "outputs") == [("file", str(data_dir / "from_cache"))]
    assert complete["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 2


def test_union_and_join_of_several_inputs(spark: Any, lineage: Any, receiver: LineageReceiver, data_dir: Path) -> None:
    (data_dir / "cities.json").write_text('{"city": "paris", "country": "fr"}\n{"city": "oslo", "country": "no"}\n')
    people = _people(spark, data_dir)
    people.write.parquet(str(data_dir / "people_pq"))
    more = spark.read.parquet(str(data_dir / "people_pq"))
    cities = spark.read.json(str(data_dir / "cities.json"))
    people.unionByName(more).join(cities, "city").write.orc(str(data_dir / "joined"))
    assert lineage.flush(60)

    _, complete = only_run(receiver.events, "data_joined")
    assert datasets(complete, "inputs") == [
        ("file", str(data_dir / "cities.json")),
        ("file", str(data_dir / "people.csv")),
        ("file", str(data_dir / "people_pq")),
    ]
    assert datasets(complete, "outputs") == [("file", str(data_dir / "joined"))]
    assert complete["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 6
    assert {e["job"]["name"] for e in query_events(receiver.events)} >= {complete["job"]["name"]}
