"""A Spark Connect server's clients with lineage on versus off, side by side, and how soon each query's
COMPLETE event is in the spool.

    python benchmarks/connect.py [--clients 4] [--writes 25] [--warmup 3] [--rounds 5] [--threads] [--profile]

Each measurement is a fresh server process: a PySpark driver that is a Spark Connect server
(``spark.plugins=org.apache.spark.sql.connect.SparkConnectPlugin``, ``local[2]``), with lineage enabled on its
classic session (``spark_lineage.enable``) or not. It writes two small parquet inputs, then starts ``--clients``
Spark Connect clients, each a ``pyspark[connect]`` process of its own under its own user id. Each client runs
``--warmup`` writes, waits until every client is ready, then runs ``--writes`` joined writes one after the
other: read the two parquet inputs, join them, aggregate, compute columns and write parquet (column lineage has
work to do). The figure is the wall time from the server's "go" to the last client's last write returning.
Server processes alternate on, off, off, on, ... so that drift in the machine's load hits both sides alike.

With lineage on, every event is written to the durable spool (on disk, in the round's directory) and sent over
HTTP to a loopback backend. Beside the wall time, per server process:

- CPU time of the server, from "go" until the clients have ended their sessions and, with lineage on, every
  event is delivered (``handle.flush``): the Python driver (``getrusage``; its lineage threads apart, by thread
  CPU clock) and the JVM (``/proc/<pid>/stat``);
- lineage's Python CPU by stage, with the JVM round trips each makes (:mod:`spark_lineage.costs`, as
  ``cpu_per_query.py`` prints it), until every event is delivered;
- the drain: how long after the last write lineage took to have every event delivered;
- from each measured query's end (its COMPLETE's ``eventTime``: Spark's ``SQLExecutionEnd`` time) to the moment
  its COMPLETE was stored in the spool (``Spool.put_all`` returned), p50 and p95, and how many of them carry column
  lineage (a worker far behind reports queries without it: past ``python.columnLineage.budgetMillis``).

``--threads`` also shows which of the JVM's threads lineage keeps busy: CPU per query of each thread name (from
``/proc/<pid>/task``; threads that ended within the measurement are missed). ``--profile`` runs one more server
process with lineage on and cProfile on the analysis thread, and prints where that thread's time goes per
query, by stage. ``--clients 2 --writes 3 --rounds 1`` is a quick run (about a minute) that shows the benchmark
works; nothing runs it in CI, as no benchmark is run there.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import datetime as dt
import io
import json
import os
import pstats
import queue
import re
import resource
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from _sidebyside import alternate, child_arguments, report, run_as_child
from _spark import local_session
from _stages import measuring_stages, print_stage_table

from tests.jars import CONNECT_PLUGIN

TARGET_RATIO = 1.05
MEASURED_PREFIX = "w_"
"""Measured writes go to ``<out>/<user>/w_<index>``; warm-up writes to ``warm_<index>``."""


# --- a client, in a process of its own ------------------------------------------------------------------------


def joined_write(spark: Any, inputs: str, out: str, index: int) -> None:
    """Read the two inputs, join, aggregate, compute columns, write parquet."""
    from pyspark.sql import functions as f

    orders = spark.read.parquet(f"{inputs}/orders")
    customers = spark.read.parquet(f"{inputs}/customers")
    joined = orders.where(f"bucket != {index % 7}").join(customers, "customer_id")
    totals = joined.groupBy("region").agg(f.sum("amount").alias("total"), f.count("order_id").alias("orders"))
    totals.selectExpr("upper(region) AS region", "total * 2 AS twice", "orders").write.mode("overwrite").parquet(out)


def client(remote: str, inputs: str, out: str, writes: int, warmup: int) -> None:
    """Connect, warm up, say ``ready``, wait for a line on stdin, run the measured writes, print when they ended
    (and each write's seconds) as JSON, end the session."""
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(remote).getOrCreate()
    for index in range(warmup):
        joined_write(spark, inputs, f"{out}/warm_{index}", index)
    print("ready", flush=True)
    sys.stdin.readline()
    durations = []
    for index in range(writes):
        started = time.perf_counter()
        joined_write(spark, inputs, f"{out}/{MEASURED_PREFIX}{index}", index)
        durations.append(time.perf_counter() - started)
    print(json.dumps({"done": time.time(), "writes": durations}), flush=True)
    spark.stop()


# --- the server, one process per side and round ---------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _jvm_cpu(pid: int) -> float:
    """CPU seconds (user and system) the JVM has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _jvm_thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds the JVM's live threads have used so far, by thread name with its numbers made ``#`` (so that
    a pool's threads add up): which of the JVM's threads lineage keeps busy."""
    totals: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            text = (task / "stat").read_text()
            name = re.sub(r"\d+", "#", text[text.index("(") + 1 : text.rindex(")")])
            fields = text.rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            totals[name] = totals.get(name, 0.0) + cpu
    return totals


def _python_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _lineage_thread_cpu() -> dict[str, float]:
    """CPU seconds of this process's live lineage threads, by kind (analysis, sender lanes together, ...)."""
    totals: dict[str, float] = {}
    for thread in threading.enumerate():
        if thread.name.startswith("spark_lineage-") and thread.ident is not None:
            kind = thread.name.split("-")[1].split(":")[0]
            clock = time.pthread_getcpuclockid(thread.ident)
            totals[kind] = totals.get(kind, 0.0) + time.clock_gettime(clock)
    return totals


def _write_inputs(spark: Any, inputs: Path) -> None:
    spark.range(2000).selectExpr(
        "id AS order_id", "id % 50 AS customer_id", "id % 7 AS bucket", "CAST(id % 97 AS DOUBLE) * 1.5 AS amount"
    ).write.parquet(str(inputs / "orders"))
    spark.range(50).selectExpr(
        "id AS customer_id",
        "concat('customer ', id) AS name",
        "element_at(array('north', 'south', 'east'), CAST(id % 3 + 1 AS INT)) AS region",
    ).write.parquet(str(inputs / "customers"))


class SpoolClock:
    """Notes when each event was stored in the spool (``Spool.put_all`` returned), by wrapping it: the payloads are
    read only once the measurement is over."""

    def __init__(self) -> None:
        self.stored: list[tuple[float, str]] = []

    def install(self) -> None:
        from spark_lineage.delivery.spool import Spool

        original = Spool.put_all
        stored = self.stored

        def put_all(spool: Any, destination: str, payloads: Any) -> Any:
            result = original(spool, destination, payloads)
            now = time.time()
            stored.extend((now, payload.json) for payload in payloads)
            return result

        Spool.put_all = put_all  # type: ignore[method-assign]

    def measured_completes(self) -> list[tuple[float, bool]]:
        """For each measured query's COMPLETE: seconds from the query's end to its storing, and whether it has
        column lineage."""
        found = []
        for stored_at, payload in self.stored:
            event = json.loads(payload)
            outputs = event.get("outputs") or []
            if event.get("eventType") != "COMPLETE" or not any(
                f"/{MEASURED_PREFIX}" in output.get("name", "") for output in outputs
            ):
                continue
            ended = dt.datetime.fromisoformat(event["eventTime"]).timestamp()
            columns = any("columnLineage" in (output.get("facets") or {}) for output in outputs)
            found.append((stored_at - ended, columns))
        return found


class AnalysisProfile:
    """cProfile on the analysis thread: enabled around each work item the worker takes, in that thread."""

    def __init__(self) -> None:
        self.profile = cProfile.Profile()
        self.items = 0

    def install(self) -> None:
        from spark_lineage import session

        original = session.LineageRuntime._analyze
        profile = self

        def analyze(runtime: Any, item: Any) -> None:
            profile.items += 1
            profile.profile.enable()
            try:
                original(runtime, item)
            finally:
                profile.profile.disable()

        session.LineageRuntime._analyze = analyze  # type: ignore[method-assign]


def _start_clients(
    count: int, port: int, inputs: Path, out: Path, writes: int, warmup: int, logs: Path
) -> tuple[list[subprocess.Popen[str]], queue.Queue[tuple[int, str]]]:
    """The client processes, and a queue of the lines they print, as ``(client, line)``."""
    lines: queue.Queue[tuple[int, str]] = queue.Queue()
    processes = []
    for index in range(count):
        user = f"analyst_{index + 1}"
        command = [
            sys.executable,
            __file__,
            "--client",
            f"sc://127.0.0.1:{port}/;user_id={user}",
            "--inputs",
            str(inputs),
            "--out",
            str(out / user),
            "--writes",
            str(writes),
            "--warmup",
            str(warmup),
        ]
        process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=(logs / f"{user}.log").open("w"),
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        processes.append(process)

        def read(index: int = index, process: subprocess.Popen[str] = process) -> None:
            assert process.stdout is not None
            for line in process.stdout:
                lines.put((index, line.strip()))
            lines.put((index, ""))

        threading.Thread(target=read, daemon=True).start()
    return processes, lines


def _await_lines(lines: queue.Queue[tuple[int, str]], count: int, what: str, logs: Path) -> dict[int, str]:
    """The first line of each client that ``what`` accepts; a client that ends first fails the measurement."""
    found: dict[int, str] = {}
    while len(found) < count:
        index, line = lines.get(timeout=600)
        if not line and index not in found:
            log = (logs / f"analyst_{index + 1}.log").read_text()
            raise RuntimeError(f"client {index + 1} ended before {what}:\n{log[-3000:]}")
        if line == what or (what == "done" and line.startswith("{")):
            found[index] = line
    return found


def run_server(mode: str, url: str, workdir: Path, args: argparse.Namespace, profile: bool = False) -> dict[str, Any]:
    """One server process's measurement (see the module's docstring)."""
    port = _free_port()
    spark = local_session(
        "Connect Benchmark",
        **{
            "spark.sql.shuffle.partitions": "2",
            "spark.plugins": CONNECT_PLUGIN,
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(port),
        },
    )
    inputs, out, logs = workdir / "inputs", workdir / "out", workdir / "logs"
    logs.mkdir()
    _write_inputs(spark, inputs)
    jvm_pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())
    clock = SpoolClock()
    analysis_profile = AnalysisProfile()
    handle = None
    if mode == "on":
        import spark_lineage

        clock.install()
        if profile:
            analysis_profile.install()
        handle = spark_lineage.enable(
            spark, transport={"type": "http", "url": url}, python={"spool": {"dir": str(workdir / "spool")}}
        )
    processes, lines = _start_clients(args.clients, port, inputs, out, args.writes, args.warmup, logs)
    _await_lines(lines, args.clients, "ready", logs)
    if handle is not None:
        handle.flush(120)  # the warm-up's events delivered: both sides start the measurement idle
    clock.stored.clear()
    profiled_items = analysis_profile.items
    analysis_profile.profile = cProfile.Profile()
    result: dict[str, Any] = {}
    with measuring_stages(result):  # the stages' CPU and round trips, until every event is delivered
        python_started, jvm_started, threads_started = _python_cpu(), _jvm_cpu(jvm_pid), _lineage_thread_cpu()
        jvm_threads_started = _jvm_thread_cpu(jvm_pid)
        go = time.time()
        for process in processes:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        done = {index: json.loads(line) for index, line in _await_lines(lines, args.clients, "done", logs).items()}
        last_write = max(answer["done"] for answer in done.values())
        for process in processes:
            process.wait(120)
        drained = True
        if handle is not None:
            drained = handle.flush(300)
        settled = time.time()
        python_cpu, jvm_cpu = _python_cpu() - python_started, _jvm_cpu(jvm_pid) - jvm_started
        threads = {kind: cpu - threads_started.get(kind, 0.0) for kind, cpu in _lineage_thread_cpu().items()}
        jvm_threads = {name: cpu - jvm_threads_started.get(name, 0.0) for name, cpu in _jvm_thread_cpu(jvm_pid).items()}
    completes = clock.measured_completes()
    if handle is not None:
        handle.disable()
    spark.stop()
    result |= {
        "seconds": last_write - go,
        "drain": settled - last_write,
        "drained": drained,
        "python_cpu": python_cpu,
        "jvm_cpu": jvm_cpu,
        "jvm_threads_cpu": jvm_threads,
        "lineage_threads_cpu": threads,
        "latencies": [latency for latency, _ in completes],
        "with_columns": sum(1 for _, columns in completes if columns),
        "write_seconds": [seconds for answer in done.values() for seconds in answer["writes"]],
    }
    if profile:
        result["profile"] = _profile_text(analysis_profile, analysis_profile.items - profiled_items, len(completes))
    return result


