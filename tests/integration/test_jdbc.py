"""Databases over JDBC: sqlite through its driver and a real PostgreSQL server, read by table and by query
and written by append and overwrite, named as openlineage-spark names them, with no secret in any event."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.parity.scenarios import write_shop_database
from tests.postgres_server import Postgres
from tests.support import LineageReceiver, dataset, datasets, only_run, runs_by_job

pytestmark = pytest.mark.spark

SECRET = "s3cret-Passw0rd"


def _shop(tmp_path: Path) -> Path:
    path = tmp_path / "shop.db"
    write_shop_database(path)
    return path


def _read(spark: Any, url: str, driver: str = "org.sqlite.JDBC") -> Any:
    return spark.read.format("jdbc").option("url", url).option("driver", driver)


def _identity(namespace: str, name: str, column: str) -> dict[str, Any]:
    return {
        "namespace": namespace,
        "name": name,
        "field": column,
        "transformations": [{"type": "DIRECT", "subtype": "IDENTITY", "description": "", "masking": False}],
    }


def _no_secret_in(events: list[dict[str, Any]]) -> None:
    text = json.dumps(events)
    assert events and SECRET not in text and "password" not in text.lower()


def test_a_table_read_into_a_parquet_report(
    spark: Any, lineage: Any, receiver: LineageReceiver, tmp_path: Path
) -> None:
    shop = _shop(tmp_path)
    url = f"jdbc:sqlite:{shop}?password={SECRET}"
    _read(spark, url).option("dbtable", "orders").load().write.parquet(str(tmp_path / "report"))
    assert lineage.flush(60)

    _, complete = only_run(receiver.events, "report")
    namespace = f"sqlite:{shop}"
    assert datasets(complete, "inputs") == [(namespace, "orders")]
    read = dataset(complete, "inputs", "orders")
    assert read["facets"]["dataSource"]["name"] == read["facets"]["dataSource"]["uri"] == namespace
    assert [(f["name"], f["type"]) for f in read["facets"]["schema"]["fields"]] == [
        ("id", "integer"),
        ("cid", "integer"),
        ("amount", "double"),
    ]
    columns = dataset(complete, "outputs", str(tmp_path / "report"))["facets"]["columnLineage"]
    assert columns["fields"] == {
        column: {"inputFields": [_identity(namespace, "orders", column)]} for column in ("id", "cid", "amount")
    }
    assert "dataset" not in columns
    _no_secret_in(receiver.events)


def test_a_query_joining_two_tables_is_parsed(
    spark: Any, lineage: Any, receiver: LineageReceiver, tmp_path: Path
) -> None:
    shop = _shop(tmp_path)
    query = "SELECT o.id, c.name FROM orders o JOIN customers c ON o.cid = c.id WHERE o.amount > 6"
    _read(spark, f"jdbc:sqlite:{shop}").option("query", query).load().write.parquet(str(tmp_path / "named"))
    assert lineage.flush(60)

    _, complete = only_run(receiver.events, "named")
    namespace = f"sqlite:{shop}"
    assert datasets(complete, "inputs") == [(namespace, "customers"), (namespace, "orders")]
    schemas = {d["name"]: [f["name"] for f in d["facets"]["schema"]["fields"]] for d in complete["inputs"]}
    assert schemas == {"customers": ["name"], "orders": ["id"]}
    fields = dataset(complete, "outputs", str(tmp_path / "named"))["facets"]["columnLineage"]["fields"]
    assert fields == {
        "id": {"inputFields": [_identity(namespace, "orders", "id")]},
        "name": {"inputFields": [_identity(namespace, "customers", "name")]},
    }


def test_writes_append_and_overwrite(spark: Any, lineage: Any, receiver: LineageReceiver, tmp_path: Path) -> None:
    shop = _shop(tmp_path)
    url = f"jdbc:sqlite:{shop}?password={SECRET}"
    frame = spark.createDataFrame([(1, "ann")], "id int, name string")
    frame.write.parquet(str(tmp_path / "people"))
    people = spark.read.parquet(str(tmp_path / "people"))
    people.write.jdbc(url, "big_orders", mode="append", properties={"driver": "org.sqlite.JDBC"})
    people.write.format("jdbc").option("url", url).option("driver", "org.sqlite.JDBC").option(
        "dbtable", "big_orders"
    ).mode("overwrite").save()
    assert lineage.flush(60)

    runs = runs_by_job(receiver.events, "execute_save_into_data_source_command")
    assert [run[-1]["job"]["name"] for run in runs] == [
        "lineage_tests.execute_save_into_data_source_command.big_orders"
    ] * 2
    namespace = f"sqlite:{shop}"
    lifecycles = []
    for run in runs:
        complete = run[-1]
        assert datasets(complete, "inputs") == [("file", str(tmp_path / "people"))]
        assert datasets(complete, "outputs") == [(namespace, "big_orders")]
        written = complete["outputs"][0]
        lifecycles.append(written["facets"].get("lifecycleStateChange", {}).get("lifecycleStateChange"))
        assert written["facets"]["columnLineage"]["fields"] == {
            column: {"inputFields": [_identity("file", str(tmp_path / "people"), column)]} for column in ("id", "name")
        }
    assert lifecycles == [None, "OVERWRITE"]
    _no_secret_in(receiver.events)


def test_postgres_tables_read_and_written(
    spark: Any, lineage: Any, receiver: LineageReceiver, tmp_path: Path, postgres: Postgres | None
) -> None:
    if postgres is None:
        pytest.skip("no PostgreSQL server here (scripts/test installs and starts one)")
    url = postgres.jdbc_url
    driver = "org.postgresql.Driver"
    _read(spark, url, driver).option("dbtable", "public.orders").load().write.parquet(str(tmp_path / "orders"))
    query = "SELECT o.id, c.name FROM public.orders o JOIN public.customers c ON o.cid = c.id"
    _read(spark, url, driver).option("query", query).load().write.parquet(str(tmp_path / "names"))
    spark.read.parquet(str(tmp_path / "names")).write.format("jdbc").option("url", url).option("driver", driver).option(
        "dbtable", "public.names"
    ).mode("overwrite").save()
    assert lineage.flush(60)

    namespace = f"postgres://127.0.0.1:{postgres.port}"
    _, complete = only_run(receiver.events, f"{tmp_path.name}_orders")
    assert datasets(complete, "inputs") == [(namespace, "shop.public.orders")]
    _, complete = only_run(receiver.events, f"{tmp_path.name}_names")
    assert datasets(complete, "inputs") == [(namespace, "shop.public.customers"), (namespace, "shop.public.orders")]
    _, complete = only_run(receiver.events, "execute_save_into_data_source_command")
    assert complete["job"]["name"] == "lineage_tests.execute_save_into_data_source_command.public_names"
    assert datasets(complete, "outputs") == [(namespace, "shop.public.names")]
    assert complete["outputs"][0]["facets"]["columnLineage"]["fields"]["name"] == {
        "inputFields": [_identity("file", str(tmp_path / "names"), "name")]
    }
    assert postgres.password not in json.dumps(receiver.events)
    _no_secret_in(receiver.events)
