"""What lineage costs per query in CPU, stage by stage, against a budget: the driver's Python process, the JVM,
and JVM round trips.

    python benchmarks/cpu_per_query.py [--queries 40] [--rounds 3] [--deep 8] [--transport file|http]

1. The job: ``--queries`` queries that each read two parquet inputs, join them, take the ``distinct()`` rows
   and write parquet, then ``spark.stop()``, after a warm-up of 5. Fresh processes, lineage off and on in
   turn, ``--rounds`` of each; with lineage on, every event is spooled on disk and sent with the file
   transport (as issue 23 measured), or with ``--transport http`` over HTTP to a backend on loopback. Measured
   over the queries and ``spark.stop()`` (the shutdown flush included):

   - the driver's Python CPU per query, from ``resource.getrusage`` (both sides: the difference is lineage's);
   - that CPU by stage (:mod:`spark_lineage.costs`: each stage's thread CPU time, nested stages apart), with
     the calls and the JVM round trips (:mod:`spark_lineage.jvm.round_trips`) of each stage;
   - the Python garbage collections each side runs, and their CPU (lineage's objects make them more frequent),
     and the CPU ``enable()`` takes once (imports, set-up, one full collection);
   - the JVM's CPU per query, from ``/proc``, both sides, and lineage's share of it by JVM thread: the
     listener bus (our listeners' filters, and their calls into Python), the threads that answer our Python
     threads' calls (py4j), and what no Java thread shows (GC, JIT compilers);
   - how steady the machine was: a fixed pure-Python loop's CPU before and after each job's queries (a shared
     VM's speed changes by a factor of two within minutes, and every figure with it).

2. Capture and analysis at about 600 plan nodes: ``--deep`` queries of a deep plan (chains of ``sample`` and
   projections, ``benchmarks/per_query.py``'s query), one at a time, in one process: the median CPU per query
   of the capture, analysis and column lineage stages, and the capture's round trips.

Each figure is printed with its budget (issue 23): Python CPU per query <= 5 ms at about 20 plan nodes with
column lineage, RUNNING events and the spool on; capture and analysis <= 5 ms at 20 nodes and <= 100 ms at
600; at most 5 JVM round trips per query.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _sidebyside import alternate, child_arguments, run_as_child
from _spark import local_session
from _stages import measuring_stages, print_stage_table
from per_query import build_query, deep_plan_session

from spark_lineage import costs
from spark_lineage.costs import Stage
from spark_lineage.jvm import round_trips

PYTHON_MS_BUDGET = 5.0
CAPTURE_ANALYSIS_MS_BUDGET = {20: 5.0, 600: 100.0}
ROUND_TRIPS_BUDGET = 5
ANALYSIS_STAGES = (Stage.CAPTURE, Stage.ANALYSIS, Stage.COLUMN_LINEAGE)
JAVA_GROUPS = (
    ("listener bus", ("spark-listener-group-",)),
    ("Spark's tasks", ("Executor task launch worker", "Executor task idle worker")),
)
ANSWERING = "py4j, answering the analysis thread"


def _jvm_threads(spark: Any) -> tuple[int, dict[int, tuple[str, int]]]:
    """The JVM process's CPU nanoseconds, and each live Java thread's name and CPU nanoseconds."""
    jvm = spark.sparkContext._jvm
    pid = int(jvm.java.lang.ProcessHandle.current().pid())
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    process_ns = ticks * 1_000_000_000 // os.sysconf("SC_CLK_TCK")
    bean = jvm.java.lang.management.ManagementFactory.getThreadMXBean()
    threads = {}
    for info in bean.dumpAllThreads(False, False):
        thread_id = int(info.getThreadId())
        threads[thread_id] = (str(info.getThreadName()), max(int(bean.getThreadCpuTime(thread_id)), 0))
    return process_ns, threads


def _vm_times(spark: Any) -> dict[str, int]:
    """Milliseconds the JVM has spent collecting garbage (wall time of its collectors) and compiling (JIT)."""
    management = spark.sparkContext._jvm.java.lang.management.ManagementFactory
    beans = management.getGarbageCollectorMXBeans()
    gc_ms = sum(max(int(beans.get(index).getCollectionTime()), 0) for index in range(beans.size()))
    return {"GC": gc_ms, "JIT compiling": int(management.getCompilationMXBean().getTotalCompilationTime())}


def _by_group(
    before: dict[int, tuple[str, int]], after: dict[int, tuple[str, int]], answering: int | None
) -> dict[str, int]:
    """CPU spent per group of Java threads; ``answering``: the thread that answers the analysis thread's calls
    (py4j pins a JVM thread to each Python thread)."""
    groups = {name: 0 for name, _ in JAVA_GROUPS} | {ANSWERING: 0, "other Java threads": 0}
    for thread_id, (name, cpu) in after.items():
        spent = cpu - before.get(thread_id, (name, 0))[1]
        if thread_id == answering:
            group = ANSWERING
        else:
            group = next((g for g, prefixes in JAVA_GROUPS if name.startswith(prefixes)), "other Java threads")
        groups[group] += spent
    return groups


def _answering_thread(spark: Any, handle: Any) -> int | None:
    """The id of the JVM thread that answers the analysis thread: asked from that thread (the runtime's
    analysis worker runs what is callable in its queue)."""
    if handle is None:
        return None
    found: list[int] = []
    thread = spark.sparkContext._jvm.java.lang.Thread
    handle._runtime.analysis_worker.submit(lambda: found.append(int(thread.currentThread().getId())))
    handle.flush(60)
    return found[0] if found else None


class _Collections:
    """The CPU the Python process's garbage collections take, by generation, while counting."""

    def __init__(self) -> None:
        self.counting = False
        self.cpu_ns = [0, 0, 0]
        self.runs = [0, 0, 0]
        self._started: dict[int, int] = {}
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        key = threading.get_ident()
        if phase == "start":
            self._started[key] = time.thread_time_ns()
            return
        started = self._started.pop(key, None)
        if self.counting and started is not None:
            self.cpu_ns[info["generation"]] += time.thread_time_ns() - started
            self.runs[info["generation"]] += 1


