"""What the RDD job listener costs jobs of many small tasks, measured side by side.

    python benchmarks/rdd_jobs.py [--jobs 10] [--tasks 1000] [--rounds 5]

The listener that reports jobs on RDDs alone is filtered in the JVM: Spark calls it for every task start and
end, and it must cost those next to nothing (the budget is 3 %). Each measurement is a fresh process running
``--jobs`` RDD jobs of ``--tasks`` tiny tasks each (a ``count`` of a parallelized collection, run in the JVM so
that Python workers add no noise), after a warm-up; the wall time from the first measured job until
``spark.stop()`` has returned is reported. Three sides alternate:

- ``on``: lineage on, with the RDD job listener;
- ``on_rdd_disabled``: lineage on, with ``spark.openlineage.filter.rddEventsDisabled=true`` (no job listener):
  the ratio ``on / on_rdd_disabled`` is what the listener costs;
- ``off``: no lineage.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from _sidebyside import alternate, child_arguments, report, run_as_child
from _spark import local_session

MODES = ("on", "on_rdd_disabled", "off")


def run_job(mode: str, jobs: int, tasks: int, url: str, workdir: Path) -> float:
    spark = local_session("Rdd Jobs Benchmark")
    if mode != "off":
        import spark_lineage

        spark_lineage.enable(
            spark,
            transport={"type": "http", "url": url},
            python={"spool": {"dir": str(workdir / "spool")}},
            filter={"rddEventsDisabled": mode == "on_rdd_disabled"},
        )
    jsc = spark.sparkContext._jsc
    items = spark.sparkContext._jvm.java.util.ArrayList()
    for index in range(tasks):
        items.add(index)

    def job() -> None:
        jsc.parallelize(items, tasks).count()

    for _ in range(2):  # warm-up: JIT, class loading, first-job costs
        job()
    started = time.perf_counter()
    for _ in range(jobs):
        job()
    spark.stop()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=10)
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5, help="processes per side")
    child_arguments(parser, MODES)
    args = parser.parse_args()
    if run_as_child(args, lambda mode, url, workdir: run_job(mode, args.jobs, args.tasks, url, workdir)):
        return

    times, received = alternate(
        args.rounds,
        lambda mode, url, workdir: [
            __file__,
            *("--child", mode, "--jobs", str(args.jobs), "--tasks", str(args.tasks)),
            *("--url", url, "--workdir", workdir),
        ],
        modes=MODES,
    )
    print(f"\n{args.jobs} RDD jobs of {args.tasks} tasks per process, {args.rounds} processes per side")
    labels = {"on": "lineage on", "on_rdd_disabled": "on, rddEventsDisabled"}
    report(times, args.jobs, "job", target=1.05, labels=labels)
    listener = statistics.median(times["on"]) / statistics.median(times["on_rdd_disabled"])
    verdict = "within" if listener <= 1.03 else "OVER"
    print(f"ratio lineage on / on, rddEventsDisabled: {listener:.3f}   (the listener's cost: {verdict} the 3 % budget)")
    print(f"events received by the loopback backend: {received}")


if __name__ == "__main__":
    main()
