"""How soon a query's COMPLETE event reaches a healthy backend: from the action's return to its arrival.

    python benchmarks/latency.py [--queries 30] [--warmup 5] [--rounds 2] [--stages] [--before DIR]

Each query writes parquet from a plan of about 20 or about 600 logical plan nodes (a join of two small parquet
inputs with computed columns, under a chain of ``sample`` and projection steps, as ``benchmarks/per_query.py``
builds them), with lineage on, column lineage on, the spool on disk, and every event sent over HTTP to a
:class:`tests.support.LineageReceiver` on loopback, in a process of its own (so that its schema validation
takes no CPU from the driver measured). Queries run one at a time: the next one starts once the last one's
COMPLETE has arrived, so each figure is one query's latency, not a queue's. The figure is the COMPLETE's
arrival at the receiver (``time.time()`` there) less the moment the write returned (``time.time()`` here).

Beside it, per query: the driver process's CPU time (``getrusage``; the JVM is another process), and the CPU
time of lineage's analysis and sender threads.

``--stages`` also times each stage of one query on its way, at the median: Spark's own delay (the action's
return to the listener's callback), the analysis worker picking the query up, capture (py4j), analysis with
column lineage, event building, the COMPLETE's spooling (client enrichment, JSON, redaction, sqlite), the
sender leasing it, the HTTP send, and the receiver.

``--before DIR`` measures another copy of ``spark_lineage`` side by side with this one (``DIR`` holds its
``spark_lineage`` package, e.g. ``git archive <commit> spark_lineage | tar -x -C DIR``): ``--rounds`` fresh
processes per side, alternating, and the figures of each side pooled.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

CODE_DIR_ENV = "LATENCY_BENCHMARK_CODE"
"""Where the ``spark_lineage`` measured comes from, in a child process (``--before``)."""
if os.environ.get(CODE_DIR_ENV):
    sys.path.insert(0, os.environ[CODE_DIR_ENV])

from per_query import build_query, deep_plan_session  # noqa: E402 - after the line above: it imports spark_lineage

STEPS = {20: 6, 600: 296}
"""Plan size (about this many logical plan nodes) -> chained steps (see ``per_query.build_query``)."""
TARGET_P95_MS = 200.0
STAGES = (
    ("returned", "action returned"),
    ("listener", "listener callback (Spark's delay)"),
    ("picked", "analysis worker picks it up"),
    ("captured", "capture (py4j)"),
    ("analyzed", "analysis, column lineage"),
    ("built", "events built"),
    ("spooled", "COMPLETE spooled (JSON, redaction, sqlite)"),
    ("leased", "sender leases it"),
    ("sending", "send starts"),
    ("emitting", "the transport called (the lane's emit)"),
    ("sent", "HTTP send answered"),
    ("arrived", "arrived at the receiver"),
)


# --- the receiver, in a process of its own ------------------------------------------------------------------


class _Arrivals(list):  # type: ignore[type-arg]
    """The receiver's list of events, noting when each one is kept, in a file of JSON lines."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self._file = path.open("a", buffering=1)

    def append(self, event: Any) -> None:
        arrived = time.time()
        super().append(event)
        outputs = [dataset.get("name", "") for dataset in event.get("outputs") or []]
        line = {"arrived": arrived, "type": event.get("eventType"), "run": event["run"]["runId"], "outputs": outputs}
        self._file.write(json.dumps(line) + "\n")


def serve(arrivals: Path) -> None:
    """Run a receiver that writes each event's arrival to ``arrivals``; print its URL; serve until stdin ends."""
    from tests.support import LineageReceiver

    receiver = LineageReceiver()
    receiver.events = _Arrivals(arrivals)
    print(receiver.url, flush=True)
    sys.stdin.read()
    receiver.stop()


def start_receiver(arrivals: Path) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(arrivals)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={key: value for key, value in os.environ.items() if key != CODE_DIR_ENV},
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


