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


def spark_line(pyspark_version: str) -> str:
    return ".".join(pyspark_version.split(".")[:2])


ICEBERG_RUNTIME_LINES = frozenset({"3.5", "4.0", "4.1"})
"""The Spark lines Iceberg ICEBERG_VERSION ships a Spark runtime for (none for 4.2 or 4.3 yet)."""


def iceberg_runtime(pyspark_version: str) -> str | None:
    """The Iceberg Spark runtime for a PySpark version, ``None`` where Iceberg has none for its line."""
    line = spark_line(pyspark_version)
    if line not in ICEBERG_RUNTIME_LINES:
        return None
    return f"org.apache.iceberg:iceberg-spark-runtime-{line}_{scala_version(pyspark_version)}:{ICEBERG_VERSION}"


SPARK_MODULE_VERSIONS = {"3.5.9": "3.5.7", "4.0.5": "4.0.2", "4.3.0": "4.2.0"}
"""Where Maven Central does not serve Spark's external modules (Avro, Kafka) for a PySpark release, the newest
release that it serves for both: of the same line where there is one (a patch release changes no API the
modules use), else of the line before (4.3.0 has none on Maven Central yet; 4.2.0's are built against the same
data source API)."""


def spark_module(artifact: str, pyspark_version: str) -> str:
    """One of Spark's external modules (``spark-avro``, ``spark-sql-kafka-0-10``) for a PySpark version."""
    version = SPARK_MODULE_VERSIONS.get(pyspark_version, pyspark_version)
    return f"org.apache.spark:{artifact}_{scala_version(pyspark_version)}:{version}"


KAFKA_MODULE_MISSING = frozenset({"4.0"})
"""Lines whose Kafka module cannot be loaded from Maven Central: it serves no 4.0 release of
``spark-token-provider-kafka-0-10``, which the module needs."""


def spark_kafka(pyspark_version: str) -> str | None:
    """Spark's Kafka source and sink, ``None`` where Maven Central cannot give it."""
    if spark_line(pyspark_version) in KAFKA_MODULE_MISSING:
        return None
    return spark_module("spark-sql-kafka-0-10", pyspark_version)


def spark_avro(pyspark_version: str) -> str:
    """Spark's Avro data source."""
    return spark_module("spark-avro", pyspark_version)


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


CONNECT_PLUGIN = "org.apache.spark.sql.connect.SparkConnectPlugin"
"""What makes a driver a Spark Connect server (``spark.plugins``)."""


def ships_spark_connect(pyspark_version: str) -> bool:
    """PySpark 4.x ships Spark Connect's server in its jars; 3.5's comes from Maven Central (connect-server and
    the tests' shared session add it), which the parity suite does not fetch for its two applications."""
    return not pyspark_version.startswith("3.")