# --- the profile of the analysis thread -------------------------------------------------------------------------

STAGES = (
    ("/session.py", "_rdd_job", "jobs outside SQL executions read (job listener)"),
    ("/session.py", "_report_query", "queries of other sessions, in all:"),
    ("jvm/sessions.py", "read_session_event", "the end event read (the listener's text, its QueryExecution)"),
    ("/session.py", "_capture", "capture: the plan read over py4j"),
    ("/session.py", "_lineage", "analysis: datasets and column lineage"),
    ("connect/sessions.py", "for_query", "Connect identity: the session's settings read"),
    ("/events.py", "query_events", "events built"),
    ("delivery/__init__.py", "submit_all", "events spooled (Delivery.submit_all)"),
)
"""The analysis thread's work: the file and function cProfile names, and what they do (after the line "in
all:", the stages of a query)."""


def _profile_text(analysis_profile: AnalysisProfile, items: int, queries: int) -> str:
    stats = pstats.Stats(analysis_profile.profile)
    entries: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = sum(entry[3] for key, entry in entries.items() if key[2] == "_analyze" and key[0].endswith("/session.py"))
    lines = [
        f"analysis thread under cProfile: {items} work items, {queries} measured queries, "
        f"{total:.2f} s in the worker's items ({total / max(queries, 1) * 1000:.1f} ms per query); wall times of a "
        "thread at nice 10, slowed by the profiler",
        "  work" + " " * 58 + "cumulative   per query   calls",
    ]
    for file, function, label in STAGES:
        found = [(key, entry) for key, entry in entries.items() if key[2] == function and key[0].endswith(file)]
        cumulative = sum(entry[3] for _, entry in found)
        calls = sum(entry[1] for _, entry in found)
        lines.append(f"  {label:<62} {cumulative:8.2f} s {cumulative / max(queries, 1) * 1000:8.1f} ms {calls:7d}")
    text = io.StringIO()
    pstats.Stats(analysis_profile.profile, stream=text).sort_stats("cumulative").print_stats(40)
    return "\n".join(lines) + "\n\nthe 40 functions of most cumulative time:\n" + text.getvalue()


