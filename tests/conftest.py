from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spark_lineage.connect.server import connect_package, spark_jars_dir
from tests.jars import (
    CONNECT_PLUGIN,
    ICEBERG_VERSION,
    SPARK_SHIPS,
    iceberg_runtime,
    postgres_jdbc,
    spark_avro,
    spark_kafka,
    sqlite_jdbc,
)
from tests.kafka_server import Kafka, KafkaUnavailableError, check_available, kafka_server
from tests.postgres_server import Postgres, PostgresUnavailableError, binaries, postgres_server, run_sql
from tests.support import LineageReceiver, free_port


def installed_pyspark() -> str | None:
    try:
        from importlib.metadata import version

        return version("pyspark")
    except Exception:  # noqa: BLE001 - no PySpark here (the pyiceberg-only environment)
        return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``once`` run only on the PySpark line SPARK_LINEAGE_ONCE_ON names (scripts/test sets it to
    one line), and everywhere when it is not set. Tests marked ``iceberg`` are skipped on a PySpark line
    Iceberg ships no Spark runtime for."""
    current = installed_pyspark()
    skips = {}
    line = os.environ.get("SPARK_LINEAGE_ONCE_ON")
    if line and current != line:
        skips["once"] = pytest.mark.skip(reason=f"runs once per test run, on pyspark {line}")
    if current is not None and iceberg_runtime(current) is None:
        skips["iceberg"] = pytest.mark.skip(
            reason=f"Iceberg {ICEBERG_VERSION} has no Spark runtime for pyspark {current}"
        )
    for item in items:
        for keyword, skip in skips.items():
            if keyword in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("warehouse")


@pytest.fixture(scope="session")
def iceberg_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("iceberg")


@pytest.fixture(scope="session")
def spark(warehouse: Path, iceberg_dir: Path) -> Iterator[Any]:
    """One local Spark session for the whole run: starting a JVM costs seconds. Where Iceberg has a runtime for
    the PySpark line, it has two Iceberg catalogs: ``hcat`` (Hadoop) and ``jcat`` (JDBC on sqlite). It is a
    Spark Connect server too, on the port ``spark.connect.grpc.binding.port`` says
    (tests/integration/test_connect.py runs clients against it)."""
    pyspark = pytest.importorskip("pyspark")
    pyspark_sql = pytest.importorskip("pyspark.sql")
    iceberg = iceberg_runtime(pyspark.__version__)
    # Avro and Kafka are external Spark modules; Iceberg's runtime and the JDBC drivers come the same way.
    optional = [iceberg, spark_kafka(pyspark.__version__)]
    # Spark Connect's server: PySpark 4 ships it, 3.5's comes from Maven Central as connect-server adds it.
    optional.append(connect_package(pyspark.__version__, spark_jars_dir(os.environ), {}))
    packages = [spark_avro(pyspark.__version__), sqlite_jdbc(), postgres_jdbc(), *filter(None, optional)]
    iceberg_confs = {
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.catalog.hcat": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.hcat.type": "hadoop",
        "spark.sql.catalog.hcat.warehouse": str(iceberg_dir / "hadoop_warehouse"),
        "spark.sql.catalog.jcat": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.jcat.type": "jdbc",
        "spark.sql.catalog.jcat.uri": f"jdbc:sqlite:{iceberg_dir / 'catalog.db'}",
        "spark.sql.catalog.jcat.warehouse": str(iceberg_dir / "jdbc_warehouse"),
    }
    builder = (
        pyspark_sql.SparkSession.builder.master("local[2]")
        .appName("Lineage Tests")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.default.parallelism", "1")
        .config("spark.jars.packages", ",".join(packages))
        .config("spark.jars.excludes", SPARK_SHIPS)
    )
    if iceberg:
        for key, value in iceberg_confs.items():
            builder = builder.config(key, value)
    builder = builder.config("spark.plugins", CONNECT_PLUGIN).config(
        "spark.connect.grpc.binding.port", str(free_port())
    )
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


# Every test run, and every process it starts, spools its lineage events in a directory of its own.
os.environ["SPARK_LINEAGE_SPOOL_DIR"] = tempfile.mkdtemp(prefix="spark-lineage-test-spool-")
# Spark's Python workers run PYSPARK_PYTHON, else whatever `python3` is first on PATH, which may lack what a UDF
# needs (on Spark 4.3 a plain Python UDF imports pyarrow in the worker): the tests' own interpreter.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
# A shell without job control starts its background commands with SIGINT ignored, and a process started so
# passes that on to its children (scripts/test runs some tests in the background). Tests that interrupt a child
# with Ctrl-C need it at its default, as from a terminal: a Python handler here becomes the default in a child.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

POSTGRES_TABLES = """
CREATE TABLE public.orders (id INTEGER, cid INTEGER, amount DOUBLE PRECISION);
CREATE TABLE public.customers (id INTEGER, name TEXT);
INSERT INTO public.orders VALUES (1, 1, 10.5), (2, 2, 99.0), (3, 1, 5.0);
INSERT INTO public.customers VALUES (1, 'ann'), (2, 'bob');
"""


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres | None]:
    """A real PostgreSQL server on loopback for the whole run, with tables ``public.orders`` and
    ``public.customers``; ``None`` where PostgreSQL is not installed, unless SPARK_LINEAGE_REQUIRE_POSTGRES
    is set (scripts/test installs it and sets that), when its absence fails the run."""
    try:
        binaries()
    except PostgresUnavailableError:
        if os.environ.get("SPARK_LINEAGE_REQUIRE_POSTGRES"):
            raise
        yield None
        return
    with postgres_server() as server:
        run_sql(server, POSTGRES_TABLES)
        yield server


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kafka | None]:
    """A real Kafka broker (KRaft) on loopback for the whole run, started by the first test that asks for it;
    ``None`` where Java, Maven (for its jars) or confluent-kafka are missing, unless SPARK_LINEAGE_REQUIRE_KAFKA
    is set (scripts/test fetches the jars and sets that), when their absence fails the run."""
    try:
        check_available()
    except KafkaUnavailableError:
        if os.environ.get("SPARK_LINEAGE_REQUIRE_KAFKA"):
            raise
        yield None
        return
    with kafka_server(tmp_path_factory.mktemp("kafka")) as server:
        yield server


@pytest.fixture()
def receiver() -> Iterator[LineageReceiver]:
    server = LineageReceiver()
    yield server
    server.close()
    assert not server.invalid, "events that fail the OpenLineage schemas:\n" + "\n".join(server.invalid)


@pytest.fixture()
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    path.mkdir()
    (path / "people.csv").write_text("id,name,city\n1,ann,paris\n2,bob,oslo\n3,cy,paris\n")
    return path


@pytest.fixture()
def lineage(spark: Any, receiver: LineageReceiver) -> Iterator[Any]:
    """Lineage on for the test, sent over HTTP to ``receiver``; off again afterwards. One request at a time:
    these tests read the runs in the order they arrive, which several requests in flight keep only within each
    run (tests/unit/test_delivery_concurrency.py holds delivery with several to that)."""
    import spark_lineage

    handle = spark_lineage.enable(
        spark, transport={"type": "http", "url": receiver.url}, python={"delivery": {"concurrency": 1}}
    )
    yield handle
    handle.disable(timeout=30)


@pytest.fixture(autouse=True)
def _clean_tables(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "spark" in request.fixturenames:
        spark = request.getfixturevalue("spark")
        for table in spark.catalog.listTables():
            if table.tableType != "TEMPORARY":
                spark.sql(f"DROP TABLE IF EXISTS {table.name}")
            else:
                spark.catalog.dropTempView(table.name)
        spark.catalog.clearCache()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    shutil.rmtree("spark-warehouse", ignore_errors=True)
