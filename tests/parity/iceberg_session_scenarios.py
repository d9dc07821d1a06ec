"""The Iceberg jobs the parity harness runs in a Spark application of their own, with Iceberg's
``SparkSessionCatalog`` as ``spark_catalog`` (a Hadoop catalog in the workspace) beside the main suite's
``ice`` catalog (a ``SparkCatalog``): the same DDL and writes on tables of each, with the ``schema`` and
``version`` dataset facets compared too. They read the parquet views
``t1`` and ``t2`` of :func:`tests.parity.scenarios.prepare`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.parity.scenarios import Workspace

ICEBERG_EXTENSION = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"

Scenario = Callable[[Any, Workspace], None]
ICEBERG_SESSION_SCENARIOS: dict[str, Scenario] = {}


def iceberg_session_confs(workspace: Workspace) -> dict[str, str]:
    """Iceberg's extension, ``spark_catalog`` as a ``SparkSessionCatalog`` and ``ice`` as a ``SparkCatalog``,
    both Hadoop catalogs in the workspace."""
    return {
        "spark.sql.extensions": ICEBERG_EXTENSION,
        "spark.sql.catalog.spark_catalog": "org.apache.iceberg.spark.SparkSessionCatalog",
        "spark.sql.catalog.spark_catalog.type": "hadoop",
        "spark.sql.catalog.spark_catalog.warehouse": str(workspace.base / "session_ice"),
        "spark.sql.catalog.ice": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.ice.type": "hadoop",
        "spark.sql.catalog.ice.warehouse": str(workspace.base / "ice"),
    }


STATEMENTS: dict[str, tuple[str, ...]] = {
    "create_table": ("CREATE TABLE {t}created (a INT, b STRING) USING iceberg",),
    "ctas": ("CREATE TABLE {t}ctas USING iceberg AS SELECT a, upper(b) AS ub FROM t1 WHERE c > 5",),
    "rtas": (
        "CREATE TABLE {t}rtas (a INT, d STRING) USING iceberg",
        "CREATE OR REPLACE TABLE {t}rtas USING iceberg AS SELECT a, d FROM t2 WHERE a > 1",
    ),
    "insert": (
        "CREATE TABLE {t}inserted (a INT, d STRING) USING iceberg",
        "INSERT INTO {t}inserted SELECT a, d FROM t2",
    ),
    "alter_add_column": (
        "CREATE TABLE {t}altered (a INT, b STRING) USING iceberg",
        "ALTER TABLE {t}altered ADD COLUMN c BIGINT",
    ),
}
"""Each scenario's statements, run once in each catalog (:data:`CATALOGS`) on a table of its own."""
CATALOGS = {"session": "s_", "catalog": "ice.db.c_"}
"""Scenario name prefix, and what names its tables: unqualified in the session catalog, ``ice.db`` in the
other."""


def _statements(statements: tuple[str, ...], table_prefix: str) -> Scenario:
    def run(spark: Any, workspace: Workspace) -> None:
        for statement in statements:
            spark.sql(statement.format(t=table_prefix))

    return run


ICEBERG_SESSION_SCENARIOS.update(
    {
        f"{catalog}_{name}": _statements(statements, table_prefix)
        for catalog, table_prefix in CATALOGS.items()
        for name, statements in STATEMENTS.items()
    }
)
