"""Job wall time with lineage on versus off, measured side by side.

    python benchmarks/overhead.py [--queries 60] [--rounds 5]

Workloads: ``parquet_writes`` (small parquet writes) and ``iceberg_appends_and_merges`` (alternating appends
and MERGE INTO on an Iceberg table; the Iceberg runtime comes from Maven Central through spark.jars.packages).

Each measurement is a fresh process running the same job: a warm-up, then ``--queries`` small write queries,
then ``spark.stop()``; the wall time from the first measured query until ``spark.stop()`` has returned is
reported (so lineage's shutdown flush is inside it). Processes alternate on, off, on, off, ... so that drift
in the machine's load hits both sides alike. With lineage on, events go over HTTP to a receiver on loopback.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from _sidebyside import alternate, report
from _spark import local_session

WORKLOADS = ("parquet_writes", "iceberg_appends_and_merges")
ICEBERG_RUNTIME = {"3.5": "iceberg-spark-runtime-3.5_2.12", "4.1": "iceberg-spark-runtime-4.1_2.13"}
ICEBERG_VERSION = "1.11.0"


def _iceberg_confs(workdir: Path) -> dict[str, str]:
    import pyspark

    runtime = ICEBERG_RUNTIME[".".join(pyspark.__version__.split(".")[:2])]
    return {
        "spark.jars.packages": f"org.apache.iceberg:{runtime}:{ICEBERG_VERSION}",
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.catalog.bench": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.bench.type": "hadoop",
        "spark.sql.catalog.bench.warehouse": str(workdir / "iceberg"),
    }


def run_job(mode: str, queries: int, url: str, workdir: Path, workload: str) -> float:
    """The measured job, in this process: returns seconds from the first measured query to stop()."""
    iceberg = workload == "iceberg_appends_and_merges"
    confs = {"spark.sql.shuffle.partitions": "2", **(_iceberg_confs(workdir) if iceberg else {})}
    spark = local_session("Overhead Benchmark", **confs)
    if iceberg:
        spark.sql("CREATE NAMESPACE bench.db")
        spark.sql("CREATE TABLE bench.db.facts (id BIGINT, bucket BIGINT, tag STRING) USING iceberg")
        spark.sql("CREATE TABLE bench.db.changes (id BIGINT, bucket BIGINT, tag STRING) USING iceberg")
        spark.sql("INSERT INTO bench.db.changes SELECT id, id % 7, 'changed' FROM range(0, 1000, 10)")
    if mode == "on":
        import spark_lineage

        spark_lineage.enable(spark, transport={"type": "http", "url": url})
    source = spark.range(1000).selectExpr("id", "id % 7 AS bucket", "uuid() AS tag")

    def query(index: int) -> None:
        if not iceberg:
            source.where(f"bucket != {index % 7}").write.mode("overwrite").parquet(str(workdir / f"out_{index}"))
        elif index % 2 == 0:
            source.where(f"bucket = {index % 7}").writeTo("bench.db.facts").append()
        else:
            spark.sql(
                "MERGE INTO bench.db.facts t USING bench.db.changes s ON t.id = s.id "
                "WHEN MATCHED THEN UPDATE SET tag = s.tag WHEN NOT MATCHED THEN INSERT *"
            )

    for index in range(5):  # warm-up: JIT, class loading, first-query costs
        query(index)
    started = time.perf_counter()
    for index in range(queries):
        query(index)
    spark.stop()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=5, help="processes per side")
    parser.add_argument("--workload", choices=WORKLOADS, default=WORKLOADS[0])
    parser.add_argument("--child", choices=("on", "off"), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        seconds = run_job(args.child, args.queries, args.url, Path(args.workdir), args.workload)
        print(json.dumps({"seconds": seconds}))
        return

    times, received = alternate(
        args.rounds,
        lambda mode, url, workdir: [
            __file__,
            "--child",
            mode,
            "--queries",
            str(args.queries),
            "--url",
            url,
            "--workdir",
            workdir,
            "--workload",
            args.workload,
        ],
    )
    print(f"\nworkload {args.workload}: {args.queries} write queries per job, {args.rounds} jobs per side")
    report(times, args.queries, "query", target=1.03)
    print(f"events received by the loopback backend: {received}")


if __name__ == "__main__":
    main()