class ArrivalLog:
    """The receiver's arrivals, read as they are written (only the new lines each time: the measured process
    must not spend its CPU re-reading them)."""

    def __init__(self, path: Path) -> None:
        self._file = path.open()
        self._partial = ""

    def wait_for_complete(self, output: str, timeout: float = 30.0) -> dict[str, Any] | None:
        """The arrival of the COMPLETE event whose output ends with ``output``, once it is there."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self._partial + self._file.read()
            lines = text.split("\n")
            self._partial = lines.pop()
            for line in lines:
                arrival = json.loads(line)
                if arrival["type"] == "COMPLETE" and any(name.endswith(output) for name in arrival["outputs"]):
                    return arrival  # type: ignore[no-any-return]
            time.sleep(0.01)
        return None


# --- the measured process ------------------------------------------------------------------------------------


def thread_cpu(names: tuple[str, ...]) -> float:
    """CPU seconds of this process's live threads with these names (a sender's lanes too: ``<name>-<lane>``)."""
    total = 0.0
    for thread in threading.enumerate():
        named = thread.name in names or thread.name.rpartition("-")[0] in names
        if named and thread.ident is not None:
            total += time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
    return total


class StageClock:
    """Notes when each stage of the query under way was reached, by wrapping lineage's own functions."""

    def __init__(self) -> None:
        self.current: dict[str, float] = {}
        self.cpu: dict[str, float] = {}

    def mark(self, stage: str) -> None:
        if stage not in self.current:
            self.current[stage] = time.time()
            self.current[f"{stage}:cpu"] = time.thread_time()

    def install(self) -> None:
        from spark_lineage import analysis, session
        from spark_lineage.delivery import Delivery, sender, spool
        from spark_lineage.events import EventBuilder
        from spark_lineage.jvm import JvmBridge, PendingQuery, bridge

        clock = self

        def wrap(owner: Any, name: str, before: Callable[..., None] | None, after: Callable[..., None] | None) -> None:
            original = getattr(owner, name)

            def wrapper(*args: Any, **kwargs: Any) -> Any:
                if before is not None:
                    before(*args, **kwargs)
                result = original(*args, **kwargs)
                if after is not None:
                    after(result, *args, **kwargs)
                return result

            setattr(owner, name, wrapper)

        def is_complete(event: Any) -> bool:
            return getattr(getattr(event, "eventType", None), "value", None) == "COMPLETE" and bool(event.outputs)

        wrap(bridge.QueryListener, "onSuccess", lambda *a: clock.mark("listener"), None)
        wrap(
            session.LineageRuntime,
            "_analyze",
            lambda runtime, item: clock.mark("picked") if isinstance(item, PendingQuery) else None,
            None,
        )
        wrap(JvmBridge, "capture", None, lambda *a: clock.mark("captured"))
        wrap(analysis, "analyze", None, lambda *a: clock.mark("analyzed"))
        wrap(EventBuilder, "query_events", None, lambda *a: clock.mark("built"))
        wrap(
            Delivery,
            "submit_all",
            None,
            lambda result, delivery, events: clock.mark("spooled") if any(map(is_complete, events)) else None,
        )

        def spooled_complete(payload: str) -> bool:
            return '"eventType": "COMPLETE"' in payload and "out_" in payload

        def leased(batch: Any, *args: Any, **kwargs: Any) -> None:
            if any(spooled_complete(item.payload) for item in batch):
                clock.mark("leased")

        wrap(spool.Spool, "lease", None, leased)
        original_sending = sender.logs.sending

        def sending(*args: Any) -> Any:
            clock.current["_send_started"] = time.time()
            return original_sending(*args)

        sender.logs.sending = sending  # type: ignore[assignment]

        def watch_lanes(instance: Any) -> None:
            for lane in instance._lanes:
                emit = lane.emit

                def timed_emit(payload: str, emit: Callable[[str], Any] = emit) -> Any:
                    complete = spooled_complete(payload)
                    if complete:
                        clock.current["sending"] = clock.current.pop("_send_started", time.time())
                        clock.mark("emitting")
                    result = emit(payload)
                    if complete and "emitting" in clock.current:
                        clock.mark("sent")
                    return result

                lane.emit = timed_emit

        wrap(sender.Sender, "__init__", None, lambda result, instance, *a, **k: watch_lanes(instance))


