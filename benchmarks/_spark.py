"""A quiet local SparkSession for the benchmarks, and the JVM artifacts they load (the tests' own list)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.jars import iceberg_runtime, openlineage_spark

__all__ = ["iceberg_runtime", "local_session", "openlineage_spark"]


def local_session(app_name: str, master: str = "local[2]", **confs: str) -> Any:
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
    )
    for key, value in confs.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