# --- the report -------------------------------------------------------------------------------------------------


def _percentile(samples: list[float], fraction: float) -> float:
    from latency import percentile

    return percentile(samples, fraction)


def _describe(result: dict[str, Any]) -> str:
    """The round line's tail: CPU, drain and latency of one server process."""
    text = f"   CPU python {result['python_cpu']:6.2f} s, JVM {result['jvm_cpu']:6.2f} s"
    latencies = result["latencies"]
    if latencies:
        text += (
            f"   drain {result['drain']:5.2f} s   end -> spooled p50 {statistics.median(latencies) * 1000:6.1f} ms "
            f"p95 {_percentile(latencies, 0.95) * 1000:7.1f} ms (n={len(latencies)}, "
            f"{result['with_columns']} with column lineage)"
        )
    return text


def _report_cpu(details: dict[str, list[dict[str, Any]]], queries: int) -> None:
    print()
    for mode in ("on", "off"):
        results = details[mode]
        python = statistics.median(r["python_cpu"] for r in results)
        jvm = statistics.median(r["jvm_cpu"] for r in results)
        print(
            f"median server CPU, lineage {mode + ':':<4} python {python:6.2f} s, JVM {jvm:6.2f} s, "
            f"together {python + jvm:6.2f} s ({(python + jvm) / queries * 1000:.1f} ms per query)"
        )
    on, off = details["on"], details["off"]
    for label, key in (("python", "python_cpu"), ("JVM", "jvm_cpu")):
        added = statistics.median(r[key] for r in on) - statistics.median(r[key] for r in off)
        print(f"lineage's added server CPU, {label:<6}: {added / queries * 1000:6.1f} ms per query")
    kinds = sorted({kind for r in on for kind in r["lineage_threads_cpu"]})
    threads = ", ".join(
        f"{kind} {statistics.median(r['lineage_threads_cpu'].get(kind, 0.0) for r in on) / queries * 1000:.1f} ms"
        for kind in kinds
    )
    print(f"lineage threads' CPU per query (medians): {threads}")
    for mode in ("on", "off"):
        writes = [seconds for r in details[mode] for seconds in r["write_seconds"]]
        print(
            f"a client's write, lineage {mode + ':':<4} p50 {statistics.median(writes) * 1000:6.1f} ms   "
            f"p95 {_percentile(writes, 0.95) * 1000:6.1f} ms"
        )


