"""Per-query cost of lineage, column lineage included: capture and analysis time, and JVM round trips, by plan
size.

    python benchmarks/per_query.py [--repeat 15]

Each query joins two parquet inputs, computes a few columns and writes one parquet output. Plan size is varied
with chains of ``sample`` and projection nodes (the optimizer keeps each pair), to about 20, 100 and 600
logical plan nodes. Capture is what the py4j edge does on the analysis thread (read the whole plan, probe its
leaves and root); analysis is the pure-Python part (datasets, then column lineage). Round trips are py4j
commands sent from the analysis thread while it captures, py4j's object releases included. All of it runs on
spark_lineage's analysis thread, never on Spark's listener thread.
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

TARGETS_MS = {20: 10.0, 600: 250.0}
"""Budgets for capture + analysis at about this many plan nodes."""


class Timer:
    """Times capture and analysis, and counts py4j commands sent from the capturing thread."""

    def __init__(self, gateway_client: Any) -> None:
        self.capture_s: list[float] = []
        self.analysis_s: list[float] = []
        self.round_trips: list[int] = []
        self.plan_nodes: list[int] = []
        self.column_fields: list[int] = []
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
            lineage = original_analyze(*args, **kwargs)
            self.analysis_s.append(time.perf_counter() - started)
            self.column_fields.append(sum(len(o.column_lineage.fields) for o in lineage.outputs if o.column_lineage))
            return lineage

        JvmBridge.capture = capture  # type: ignore[method-assign]
        analysis.analyze = analyze

    def reset(self) -> None:
        for series in (self.capture_s, self.analysis_s, self.round_trips, self.plan_nodes, self.column_fields):
            series.clear()


def build_query(spark: Any, inputs: list[Path], steps: int) -> Any:
    left = spark.read.parquet(str(inputs[0]))
    right = spark.read.parquet(str(inputs[1])).withColumnRenamed("v", "w")
    frame = left.join(right, "k").selectExpr("k", "v + w AS s", "upper(cast(v AS string)) AS label", "w")
    for step in range(steps):
        frame = frame.sample(fraction=0.999, seed=step).selectExpr("k", f"s + {step} AS s", "label", "w")
    return frame.where("s > 0")


def deep_plan_session(name: str, workdir: Path) -> tuple[Any, list[Path]]:
    """A local session able to run plans of hundreds of nodes, and the two small parquet inputs
    :func:`build_query` joins, written under ``workdir``."""
    # Hundreds of chained operators overflow the default JVM stack in code generation and task
    # serialization: interpret them, and give threads a deeper stack.
    spark = local_session(
        name,
        master="local[1]",
        **{"spark.sql.codegen.wholeStage": "false", "spark.driver.extraJavaOptions": "-Xss64m"},
    )
    inputs = []
    for index in range(2):
        path = workdir / f"input_{index}"
        spark.range(20).selectExpr("id % 5 AS k", "id AS v").write.parquet(str(path))
        inputs.append(path)
    return spark, inputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=15, help="queries measured per row (median reported)")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="spark-lineage-bench-"))
    spark, inputs = deep_plan_session("per query benchmark", workdir)

    handle = spark_lineage.enable(spark, transport={"type": "noop"})
    timer = Timer(spark.sparkContext._gateway._gateway_client)
    results = []
    for steps in (6, 46, 296):
        frame = build_query(spark, inputs, steps)
        for warmup in range(10 if not results else 3):
            frame.write.mode("overwrite").parquet(str(workdir / f"warm_{warmup}"))
        handle.flush(120)
        timer.reset()
        for index in range(args.repeat):
            frame.write.mode("overwrite").parquet(str(workdir / f"out_{index}"))
            handle.flush(300)  # one query at a time: its capture does not compete with the next query
        capture_ms = statistics.median(timer.capture_s) * 1000
        analysis_ms = statistics.median(timer.analysis_s) * 1000
        results.append(
            (
                statistics.median(timer.plan_nodes),
                capture_ms,
                analysis_ms,
                capture_ms + analysis_ms,
                statistics.median(timer.round_trips),
                statistics.median(timer.column_fields),
            )
        )
    handle.disable()
    spark.stop()
    shutil.rmtree(workdir, ignore_errors=True)

    print(f"Per-query lineage cost with column lineage, median of {args.repeat} queries each")
    print("plan nodes  capture ms  analysis ms  total ms  round trips  columns")
    for nodes, capture_ms, analysis_ms, total_ms, trips, columns in results:
        figures = f"{capture_ms:>11.2f} {analysis_ms:>12.2f} {total_ms:>9.2f} {trips:>12.0f} {columns:>8.0f}"
        print(f"{nodes:>10.0f} {figures}")
    for row, (size, budget) in zip((results[0], results[-1]), TARGETS_MS.items()):
        nodes, total_ms = row[0], row[3]
        verdict = "within" if total_ms <= budget else "OVER"
        print(f"about {size} nodes ({nodes:.0f}): {total_ms:.1f} ms, {verdict} the {budget:.0f} ms budget")


if __name__ == "__main__":
    main()
