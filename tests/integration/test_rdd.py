"""RDD lineage on real Spark: DataFrames over RDDs report the files their RDD lineage reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support import LineageReceiver, datasets, only_run

pytestmark = pytest.mark.spark


def test_a_dataframe_over_a_text_file_rdd_reads_its_directory(
    spark: Any, lineage: Any, receiver: LineageReceiver, data_dir: Path
) -> None:
    lines = data_dir / "lines"
    lines.mkdir()
    (lines / "part-1.txt").write_text("a\nb\n")
    (lines / "part-2.txt").write_text("c\n")
    out = data_dir / "from_rdd"
    spark.sparkContext.textFile(str(lines)).map(lambda line: (line.upper(),)).toDF(["value"]).write.parquet(str(out))
    # A single file read the same way is reported as its directory, as openlineage-spark reports it.
    single = data_dir / "from_one_file"
    spark.sparkContext.textFile(str(lines / "part-1.txt")).map(lambda line: (line,)).toDF(["v"]).write.json(str(single))
    assert lineage.flush(60)

    _, complete = only_run(receiver.events, "data_from_rdd")
    assert datasets(complete, "inputs") == [("file", str(lines))]
    assert datasets(complete, "outputs") == [("file", str(out))]
    assert "columnLineage" not in complete["outputs"][0]["facets"]
    assert "extractionError" not in complete["run"]["facets"]
    _, complete = only_run(receiver.events, "data_from_one_file")
    assert datasets(complete, "inputs") == [("file", str(lines))]


def test_a_dataframe_made_from_a_dataframes_rdd_reads_the_scanned_files(
    spark: Any, lineage: Any, receiver: LineageReceiver, data_dir: Path
) -> None:
    people = spark.read.option("header", True).csv(str(data_dir / "people.csv"))
    out = data_dir / "people_again"
    spark.createDataFrame(people.rdd).write.parquet(str(out))
    assert lineage.flush(60)
    _, complete = only_run(receiver.events, "data_people_again")
    assert datasets(complete, "inputs") == [("file", str(data_dir))]