def _report_jvm_threads(details: dict[str, list[dict[str, Any]]], queries: int, most: int = 12) -> None:
    """The JVM's threads whose CPU lineage changes most (medians per side, per query)."""
    names = {name for results in details.values() for r in results for name in r["jvm_threads_cpu"]}

    def median(mode: str, name: str) -> float:
        return statistics.median(r["jvm_threads_cpu"].get(name, 0.0) for r in details[mode]) / queries * 1000

    rows = sorted(((median("on", name), median("off", name), name) for name in names), key=lambda r: r[1] - r[0])
    print(f"\nthe JVM's threads, CPU per query (medians; the {most} that lineage changes most):")
    print(f"  {'thread':<44} {'on':>9} {'off':>9} {'on - off':>10}")
    for on, off, name in rows[:most]:
        print(f"  {name:<44} {on:6.1f} ms {off:6.1f} ms {on - off:7.1f} ms")


def _report_latency(details: dict[str, list[dict[str, Any]]], expected: int) -> None:
    on = details["on"]
    latencies = [latency for r in on for latency in r["latencies"]]
    with_columns = sum(r["with_columns"] for r in on)
    drains = [r["drain"] for r in on]
    print(
        f"\nquery end -> COMPLETE in the spool, lineage on, {len(latencies)} of {expected} measured queries: "
        f"p50 {statistics.median(latencies) * 1000:.1f} ms   p95 {_percentile(latencies, 0.95) * 1000:.1f} ms   "
        f"max {max(latencies) * 1000:.1f} ms; {with_columns} with column lineage"
    )
    undrained = sum(1 for r in on if not r["drained"])
    print(
        f"drain after the last write, lineage on (every event delivered): median {statistics.median(drains):.2f} s"
        + (f"; {undrained} processes NOT drained in time" if undrained else "")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--writes", type=int, default=25, help="measured writes per client")
    parser.add_argument("--warmup", type=int, default=3, help="writes per client before those")
    parser.add_argument("--rounds", type=int, default=5, help="server processes per side")
    parser.add_argument("--profile", action="store_true", help="then profile the analysis thread in one more run")
    parser.add_argument("--threads", action="store_true", help="also show the CPU of the JVM's threads, by name")
    child_arguments(parser, ("on", "off", "profile"))
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--inputs", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client(args.client, args.inputs, args.out, args.writes, args.warmup)
        return
    if args.child == "profile":
        result = run_server("on", args.url, Path(args.workdir), args, profile=True)
        print(result.pop("profile"), file=sys.stderr)
        print(json.dumps(result))
        return
    if run_as_child(args, lambda mode, url, workdir: run_server(mode, url, workdir, args)):
        return

    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)

    def child_args(mode: str, url: str, workdir: str) -> list[str]:
        return [
            __file__,
            *("--child", mode, "--url", url, "--workdir", workdir),
            *("--clients", str(args.clients), "--writes", str(args.writes), "--warmup", str(args.warmup)),
        ]

    details: dict[str, list[dict[str, Any]]] = {}
    times, received = alternate(args.rounds, child_args, details=details, describe=_describe)
    queries = args.clients * args.writes
    load = os.getloadavg()
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(
        f"\n{args.clients} Spark Connect clients x {args.writes} joined writes each ({queries} queries per server "
        f"process, after {args.warmup} per client of warm-up), {args.rounds} server processes per side"
    )
    report(times, queries, "query", target=TARGET_RATIO)
    _report_cpu(details, queries)
    print("\nlineage's Python CPU by stage, medians of the servers with lineage on (the sender's over HTTP):")
    print_stage_table(details["on"], queries, "query")
    if args.threads:
        _report_jvm_threads(details, queries)
    _report_latency(details, queries * args.rounds)
    print(f"events received by the loopback backend: {received}")
    if args.profile:
        _profile(args)


def _profile(args: argparse.Namespace) -> None:
    import tempfile

    from _sidebyside import start_backend

    backend = start_backend()
    try:
        with tempfile.TemporaryDirectory() as workdir:
            command = [
                sys.executable,
                __file__,
                *("--child", "profile", "--url", f"http://127.0.0.1:{backend.server_address[1]}"),
                *("--workdir", workdir, "--clients", str(args.clients), "--writes", str(args.writes)),
                *("--warmup", str(args.warmup)),
            ]
            done = subprocess.run(command, capture_output=True, text=True, check=True)
    finally:
        backend.shutdown()
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"\nprofiled run (lineage on, cProfile on the analysis thread): {result['seconds']:.3f} s{_describe(result)}")
    print(done.stderr[done.stderr.index("analysis thread under cProfile") :])


if __name__ == "__main__":
    main()
