"""What the RDD job listener costs jobs of many small tasks, measured side by side.

    python benchmarks/rdd_jobs.py [--jobs 10] [--tasks 1000] [--rounds 5]

The listener that reports jobs on RDDs alone is filtered in the JVM: Spark calls it for every task start and
end, and it must cost those next to nothing (the budget is 3 %). Each measurement is a fresh process running
``--jobs`` RDD jobs of ``--tasks`` tiny tasks each (a ``count`` of a parallelized collection, run in the JVM so
that Python workers add no noise), after a warm-up; the wall time from the first measured job until
``spark.stop()`` has returned is reported. Three sides alternate:

- ``on``: lineage on, with the RDD job listener;
- ``on_rdd_disabled``: lineage on, with ``spark.openlineage.filter.rddEventsDisabled=true`` (the job listener,
  which also serves SQL executions' jobs, then passes no RDD job to Python): the ratio ``on / on_rdd_disabled``
  is what passing RDD jobs on costs, no longer the listener's whole cost;
- ``off``: no lineage.

Job wall times on a shared 2-core machine drift by more than the 3 % budget, so a last process (lineage on)
also reads how long Spark's listener bus spent in the job listener (Spark's own per-listener timer): the
events it was handed, and its time per event and in all.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _sidebyside import alternate, child_arguments, report, run_as_child
from _spark import local_session

MODES = ("on", "on_rdd_disabled", "off")
LISTENER_NAME = "spark_lineage job listener"


def run_job(mode: str, jobs: int, tasks: int, url: str, workdir: Path, timed: dict[str, Any] | None = None) -> float:
    """The measured jobs, in this process: seconds from the first measured job to ``stop()``. ``timed``, when
    given, receives what Spark's listener bus timed of the job listener."""
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
    if timed is not None:
        timed.update(_listener_timer(spark))
    spark.stop()
    return time.perf_counter() - started


def _listener_timer(spark: Any) -> dict[str, Any]:
    """Events the job listener handled and the time Spark's listener bus spent in it (its Codahale timer:
    count, and mean over its recent-biased sample, in nanoseconds)."""
    bus = spark.sparkContext._jsc.sc().listenerBus()
    bus.waitUntilEmpty(60_000)
    listeners = bus.listeners()
    for index in range(listeners.size()):
        listener = listeners.get(index)
        if str(listener.toString()) == LISTENER_NAME:
            timer = bus.metrics().getTimerForListenerClass(listener.getClass()).get()
            count, mean_ns = int(timer.getCount()), float(timer.getSnapshot().getMean())
            return {"events": count, "mean_us": mean_ns / 1000, "total_ms": count * mean_ns / 1e6}
    return {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=10)
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5, help="processes per side")
    parser.add_argument("--timed", action="store_true", help=argparse.SUPPRESS)
    child_arguments(parser, MODES)
    args = parser.parse_args()
    if args.timed:
        timed: dict[str, Any] = {}
        seconds = run_job("on", args.jobs, args.tasks, args.url, Path(args.workdir), timed)
        print(json.dumps({"seconds": seconds, **timed}))
        return
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
    timed = _timed_run(args.jobs, args.tasks)
    if timed:
        share = timed["total_ms"] / 1000 / timed["seconds"]
        print(
            f"job listener, lineage on: {timed['events']} events handled in the JVM, {timed['mean_us']:.2f} us each, "
            f"{timed['total_ms']:.1f} ms in all on the listener bus thread = {share:.2%} of the job's wall time"
        )


def _timed_run(jobs: int, tasks: int) -> dict[str, Any]:
    """One more process with lineage on that reports Spark's timer of the job listener."""
    import tempfile

    from _sidebyside import start_backend

    server = start_backend()
    try:
        with tempfile.TemporaryDirectory() as workdir:
            command = [sys.executable, __file__, "--timed", "--jobs", str(jobs), "--tasks", str(tasks)]
            command += ["--url", f"http://127.0.0.1:{server.server_address[1]}", "--workdir", workdir]
            result = subprocess.run(command, capture_output=True, text=True, check=True)
    finally:
        server.shutdown()
    timed: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return timed if "events" in timed else {}


if __name__ == "__main__":
    main()
