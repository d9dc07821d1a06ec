"""File sources read and written, named as openlineage-spark names them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support import LineageReceiver, dataset, datasets, only_run

pytestmark = pytest.mark.spark

FORMATS = ["parquet", "csv", "json", "orc", "text", "avro"]


def _people(spark: Any, data_dir: Path) -> Any:
    return spark.read.option("header", True).csv(str(data_dir / "people.csv"))


@pytest.mark.parametrize("fmt", FORMATS)
def test_file_format_read_and_write(
    spark: Any, lineage: Any, receiver: LineageReceiver, data_dir: Path, fmt: str
) -> None:
    people = _people(spark, data_dir)
    if fmt == "text":
        people = people.select("name")
    first, second = data_dir / f"first_{fmt}", data_dir / f"second_{fmt}"
    people.write.format(fmt).option("header", True).save(str(first))
    reread = spark.read.format(fmt).option("header", True).load(str(first))
    reread.write.format(fmt).mode("overwrite").save(str(second))
    assert lineage.flush(60)

    start, complete = only_run(receiver.events, f"data_first_{fmt}")
    assert start["job"]["name"] == f"lineage_tests.execute_insert_into_hadoop_fs_relation_command.data_first_{fmt}"
    assert datasets(complete, "inputs") == [("file", str(data_dir / "people.csv"))]
    assert datasets(complete, "outputs") == [("file", str(first))]
    out = dataset(complete, "outputs", str(first))
    assert "lifecycleStateChange" not in out["facets"]  # mode errorifexists: a plain write
    assert out["facets"]["dataSource"] == {**out["facets"]["dataSource"], "name": "file", "uri": "file"}
    stats = out["outputFacets"]["outputStatistics"]
    assert stats["rowCount"] == 3
    assert stats["size"] == sum(p.stat().st_size for p in first.iterdir() if not p.name.startswith((".", "_")))
    assert stats["fileCount"] == 1

    _, complete = only_run(receiver.events, f"data_second_{fmt}")
    assert datasets(complete, "inputs") == [("file", str(first))]
    out = dataset(complete, "outputs", str(second))
    assert out["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "OVERWRITE"
    expected_columns = {"text": ["value"], "json": ["city", "id", "name"]}.get(fmt, ["id", "name", "city"])
    assert [f["name"] for f in out["facets"]["schema"]["fields"]] == expected_columns