def _fixed_loop_ms() -> float:
    """The thread CPU a fixed pure-Python loop takes, best of three: how fast this machine runs Python just now
    (on a shared VM it changes by a factor of two within minutes, and every figure with it)."""
    best = float("inf")
    for _ in range(3):
        started = time.thread_time_ns()
        total = 0
        for value in range(300_000):
            total += value
        best = min(best, (time.thread_time_ns() - started) / 1e6)
    return best


def _write_inputs(spark: Any, workdir: Path) -> list[str]:
    paths = []
    for index in range(2):
        path = workdir / f"input_{index}"
        spark.range(2000).selectExpr("id % 50 AS k", f"id % {7 + index} AS v{index}").write.parquet(str(path))
        paths.append(str(path))
    return paths


def run_job(mode: str, queries: int, url: str, workdir: Path, transport: str) -> dict[str, Any]:
    """The measured job, in this process."""
    collections = _Collections()
    spark = local_session("CPU per query", **{"spark.sql.shuffle.partitions": "2"})
    inputs = _write_inputs(spark, workdir)
    handle = None
    enable_ns = 0
    if mode == "on":
        enable_started = time.thread_time_ns()
        import spark_lineage

        settings = (
            {"type": "http", "url": url}
            if transport == "http"
            else {"type": "file", "location": str(workdir / "events.jsonl"), "append": True}
        )
        handle = spark_lineage.enable(spark, transport=settings, python={"spool": {"dir": str(workdir / "spool")}})
        enable_ns = time.thread_time_ns() - enable_started

    def query(index: int) -> None:
        left, right = spark.read.parquet(inputs[0]), spark.read.parquet(inputs[1])
        left.join(right, "k").distinct().write.mode("overwrite").parquet(str(workdir / f"out_{index}"))

    for index in range(5):  # warm-up: JIT, class loading, first-query costs
        query(index)
    answering = _answering_thread(spark, handle)
    plan = spark.read.parquet(inputs[0]).join(spark.read.parquet(inputs[1]), "k").distinct()
    plan_nodes = len(str(plan._jdf.queryExecution().optimizedPlan().treeString()).splitlines())
    collections.counting = True
    result: dict[str, Any] = {}
    with measuring_stages(result):
        jvm_before, threads_before = _jvm_threads(spark)
        vm_before = _vm_times(spark)
        loop_before = _fixed_loop_ms()
        usage = resource.getrusage(resource.RUSAGE_SELF)
        started = time.perf_counter()
        for index in range(queries):
            query(index)
        # Spark's threads end with the context: their CPU is read before it stops.
        _, threads_after = _jvm_threads(spark)
        vm_after = _vm_times(spark)
        spark.stop()
        seconds = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_SELF)
        loop_after = _fixed_loop_ms()
    collections.counting = False
    jvm_after, _ = _jvm_threads(spark)
    groups = _by_group(threads_before, threads_after, answering)
    groups["no Java thread (GC, JIT), and stop()"] = (jvm_after - jvm_before) - sum(groups.values())
    return result | {
        "seconds": seconds,
        "python_cpu_s": (after.ru_utime + after.ru_stime) - (usage.ru_utime + usage.ru_stime),
        "jvm_cpu_ns": jvm_after - jvm_before,
        "jvm_groups_ns": groups,
        "vm_ms": {key: vm_after[key] - vm_before[key] for key in vm_after},
        "plan_nodes": plan_nodes,
        "gc_cpu_ns": collections.cpu_ns,
        "gc_runs": collections.runs,
        "enable_cpu_ns": enable_ns,
        "fixed_loop_ms": [loop_before, loop_after],
    }


