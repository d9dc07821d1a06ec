"""Micro-batch duration of a Structured Streaming query with lineage on versus off, measured side by side.

    python benchmarks/streaming.py [--batches 60] [--rounds 5]

Each measurement is a fresh process running one streaming query: JSON files to parquet, one file per
micro-batch (``maxFilesPerTrigger=1``, ``availableNow``), so the query runs ``--batches`` micro-batches plus a
warm-up of 5. The figure is the measured batches' median duration as Spark reports it (``triggerExecution``),
times their number: what lineage costs the stream's own thread (the listener callbacks, the worker's reads and
sends competing for the driver's cores) is inside it, start-up is not, and a batch stalled by another process
on a busy machine does not swing it. With lineage
on, every query and micro-batch event is spooled on disk and sent over HTTP to a receiver on loopback.
Processes alternate on, off, off, on, ... so that drift in the machine's load hits both sides alike.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from _sidebyside import alternate, report
from _spark import local_session

WARM_UP_BATCHES = 5


def run_job(mode: str, batches: int, url: str, workdir: Path) -> float:
    """The measured stream, in this process: returns the seconds its measured micro-batches took."""
    source = workdir / "incoming"
    source.mkdir()
    for index in range(batches + WARM_UP_BATCHES):
        rows = (json.dumps({"id": index * 100 + i, "tag": f"t{i % 7}"}) for i in range(100))
        (source / f"part-{index:04d}.json").write_text("\n".join(rows) + "\n")
    spark = local_session("Streaming Benchmark", **{"spark.sql.shuffle.partitions": "2"})
    if mode == "on":
        import spark_lineage

        spark_lineage.enable(
            spark, transport={"type": "http", "url": url}, python={"spool": {"dir": str(workdir / "spool")}}
        )
    query = (
        spark.readStream.schema("id long, tag string")
        .option("maxFilesPerTrigger", 1)
        .json(str(source))
        .selectExpr("id", "upper(tag) AS tag")
        .writeStream.format("parquet")
        .option("path", str(workdir / "out"))
        .option("checkpointLocation", str(workdir / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    progress = [p for p in query.recentProgress if "addBatch" in p["durationMs"]]
    measured = [p["durationMs"]["triggerExecution"] for p in progress[WARM_UP_BATCHES:]]
    assert len(measured) == batches, f"expected {batches} measured batches, got {len(measured)}"
    spark.stop()
    return statistics.median(measured) * batches / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=60, help="measured micro-batches per job (at most 95)")
    parser.add_argument("--rounds", type=int, default=5, help="processes per side")
    parser.add_argument("--child", choices=("on", "off"), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        seconds = run_job(args.child, args.batches, args.url, Path(args.workdir))
        print(json.dumps({"seconds": seconds}))
        return

    def child_args(mode: str, url: str, workdir: str) -> list[str]:
        return [__file__, "--child", mode, "--batches", str(args.batches), "--url", url, "--workdir", workdir]

    times, received = alternate(args.rounds, child_args)
    print(f"\nfile-to-parquet stream: {args.batches} measured micro-batches per job, {args.rounds} jobs per side")
    report(times, args.batches, "micro-batch", target=1.05)
    print(f"events received by the loopback backend: {received}")


if __name__ == "__main__":
    main()