def measure(sizes: tuple[int, ...], queries: int, warmup: int, stages: bool) -> dict[str, Any]:
    """Run the queries in this process; the figures of each plan size."""
    import spark_lineage

    workdir = Path(tempfile.mkdtemp(prefix="latency-bench-"))
    arrivals = workdir / "arrivals.jsonl"
    arrivals.touch()
    receiver, url = start_receiver(arrivals)
    log = ArrivalLog(arrivals)
    clock = StageClock()
    if stages:
        clock.install()
    spark, inputs = deep_plan_session("latency benchmark", workdir)
    handle = spark_lineage.enable(
        spark, transport={"type": "http", "url": url}, python={"spool": {"dir": str(workdir / "spool")}}
    )
    lineage_threads = ("spark_lineage-analysis", "spark_lineage-sender")
    results: dict[str, Any] = {"code": str(Path(spark_lineage.__file__).parent), "sizes": {}}
    count = 0
    for size in sizes:
        frame = build_query(spark, inputs, STEPS[size])
        nodes = len(str(frame._jdf.queryExecution().optimizedPlan().treeString()).splitlines())
        latencies: list[float] = []
        records: list[dict[str, float]] = []
        cpu_started = resource.getrusage(resource.RUSAGE_SELF)
        threads_started = thread_cpu(lineage_threads)
        sender_started = thread_cpu(lineage_threads[1:])
        for index in range(-warmup, queries):
            count += 1
            output = f"out_{count}"
            clock.current = {}
            frame.write.mode("overwrite").parquet(str(workdir / output))
            returned = time.time()
            clock.current["returned"] = returned
            arrival = log.wait_for_complete(output)
            if index < 0:
                if index == -1:  # warm-up over: CPU from here
                    cpu_started = resource.getrusage(resource.RUSAGE_SELF)
                    threads_started = thread_cpu(lineage_threads)
                    sender_started = thread_cpu(lineage_threads[1:])
                continue
            if arrival is None:
                print(f"no COMPLETE arrived for {output}", file=sys.stderr)
                continue
            latencies.append(arrival["arrived"] - returned)
            clock.current["arrived"] = arrival["arrived"]
            records.append(dict(clock.current))
        cpu_ended = resource.getrusage(resource.RUSAGE_SELF)
        threads = thread_cpu(lineage_threads) - threads_started
        process = (cpu_ended.ru_utime + cpu_ended.ru_stime) - (cpu_started.ru_utime + cpu_started.ru_stime)
        results["sizes"][str(size)] = {
            "nodes": nodes,
            "latencies": latencies,
            "process_cpu_per_query": process / queries,
            "lineage_threads_cpu_per_query": threads / queries,
            "sender_cpu_per_query": (thread_cpu(lineage_threads[1:]) - sender_started) / queries,
            "records": records,
        }
    handle.disable()
    spark.stop()
    assert receiver.stdin is not None
    receiver.stdin.close()
    receiver.wait(10)
    return results


# --- reporting ---------------------------------------------------------------------------------------------


def percentile(samples: list[float], fraction: float) -> float:
    """The nearest-rank percentile."""
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(len(ordered) * fraction) - 1)]


def report(label: str, result: dict[str, Any]) -> None:
    for size, figures in result["sizes"].items():
        latencies = figures["latencies"]
        print(
            f"{label:<8} {size:>4} ({figures['nodes']:>3} nodes)  n={len(latencies):<3} "
            f"p50 {statistics.median(latencies) * 1000:7.1f} ms   p95 {percentile(latencies, 0.95) * 1000:7.1f} ms   "
            f"max {max(latencies) * 1000:7.1f} ms   CPU/query: process {figures['process_cpu_per_query'] * 1000:6.1f} "
            f"ms, lineage threads {figures['lineage_threads_cpu_per_query'] * 1000:6.1f} ms"
        )