def deep_queries(count: int) -> tuple[float, list[float], list[int]]:
    """Capture, analysis and column lineage CPU per query, and the capture's round trips, at about 600 nodes."""
    import spark_lineage

    workdir = Path(tempfile.mkdtemp(prefix="spark-lineage-bench-"))
    spark, inputs = deep_plan_session("CPU per query, deep plans", workdir)
    handle = spark_lineage.enable(spark, transport={"type": "noop"})
    frame = build_query(spark, inputs, 296)
    nodes = len(str(frame._jdf.queryExecution().optimizedPlan().treeString()).splitlines())
    cpu_ms, trips = [], []
    with round_trips.counting():
        for index in range(3 + count):
            before = costs.snapshot()
            frame.write.mode("overwrite").parquet(str(workdir / f"out_{index}"))
            handle.flush(300)  # one query at a time: its capture does not compete with the next query
            spent = costs.since(before)
            if index >= 3:  # after a warm-up
                cpu_ms.append(sum(spent[s].cpu_ns for s in ANALYSIS_STAGES) / 1e6)
                trips.append(spent[Stage.CAPTURE].round_trips)
    handle.disable()
    spark.stop()
    shutil.rmtree(workdir, ignore_errors=True)
    return nodes, cpu_ms, trips


STEADY_SPREAD = 1.2
"""How much slower the fixed loop may run at its slowest than at its fastest over a run's jobs, for the run's
figures to be read as lineage's (beyond it, the machine's own changes of speed are larger than the budget's
margins)."""


def _print_steadiness(runs: list[dict[str, Any]]) -> None:
    """How fast the machine ran Python around each job: a fixed loop's CPU before and after the measured queries."""
    loops = [ms for run in runs for ms in run["fixed_loop_ms"]]
    spread = max(loops) / min(loops)
    verdict = "steady" if spread <= STEADY_SPREAD else "NOT steady: the figures above carry the machine's changes"
    print(
        f"   a fixed Python loop, before and after each job's queries: {min(loops):.1f} to {max(loops):.1f} ms "
        f"CPU ({spread:.2f}x; {verdict})"
    )


