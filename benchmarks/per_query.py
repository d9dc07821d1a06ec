"""Per-query cost of lineage: capture and analysis time, and JVM round trips, by plan size and dataset count.

    python benchmarks/per_query.py [--repeat 15]

Each query writes one parquet output. Plan size is varied with chains of ``sample`` nodes over a single input
(the optimizer keeps each one), dataset count with joins of distinct inputs. Round trips are py4j commands
sent from the analysis thread while it captures the query, py4j's object releases included.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _spark import local_session

import spark_lineage
from spark_lineage import analysis
from spark_lineage.jvm import JvmBridge


class Probe:
    """Times capture and analysis, and counts py4j commands sent from the capturing thread."""

    def __init__(self, gateway_client: Any) -> None:
        self.capture_s: list[float] = []
        self.analysis_s: list[float] = []
        self.round_trips: list[int] = []
        self.plan_nodes: list[int] = []
        self._counting = threading.local()
        self._count = 0
        original_send = gateway_client.send_command

        def send_command(*args: Any, **kwargs: Any) -> Any:
            if getattr(self._counting, "on", False):
                self._count += 1
            return original_send(*args, **kwargs)

        gateway_client.send_command = send_command
        original_capture = JvmBridge.capture
        original_analyze = analysis.analyze

        def capture(bridge: JvmBridge, pending: Any, *args: Any, **kwargs: Any) -> Any:
            plan = pending.query_execution.optimizedPlan()  # outside the measured region
            self.plan_nodes.append(len(str(plan.treeString()).splitlines()))
            self._count = 0
            self._counting.on = True
            started = time.perf_counter()
            try:
                return original_capture(bridge, pending, *args, **kwargs)
            finally:
                self.capture_s.append(time.perf_counter() - started)
                self._counting.on = False
                self.round_trips.append(self._count)

        def analyze(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original_analyze(*args, **kwargs)
            finally:
                self.analysis_s.append(time.perf_counter() - started)

        JvmBridge.capture = capture  # type: ignore[method-assign]
        analysis.analyze = analyze

    def reset(self) -> None:
        for series in (self.capture_s, self.analysis_s, self.round_trips, self.plan_nodes):
            series.clear()


def build_query(spark: Any, inputs: list[Path], samples: int) -> Any:
    frame = spark.read.parquet(str(inputs[0]))
    for other in inputs[1:]:
        frame = frame.join(spark.read.parquet(str(other)).withColumnRenamed("v", f"v_{other.name}"), "k")
    for seed in range(samples):
        frame = frame.sample(fraction=0.999, seed=seed)
    return frame


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=15, help="queries measured per row (median reported)")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="spark-lineage-bench-"))
    # Hundreds of chained operators overflow the default JVM stack in code generation and task
    # serialization: interpret them, and give threads a deeper stack.
    spark = local_session(
        "per query benchmark",
        master="local[1]",
        **{"spark.sql.codegen.wholeStage": "false", "spark.driver.extraJavaOptions": "-Xss64m"},
    )
    inputs = []
    for index in range(8):
        path = workdir / f"input_{index}"
        spark.range(20).selectExpr("id % 5 AS k", "id AS v").write.parquet(str(path))
        inputs.append(path)

    handle = spark_lineage.enable(spark, transport={"type": "noop"})
    probe = Probe(spark.sparkContext._gateway._gateway_client)
    rows = [(1, 8), (1, 98), (1, 498), (2, 6), (4, 2), (8, 0)]
    results = []
    for datasets, samples in rows:
        frame = build_query(spark, inputs[:datasets], samples)
        for warmup in range(10 if not results else 3):
            frame.write.mode("overwrite").parquet(str(workdir / f"warm_{warmup}"))
        handle.flush(120)
        probe.reset()
        for index in range(args.repeat):
            frame.write.mode("overwrite").parquet(str(workdir / f"out_{index}"))
            handle.flush(300)  # one query at a time: its capture does not compete with the next query
        results.append(
            (
                statistics.median(probe.plan_nodes),
                datasets + 1,
                statistics.median(probe.capture_s) * 1000,
                statistics.median(probe.analysis_s) * 1000,
                statistics.median(probe.round_trips),
            )
        )
    handle.disable()
    spark.stop()
    shutil.rmtree(workdir, ignore_errors=True)

    print(f"Per-query lineage cost, median of {args.repeat} queries each (one parquet output per query)")
    print(f"{'plan nodes':>10} {'datasets':>9} {'capture ms':>11} {'analysis ms':>12} {'JVM round trips':>16}")
    for nodes, datasets, capture_ms, analysis_ms, trips in results:
        print(f"{nodes:>10.0f} {datasets:>9d} {capture_ms:>11.2f} {analysis_ms:>12.3f} {trips:>16.0f}")
    by_nodes = [r for r in results if r[1] == 2]
    print(
        f"round trips, 1 input: {by_nodes[0][4]:.0f} at {by_nodes[0][0]:.0f} nodes, "
        f"{by_nodes[-1][4]:.0f} at {by_nodes[-1][0]:.0f} nodes "
        f"(ratio {by_nodes[-1][4] / by_nodes[0][4]:.2f} for {by_nodes[-1][0] / by_nodes[0][0]:.0f}x the nodes)"
    )


if __name__ == "__main__":
    main()
