"""Delta Lake tables: a table is its directory, as openlineage-spark names it (a catalog table also gets the
``symlinks`` entry every session-catalog table gets); the transaction log inside it is never a dataset."""

from __future__ import annotations

from collections.abc import Mapping

DELTA_LOG_DIRECTORY = "_delta_log"
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"


def is_delta_log(path: str) -> bool:
    """Whether a path lies in a Delta table's transaction log (``<table>/_delta_log/…``): Delta reads its log
    with Spark queries of its own, which read no user data."""
    return f"/{DELTA_LOG_DIRECTORY}/" in path.rstrip("/") + "/"


def has_delta_extension(conf: Mapping[str, str]) -> bool:
    """Whether a session runs with Delta Lake's SQL extension (``spark.sql.extensions``), as openlineage-spark
    decides that a session uses Delta."""
    return DELTA_EXTENSION in {name.strip() for name in conf.get("spark.sql.extensions", "").split(",")}