def _verdict(value: float, budget: float) -> str:
    return f"(budget <= {budget:g}: {'within' if value <= budget else 'OVER'})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3, help="processes per side")
    parser.add_argument("--deep", type=int, default=8, help="deep-plan queries measured (0: skip section 2)")
    parser.add_argument("--transport", choices=("file", "http"), default="file")
    child_arguments(parser, ("on", "off"))
    args = parser.parse_args()
    if run_as_child(args, lambda mode, url, workdir: run_job(mode, args.queries, url, workdir, args.transport)):
        return

    details: dict[str, list[dict[str, Any]]] = {}
    alternate(
        args.rounds,
        lambda mode, url, workdir: [
            __file__,
            *("--child", mode, "--queries", str(args.queries), "--url", url, "--workdir", workdir),
            *("--transport", args.transport),
        ],
        details=details,
        describe=lambda last: f", Python CPU {last['python_cpu_s']:.2f} s, JVM CPU {last['jvm_cpu_ns'] / 1e9:.2f} s",
    )
    n = args.queries
    on, off = details["on"], details["off"]

    def per_query_ms(runs: list[dict[str, Any]], value: Any) -> float:
        return statistics.median(value(run) for run in runs) / n * 1000

    nodes = on[0]["plan_nodes"]
    print(
        f"\n1. {n} queries per job (read two parquet inputs, join, distinct, write parquet; {nodes} plan nodes), "
        f"{args.transport} transport"
    )
    print(f"   medians of {args.rounds} jobs per side, per query\n")
    stage_ms = print_stage_table(on, n, "query", indent="   ")
    staged = sum(stage_ms.values())
    python_on = per_query_ms(on, lambda run: run["python_cpu_s"])
    python_off = per_query_ms(off, lambda run: run["python_cpu_s"])
    added = python_on - python_off
    print(f"   {'outside any stage (py4j, GC, …)':<34} {added - staged:>8.3f}")
    print()
    print(f"   driver Python CPU: on {python_on:.2f} ms, off {python_off:.2f} ms per query")
    print(f"   lineage's Python CPU per query: {added:.2f} ms {_verdict(added, PYTHON_MS_BUDGET)}")
    analysis_ms = sum(stage_ms[s] for s in ANALYSIS_STAGES)
    print(
        f"   capture and analysis per query at {nodes} nodes: {analysis_ms:.2f} ms "
        f"{_verdict(analysis_ms, CAPTURE_ANALYSIS_MS_BUDGET[20])}"
    )
    capture_trips = statistics.median(run["stages"][Stage.CAPTURE.name][2] for run in on) / n
    all_trips = statistics.median(sum(v[2] for v in run["stages"].values()) for run in on) / n
    print(
        f"   JVM round trips per query: {all_trips:.1f} ({capture_trips:.1f} in the capture) "
        f"{_verdict(all_trips, ROUND_TRIPS_BUDGET)}"
    )
    callbacks = statistics.median(
        run["stages"][Stage.LISTENER.name][1] + run["stages"][Stage.JOB_LISTENER.name][1] for run in on
    )
    print(f"   calls from the JVM into Python per query (listeners): {callbacks / n:.1f}")
    for generation in range(3):
        gc_on = per_query_ms(on, lambda run, g=generation: run["gc_cpu_ns"][g] / 1e9)
        gc_off = per_query_ms(off, lambda run, g=generation: run["gc_cpu_ns"][g] / 1e9)
        runs_on = statistics.median(run["gc_runs"][generation] for run in on)
        runs_off = statistics.median(run["gc_runs"][generation] for run in off)
        print(
            f"   Python garbage collections, generation {generation}: on {runs_on:.0f} ({gc_on:.3f} ms/query), "
            f"off {runs_off:.0f} ({gc_off:.3f} ms/query)"
        )
    enable_ms = statistics.median(run["enable_cpu_ns"] for run in on) / 1e6
    print(f"   enable(), once per job (imports, set-up, one full garbage collection): {enable_ms:.0f} ms CPU")
    jvm_on = per_query_ms(on, lambda run: run["jvm_cpu_ns"] / 1e9)
    jvm_off = per_query_ms(off, lambda run: run["jvm_cpu_ns"] / 1e9)
    print(f"   JVM CPU: on {jvm_on:.1f} ms, off {jvm_off:.1f} ms per query: lineage adds {jvm_on - jvm_off:.1f} ms")
    for group in on[0]["jvm_groups_ns"]:
        group_on = per_query_ms(on, lambda run, g=group: run["jvm_groups_ns"][g] / 1e9)
        group_off = per_query_ms(off, lambda run, g=group: run["jvm_groups_ns"][g] / 1e9)
        print(f"     {group:<38} on {group_on:7.2f}  off {group_off:7.2f}  added {group_on - group_off:7.2f}")
    for what in on[0]["vm_ms"]:
        vm_on = per_query_ms(on, lambda run, w=what: run["vm_ms"][w] / 1000)
        vm_off = per_query_ms(off, lambda run, w=what: run["vm_ms"][w] / 1000)
        print(f"     {what + ' (wall ms)':<38} on {vm_on:7.2f}  off {vm_off:7.2f}  added {vm_on - vm_off:7.2f}")
    wall_on = statistics.median(run["seconds"] for run in on)
    wall_off = statistics.median(run["seconds"] for run in off)
    print(f"   job wall time: on {wall_on:.2f} s, off {wall_off:.2f} s (ratio {wall_on / wall_off:.3f})")
    _print_steadiness(on + off)

    if args.deep:
        deep_nodes, cpu_ms, deep_trips = deep_queries(args.deep)
        median_ms = statistics.median(cpu_ms)
        print(f"\n2. capture and analysis at {deep_nodes:.0f} plan nodes, median of {args.deep} queries")
        print(
            f"   capture, analysis and column lineage: {median_ms:.1f} ms CPU per query "
            f"{_verdict(median_ms, CAPTURE_ANALYSIS_MS_BUDGET[600])}"
        )
        trips_median = statistics.median(deep_trips)
        print(f"   round trips in the capture: {trips_median:.0f} {_verdict(trips_median, ROUND_TRIPS_BUDGET)}")


if __name__ == "__main__":
    main()
