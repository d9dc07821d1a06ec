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


SPARK_KAFKA_VERSIONS = {"3.5.9": "3.5.7"}
"""Where Maven Central lacks Spark's Kafka module for a release (3.5.8 and 3.5.9 are not served), the newest
release of the same line that is: a patch release changes no API the module uses."""


def spark_kafka(pyspark_version: str) -> str:
    """Spark's Kafka source and sink, an external module of Spark's own release."""
    version = SPARK_KAFKA_VERSIONS.get(pyspark_version, pyspark_version)
    return f"org.apache.spark:spark-sql-kafka-0-10_{scala_version(pyspark_version)}:{version}"


SPARK_SHIPS = "org.xerial.snappy:snappy-java,org.slf4j:slf4j-api"
"""For ``spark.jars.excludes``: jars Spark itself ships, which the Kafka module asks for as dependencies. Ivy
fails on them where a local Maven repository holds their poms without their jars (Maven leaves them so)."""


def sqlite_jdbc() -> str:
    return f"org.xerial:sqlite-jdbc:{SQLITE_JDBC_VERSION}"


def postgres_jdbc() -> str:
    return f"org.postgresql:postgresql:{POSTGRES_JDBC_VERSION}"


def openlineage_spark(pyspark_version: str) -> str:
    return f"io.openlineage:openlineage-spark_{scala_version(pyspark_version)}:{OPENLINEAGE_SPARK_VERSION}"


DELTA_VERSIONS = {"3.5": "3.3.2", "4.0": "4.0.1", "4.1": "4.1.0"}
"""delta-spark for each PySpark line (PyPI and Maven Central alike): the release built for that Spark line.
Delta 3.3 is the last for Spark 3.5; 4.0.x is for Spark 4.0; 4.1.0 is the first built for Spark 4.1 (later
4.x releases are built for it too)."""


def spark_line(pyspark_version: str) -> str:
    return ".".join(pyspark_version.split(".")[:2])


def delta_version(pyspark_version: str) -> str | None:
    """The delta-spark release for a PySpark version, ``None`` where no Delta release supports its line."""
    return DELTA_VERSIONS.get(spark_line(pyspark_version))


def delta_spark(pyspark_version: str) -> str | None:
    """Delta's Spark jar on Maven Central: ``delta-spark_<scala>`` up to 4.0, ``delta-spark_<spark line>_<scala>``
    from Delta 4.1 on (the artifact names the Spark line it is built for)."""
    version = delta_version(pyspark_version)
    if version is None:
        return None
    line = spark_line(pyspark_version)
    artifact = f"delta-spark_{scala_version(pyspark_version)}"
    if not version.startswith(("2.", "3.", "4.0.")):
        artifact = f"delta-spark_{line}_{scala_version(pyspark_version)}"
    return f"io.delta:{artifact}:{version}"
