"""Run the parity scenarios in one Spark application, under openlineage-spark's jar (``--agent java``) or under
spark_lineage (``--agent python``), and write the events each scenario produced as JSON.

    python -m tests.parity.driver --agent java --base /tmp/parity --out java.json [--postgres URL] [--kafka HOST:PORT]

Both runs use the same paths, application name and namespace, so that their events compare as they are. A
scenario's events are those written between its start and the moment every listener has caught up with it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.hive_metastore import hive_metastore
from tests.jars import (
    SPARK_SHIPS,
    delta_spark,
    iceberg_runtime,
    openlineage_spark,
    postgres_jdbc,
    spark_kafka,
    sqlite_jdbc,
)
from tests.parity.connect_scenarios import CONNECT_SCENARIOS, connect_confs
from tests.parity.delta_scenarios import DELTA_SCENARIOS, delta_confs
from tests.parity.hive_scenarios import HIVE_SCENARIOS, hive_confs
from tests.parity.iceberg_session_scenarios import ICEBERG_SESSION_SCENARIOS, iceberg_session_confs
from tests.parity.scenarios import SCENARIOS, SERVICE_NEEDED, Workspace, prepare

APP_NAME = "parity"
NAMESPACE = "parity"
JAVA_LISTENER = "io.openlineage.spark.agent.OpenLineageSparkListener"
SUITES = {
    "main": SCENARIOS,
    "delta": DELTA_SCENARIOS,
    "hive": HIVE_SCENARIOS,
    "hive_metastore": HIVE_SCENARIOS,
    "iceberg_session": ICEBERG_SESSION_SCENARIOS,
    "connect": CONNECT_SCENARIOS,
}


def session(
    agent: str,
    workspace: Workspace,
    events_file: Path,
    suite: str = "main",
    metastore: str | None = None,
    confs: Mapping[str, str] | None = None,
) -> Any:
    """The Spark session a suite's scenarios run in, under ``agent``; ``confs``: more Spark confs (both agents
    read the ``spark.openlineage.*`` ones)."""
    import pyspark
    from pyspark.sql import SparkSession

    iceberg = iceberg_runtime(pyspark.__version__)
    optional = [iceberg, spark_kafka(pyspark.__version__)]
    packages = [sqlite_jdbc(), postgres_jdbc(), *filter(None, optional)]
    builder = (
        SparkSession.builder.master("local[1]")
        .appName(APP_NAME)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.warehouse.dir", str(workspace.base / "warehouse"))
    )
    suite_confs = (
        {}
        if iceberg is None
        else {
            "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
            "spark.sql.catalog.ice": "org.apache.iceberg.spark.SparkCatalog",
            "spark.sql.catalog.ice.type": "hadoop",
            "spark.sql.catalog.ice.warehouse": str(workspace.base / "ice"),
        }
    )
    if suite == "delta":  # Delta's application of its own: its extension and its catalog as spark_catalog
        packages, suite_confs = [str(delta_spark(pyspark.__version__))], delta_confs()
    if suite == "iceberg_session":  # Iceberg's SparkSessionCatalog as spark_catalog, beside the ice catalog
        suite_confs = iceberg_session_confs(workspace)
    if suite.startswith("hive"):  # Hive's application of its own: Hive support, its metastore embedded or not
        packages, suite_confs = [], hive_confs(workspace, metastore)
    if suite == "connect":  # a Spark Connect server, whose clients write files, tables, Iceberg and PostgreSQL
        packages, suite_confs = [postgres_jdbc()] + ([iceberg] if iceberg else []), connect_confs(workspace)
    for key, value in {**suite_confs, **(confs or {})}.items():
        builder = builder.config(key, value)
    if agent == "java":
        packages.append(openlineage_spark(pyspark.__version__))
        builder = (
            builder.config("spark.extraListeners", JAVA_LISTENER)
            .config("spark.openlineage.transport.type", "file")
            .config("spark.openlineage.transport.location", str(events_file))
            .config("spark.openlineage.namespace", NAMESPACE)
        )
    builder = builder.config("spark.jars.packages", ",".join(packages)).config("spark.jars.excludes", SPARK_SHIPS)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run(
    agent: str,
    workspace: Workspace,
    only: set[str] | None,
    suite: str = "main",
    ready: Path | None = None,
    confs: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    shutil.rmtree(workspace.base, ignore_errors=True)
    workspace.base.mkdir(parents=True)
    with contextlib.ExitStack() as services:
        metastore = None
        if suite == "hive_metastore":  # a metastore server of this run's own, so that each run starts empty
            metastore = services.enter_context(
                hive_metastore(workspace.base / "metastore", workspace.base / "warehouse")
            )
        return run_scenarios(agent, workspace, only, suite, metastore, ready, confs)


def run_scenarios(
    agent: str,
    workspace: Workspace,
    only: set[str] | None,
    suite: str,
    metastore: str | None,
    ready: Path | None,
    confs: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    events_file = workspace.base / "events.jsonl"
    spark = session(agent, workspace, events_file, suite, metastore, confs)
    if ready is not None:
        ready.touch()
    if suite != "connect":  # the Connect suite's clients read a file of their own, not these tables
        prepare(spark, workspace)
    handle = None
    if agent == "python":
        import spark_lineage

        handle = spark_lineage.enable(
            spark, namespace=NAMESPACE, transport={"type": "file", "location": str(events_file)}
        )

    def caught_up() -> list[str]:
        if handle is not None:
            handle.flush(120)
        else:
            spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(120_000)
        return events_file.read_text().splitlines() if events_file.exists() else []

    results: dict[str, Any] = {}
    for name, scenario in SUITES[suite].items():
        if (only and name not in only) or (name in SERVICE_NEEDED and not workspace.has(SERVICE_NEEDED[name])):
            continue
        before = len(caught_up())
        error = None
        try:
            scenario(spark, workspace)
        except Exception:  # noqa: BLE001 - recorded: the comparison says which agent could not run it
            error = traceback.format_exc(limit=3)
        lines = caught_up()[before:]
        results[name] = {"events": [json.loads(line) for line in lines if line.strip()], "error": error}
    if handle is not None:
        handle.disable(timeout=60)
    spark.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agent", choices=("java", "python"), required=True)
    parser.add_argument("--base", type=Path, required=True, help="working directory (emptied first)")
    parser.add_argument("--out", type=Path, required=True, help="where the events go, as JSON")
    parser.add_argument("--postgres", help="a PostgreSQL JDBC URL with the scenario tables")
    parser.add_argument("--kafka", help="a Kafka broker's bootstrap server")
    parser.add_argument("--only", help="comma-separated scenario names")
    parser.add_argument("--ready", type=Path, help="a file to create once the Spark session is up")
    parser.add_argument("--conf", action="append", default=[], help="KEY=VALUE: a Spark conf for both agents")
    parser.add_argument(
        "--suite",
        choices=tuple(SUITES),
        default="main",
        help="delta, hive, iceberg_session, connect: those scenarios; hive_metastore: Hive's through a metastore "
        "server",
    )
    args = parser.parse_args()
    import pyspark

    iceberg = iceberg_runtime(pyspark.__version__) is not None
    workspace = Workspace(args.base.resolve(), args.postgres, args.kafka, iceberg)
    only = set(args.only.split(",")) if args.only else None
    confs = dict(conf.split("=", 1) for conf in args.conf)
    result = run(args.agent, workspace, only, args.suite, args.ready, confs)
    args.out.write_text(json.dumps(result, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