def report_stages(result: dict[str, Any]) -> None:
    for size, figures in result["sizes"].items():
        records = figures["records"]
        print(f"\nstages at about {size} nodes ({figures['nodes']}), medians over {len(records)} queries:")
        print("  stage                                        since return (p50, p95)   since last stage")
        previous = "returned"
        for stage, label in STAGES[1:]:
            spans = [r[stage] - r["returned"] for r in records if stage in r]
            steps = [r[stage] - r[previous] for r in records if stage in r and previous in r]
            if not spans:
                print(f"  {label:<44} (not seen)")
                continue
            since = f"{statistics.median(spans) * 1000:7.1f} ms {percentile(spans, 0.95) * 1000:7.1f} ms"
            step = f"{statistics.median(steps) * 1000:9.1f} ms" if steps else ""
            print(f"  {label:<44} {since}   {step}")
            previous = stage
        worker = ("picked", "captured", "analyzed", "built", "spooled")
        cpu = [
            f"{label} {statistics.median(r[f'{b}:cpu'] - r[f'{a}:cpu'] for r in records) * 1000:.1f} ms"
            for a, b, label in zip(worker, worker[1:], ("capture", "analysis", "events", "spooling"))
        ]
        print(f"  analysis thread CPU: {', '.join(cpu)}")
        print(f"  sender thread CPU per query: {figures['sender_cpu_per_query'] * 1000:.1f} ms")


def run_child(code_dir: str | None, args: argparse.Namespace) -> dict[str, Any]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop(CODE_DIR_ENV, None)
    if code_dir:
        env[CODE_DIR_ENV] = code_dir
    command = [sys.executable, __file__, "--child", "--queries", str(args.queries), "--warmup", str(args.warmup)]
    if args.stages:
        command.append("--stages")
    result = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if result.returncode:
        sys.exit(f"child failed:\n{result.stderr[-4000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def pooled(results: list[dict[str, Any]]) -> dict[str, Any]:
    sizes: dict[str, Any] = {}
    for result in results:
        for size, figures in result["sizes"].items():
            into = sizes.setdefault(
                size, {"nodes": figures["nodes"], "latencies": [], "records": [], "cpu": [], "threads": []}
            )
            into["latencies"] += figures["latencies"]
            into["records"] += figures["records"]
            into["cpu"].append(figures["process_cpu_per_query"])
            into["threads"].append(figures["lineage_threads_cpu_per_query"])
            into.setdefault("sender", []).append(figures["sender_cpu_per_query"])
    for figures in sizes.values():
        figures["process_cpu_per_query"] = statistics.median(figures.pop("cpu"))
        figures["lineage_threads_cpu_per_query"] = statistics.median(figures.pop("threads"))
        figures["sender_cpu_per_query"] = statistics.median(figures.pop("sender"))
    return {"sizes": sizes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=30, help="queries measured per plan size")
    parser.add_argument("--warmup", type=int, default=5, help="queries before those, per plan size")
    parser.add_argument("--rounds", type=int, default=2, help="processes per side with --before")
    parser.add_argument("--stages", action="store_true", help="time each stage too")
    parser.add_argument("--before", help="a directory holding another spark_lineage, measured side by side")
    parser.add_argument(
        "--side", action="append", default=[], help="NAME=DIR: one more spark_lineage measured side by side"
    )
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(Path(args.serve))
        return
    if args.child:
        print(json.dumps(measure(tuple(STEPS), args.queries, args.warmup, args.stages)))
        return
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    sides: dict[str, str | None] = {"before": args.before} if args.before else {}
    sides.update(dict(side.split("=", 1) for side in args.side))
    sides["after" if sides else "this"] = None
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    for round_index in range(args.rounds if len(sides) > 1 else 1):
        order = list(sides.items())
        shift = round_index % len(order)
        for side, code_dir in order[shift:] + order[:shift]:
            result = run_child(code_dir, args)
            if not runs[side]:
                print(f"{side}: spark_lineage from {result['code']}")
            runs[side].append(result)
            report(f"{side}", result)
    load = os.getloadavg()
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"\nCOMPLETE latency, action's return to arrival at the receiver ({args.queries} queries per process):")
    for side, results in runs.items():
        report(side, pooled(results))
    for side, results in runs.items():
        if args.stages:
            print(f"\n{side}:", end="")
            report_stages(pooled(results))
    last = pooled(runs[list(runs)[-1]])["sizes"]
    p95 = percentile(last[str(max(STEPS))]["latencies"], 0.95) * 1000
    verdict = "within" if p95 <= TARGET_P95_MS else "OVER"
    print(f"\np95 at about 600 nodes: {p95:.1f} ms, {verdict} the {TARGET_P95_MS:.0f} ms target")


if __name__ == "__main__":
    main()
