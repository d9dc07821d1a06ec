"""The JVM artifacts tests load through ``spark.jars.packages`` (Maven Central), in one place."""

from __future__ import annotations

ICEBERG_VERSION = "1.11.0"
SQLITE_JDBC_VERSION = "3.51.1.0"
POSTGRES_JDBC_VERSION = "42.7.14"
OPENLINEAGE_SPARK_VERSION = "1.53.0"
"""The reference agent the parity harness compares against."""


def scala_version(pyspark_version: str) -> str:
    """PyPI's pyspark 3.5 is built for Scala 2.12, 4.x for Scala 2.13."""
    return "2.12" if pyspark_version.startswith("3.") else "2.13"


def iceberg_runtime(pyspark_version: str) -> str:
    """The Iceberg Spark runtime for a PySpark version."""
    spark_line = ".".join(pyspark_version.split(".")[:2])
    return f"org.apache.iceberg:iceberg-spark-runtime-{spark_line}_{scala_version(pyspark_version)}:{ICEBERG_VERSION}"


def sqlite_jdbc() -> str:
    return f"org.xerial:sqlite-jdbc:{SQLITE_JDBC_VERSION}"


def postgres_jdbc() -> str:
    return f"org.postgresql:postgresql:{POSTGRES_JDBC_VERSION}"


def openlineage_spark(pyspark_version: str) -> str:
    return f"io.openlineage:openlineage-spark_{scala_version(pyspark_version)}:{OPENLINEAGE_SPARK_VERSION}"
