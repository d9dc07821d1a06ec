"""What a Spark Connect client's own lineage costs per action, on the client, side by side with lineage off.

    python benchmarks/connect_client.py [--actions 40] [--warmup 5] [--rounds 3] [--transport file|http]
                                        [--loop 200] [--sides on,off,schemas] [--server-warmup 1]
                                        [--client-python PATH]

A plain Spark Connect server (no lineage: ``SparkConnectServer`` from the running interpreter's PySpark jars,
``local[2]``) serves every client. Each measurement is a fresh client process of ``--client-python`` (default:
``.venvs/pyspark-client``, the thin client, else this interpreter) with lineage off, or on through
``spark_lineage.enable()``: every event spooled on disk and sent with the file transport (as
``cpu_per_query.py`` measures the driver), or with ``--transport http`` over HTTP to a backend on loopback.
A client runs ``--warmup`` actions, then ``--actions`` measured ones, each a write of two parquet inputs joined
and aggregated to a path (an action lineage reads from its request alone: no extra round trip). Processes take
turns (on, off, schemas; off, schemas, on; ...), after one client process with lineage off that is not measured
(``--server-warmup``): the server's first actions run slower (its JIT), and their client spends more CPU on them
(the first measured process of a cold server took half as long again, and 1.3 times its CPU: a side that always
went first had its median raised by it).

Per process: the wall time of the measured actions, and the client process's CPU (``getrusage``) from the first
measured action until, with lineage on, every event is delivered (``handle.flush``); with lineage on, also the
CPU the caller's thread spends telling lineage of each action (the tap's queueing), the CPU of lineage's own
threads (each thread's CPU clock: what lineage spends itself, without the noise of the client's own work, which
the difference below carries), and the table lookups lineage made (none for these actions). The figure against
the budget (issue 26: <= 2 ms per action without extra round trips) is the difference of the median CPU per
action, on minus off.

A third side runs with ``python.connect.resolveSchemas=true`` (the server asked for the schema each write
writes: one round trip per write, on lineage's worker thread).

The loop (``--loop N``, each lineage-on process after its measured actions): the last warm-up action's request
(kept outside the measured actions), as it was sent, analyzed and its START and COMPLETE built and spooled N
times over on the benchmark's own thread, by stage, with every event then delivered (on the sender's thread,
whose CPU is given apart). It is what the work of
one action costs when nothing else runs: no scheduling, no cold caches, no client and no server beside it, so a
change to lineage's code is judged by it without the noise of the processes (``--sides on --rounds 1`` runs it
alone). ``--loop 0`` leaves it out.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _sidebyside import start_backend
from _stages import measuring_stages, print_stage_table

MODES = ("on", "off", "schemas")
LABELS = {"on": "lineage on", "off": "lineage off", "schemas": "lineage on, resolveSchemas"}
BUDGET_MS = 2.0
"""CPU per action lineage may add on the client, without extra round trips (issue 26)."""
ROOT = Path(__file__).resolve().parent.parent


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def lineage_threads_cpu() -> dict[str, float]:
    """The CPU seconds each of lineage's own threads (``spark_lineage-*``: its worker, its sender's lanes) has used
    so far, by thread name, read from each thread's own CPU clock."""
    cpu: dict[str, float] = {}
    for thread in threading.enumerate():
        if thread.name.startswith("spark_lineage") and thread.ident is not None:
            try:
                clock = time.pthread_getcpuclockid(thread.ident)
                cpu[thread.name] = cpu.get(thread.name, 0.0) + time.clock_gettime(clock)
            except (OSError, AttributeError):  # ended meanwhile, or a platform without per-thread clocks
                continue
    return cpu


# --- a client, in a process of its own ------------------------------------------------------------------------


def replay(runtime: Any, request: tuple[Any, Any, int], times: int) -> dict[str, Any]:
    """Analyze the action of ``request`` (its plan, header and send time, as the tap read them) and build and
    spool its START and COMPLETE ``times`` times over on this thread, then deliver every event: the CPU of this
    thread and of lineage's own threads per action, and the stages of both."""
    from spark_lineage.connect.client.runtime import _Ended, _Sent

    plan, header, sent_ms = request
    result: dict[str, Any] = {}
    threads_before = lineage_threads_cpu()
    with measuring_stages(result, jvm=False):
        cpu = time.thread_time()
        for index in range(times):
            token = -1 - index  # not one the tap hands out
            runtime._started(_Sent(token, plan, header, sent_ms))
            runtime._finished(_Ended(token, sent_ms + 5, None))
        result["thread"] = time.thread_time() - cpu
        assert runtime.flush(120), "not every event of the loop was delivered"
    threads_after = lineage_threads_cpu()
    result["threads"] = {name: cpu - threads_before.get(name, 0.0) for name, cpu in threads_after.items()}
    return result


def client(
    mode: str, url: str, backend: str, workdir: Path, warmup: int, actions: int, loop: int = 0
) -> dict[str, Any]:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as f

    spark = SparkSession.builder.remote(url).getOrCreate()
    data = workdir / "data"
    if mode == "setup":
        spark.range(2000).selectExpr("id AS order_id", "id % 50 AS customer_id", "id * 1.5 AS amount").write.mode(
            "overwrite"
        ).parquet(str(data / "orders"))
        spark.range(50).selectExpr("id AS customer_id", "concat('r', id % 5) AS region").write.mode(
            "overwrite"
        ).parquet(str(data / "customers"))
        spark.stop()
        return {"seconds": 0.0}
    handle = None
    queueing = [0.0]
    last: list[tuple[Any, Any, int]] = []
    capturing = [False]
    """Whether the tap's next request is kept for the loop (the last warm-up action's: not measured)."""
    if mode in ("on", "schemas"):
        import spark_lineage

        transport = (
            {"type": "http", "url": backend}
            if backend.startswith("http")
            else {"type": "file", "log_file_path": backend, "append": True}
        )
        handle = spark_lineage.enable(
            spark, transport=transport, python={"connect": {"resolveSchemas": mode == "schemas"}}
        )
        runtime = handle._runtime
        observer_sent, observer_ended = runtime.sent, runtime.ended

        def sent(request: Any, time_ms: int) -> object:
            started = time.thread_time()
            token = observer_sent(request, time_ms)
            queueing[0] += time.thread_time() - started
            if capturing[0]:
                from spark_lineage.connect.client.requests import request_header

                last[:] = [(request.plan, request_header(request), time_ms)]
            return token

        def ended(token: object, time_ms: int, error: BaseException | None) -> None:
            started = time.thread_time()
            observer_ended(token, time_ms, error)
            queueing[0] += time.thread_time() - started

        runtime.tap._observer = type("Timed", (), {"sent": staticmethod(sent), "ended": staticmethod(ended)})()

    def action(index: int) -> None:
        orders = spark.read.parquet(str(data / "orders")).where(f"customer_id != {index % 7}")
        joined = orders.join(spark.read.parquet(str(data / "customers")), "customer_id")
        totals = joined.groupBy("region").agg(f.sum("amount").alias("total"), f.count("order_id").alias("orders"))
        totals.write.mode("overwrite").parquet(str(workdir / "out" / f"w_{index}"))

    for index in range(warmup):
        capturing[0] = bool(loop) and index == warmup - 1
        action(index)
    capturing[0] = bool(loop) and not last  # no warm-up: the first measured action's is kept
    if handle is not None:
        handle.flush(60)
    queueing[0] = 0.0
    result: dict[str, Any] = {}
    threads_before = lineage_threads_cpu()
    with measuring_stages(result, jvm=False):
        cpu, wall = _cpu(), time.perf_counter()
        for index in range(actions):
            action(warmup + index)
            capturing[0] = False
        result["seconds"] = time.perf_counter() - wall
        if handle is not None:
            assert handle.flush(120), "not every event was delivered"
            result["lookups"] = len(handle._runtime.tables._known)
        result["cpu"] = _cpu() - cpu
    result["queueing"] = queueing[0]
    threads_after = lineage_threads_cpu()
    result["threads"] = {name: cpu - threads_before.get(name, 0.0) for name, cpu in threads_after.items()}
    if handle is not None and loop and last:
        result["loop"] = replay(handle._runtime, last[0], loop)
    spark.stop()
    return result


# --- the server, and the rounds ---------------------------------------------------------------------------------


def start_server(directory: Path) -> tuple[subprocess.Popen[bytes], str]:
    """A Spark Connect server from PySpark's own jars, with no lineage; returns it and its URL once it listens."""
    import pyspark

    sys.path.insert(0, str(ROOT))
    from tests.support import free_port

    home = Path(pyspark.__file__).parent
    port = free_port()
    log = (directory / "server.log").open("wb")
    command = [
        str(home / "bin" / "spark-submit"),
        "--class",
        "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--master",
        "local[2]",
        "--conf",
        f"spark.connect.grpc.binding.port={port}",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.sql.shuffle.partitions=2",
        "--conf",
        f"spark.sql.warehouse.dir={directory / 'warehouse'}",
    ]
    server = subprocess.Popen(command, stdout=log, stderr=log, env={**os.environ, "SPARK_HOME": str(home)})
    deadline = time.monotonic() + 180
    while b"Spark Connect server started" not in (directory / "server.log").read_bytes():
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            sys.exit(f"the Spark Connect server did not start:\n{(directory / 'server.log').read_text()[-3000:]}")
        time.sleep(0.5)
    return server, f"sc://127.0.0.1:{port}"


def run_client(
    python: str, mode: str, url: str, backend: str, workdir: Path, args: argparse.Namespace
) -> dict[str, Any]:
    command = [python, __file__, "--child", mode, "--url", url, "--backend", backend, "--workdir", str(workdir)]
    command += ["--warmup", str(args.warmup), "--actions", str(args.actions), "--loop", str(args.loop)]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME")}
    env["PYTHONPATH"] = str(ROOT / "benchmarks")
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if done.returncode:
        sys.exit(f"the lineage {mode} client failed ({done.returncode}):\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def default_client_python() -> str:
    thin = ROOT / ".venvs" / "pyspark-client" / "bin" / "python"
    return str(thin) if thin.is_file() else sys.executable


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--actions", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--client-python", default=None)
    parser.add_argument("--transport", choices=("file", "http"), default="file")
    parser.add_argument(
        "--server-warmup", type=int, default=1, help="client processes run first and not measured (lineage off)"
    )
    parser.add_argument("--loop", type=int, default=200, help="actions replayed on one thread (0: no loop)")
    parser.add_argument("--sides", default=",".join(MODES), help="which of on, off, schemas run (comma-separated)")
    parser.add_argument("--child", choices=(*MODES, "setup"), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--backend", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(
            json.dumps(
                client(args.child, args.url, args.backend, Path(args.workdir), args.warmup, args.actions, args.loop)
            )
        )
        return
    sides = tuple(mode for mode in MODES if mode in args.sides.split(","))
    if not sides or set(args.sides.split(",")) - set(MODES):
        parser.error(f"--sides takes some of {', '.join(MODES)}, comma-separated; got {args.sides!r}")
    python = args.client_python or default_client_python()
    version = subprocess.run(
        [python, "-c", "import pyspark; print(pyspark.__version__)"], capture_output=True, text=True, check=True
    ).stdout.strip()
    print(f"client: {python} (pyspark {version}); {args.actions} measured actions per process, {args.rounds} rounds")
    directory = Path(tempfile.mkdtemp(prefix="connect-client-bench-"))
    backend = start_backend()
    backend_url = (
        f"http://127.0.0.1:{backend.server_address[1]}" if args.transport == "http" else str(directory / "events.json")
    )
    server, url = start_server(directory)
    results: dict[str, list[dict[str, Any]]] = {mode: [] for mode in sides}
    try:
        run_client(python, "setup", url, backend_url, directory, args)
        for _ in range(args.server_warmup):  # not measured: the server's JIT warms up on the same actions
            warm = run_client(python, "off", url, backend_url, directory, args)
            print(f"server warm-up (lineage off, not measured): {warm['seconds']:7.3f} s wall", flush=True)
        for index in range(args.rounds):
            shift = index % len(sides)
            for mode in sides[shift:] + sides[:shift]:
                result = run_client(python, mode, url, backend_url, directory, args)
                results[mode].append(result)
                print(
                    f"round {index + 1} {LABELS[mode]:>33}: {result['seconds']:7.3f} s wall, "
                    f"{result['cpu'] / args.actions * 1000:6.2f} ms CPU per action",
                    flush=True,
                )
    finally:
        server.kill()
        server.wait()
        backend.shutdown()
        shutil.rmtree(directory, ignore_errors=True)
    if "on" in results:
        report_on(results["on"], args)
    if "on" in results and "off" in results:
        report_against_off(results, args)
    if results.get("on") and "loop" in results["on"][0]:
        report_loop([r["loop"] for r in results["on"]], args.loop)


def report_on(runs: list[dict[str, Any]], args: argparse.Namespace) -> None:
    queueing = statistics.median(r["queueing"] for r in runs) / args.actions * 1000
    own = statistics.median(sum(r["threads"].values()) for r in runs) / args.actions * 1000
    lookups = max(r["lookups"] for r in runs)
    print()
    print("lineage's CPU on the client by stage, lineage on (its worker and delivery threads, and the tap):")
    print_stage_table(runs, args.actions, "action", indent="  ")
    print(f"  on the caller's thread (queueing the action): {queueing:.3f} ms")
    print(f"  on lineage's own threads (its worker and sender, each thread's CPU clock): {own:.2f} ms")
    print(f"  extra round trips: {lookups} table lookups for {args.actions + args.warmup} actions")


def report_against_off(results: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> None:
    per_action = {mode: statistics.median(r["cpu"] for r in rs) / args.actions * 1000 for mode, rs in results.items()}
    wall = {mode: statistics.median(r["seconds"] for r in rs) / args.actions * 1000 for mode, rs in results.items()}
    added = per_action["on"] - per_action["off"]
    verdict = "within" if added <= BUDGET_MS else "OVER"
    print()
    print(f"client CPU per action, lineage off: {per_action['off']:.2f} ms; on: {per_action['on']:.2f} ms")
    print(f"lineage's CPU per action on the client: {added:.2f} ms (budget <= {BUDGET_MS:g}: {verdict})")
    if "schemas" in per_action:
        schemas = per_action["schemas"] - per_action["off"]
        print(f"with python.connect.resolveSchemas (one round trip per write): {schemas:.2f} ms per action")
    for mode in results:
        print(f"wall per action, {LABELS[mode]}: {wall[mode]:.1f} ms (ratio to off {wall[mode] / wall['off']:.3f})")


def report_loop(loops: list[dict[str, Any]], times: int) -> None:
    thread = statistics.median(r["thread"] for r in loops) / times * 1000
    own = statistics.median(sum(r["threads"].values()) for r in loops) / times * 1000
    print()
    print(f"one action replayed {times} times on one thread, by stage (median of {len(loops)} processes):")
    print_stage_table(loops, times, "action", indent="  ")
    print(f"  the replaying thread (analysis, events, spooling): {thread:.2f} ms an action")
    print(f"  lineage's own threads meanwhile (delivery): {own:.2f} ms an action")
    # No verdict here: the budget is the whole client's, in situ (on minus off above), which costs about 1.5 times
    # the loop's.
    print(f"  the action's work in all: {thread + own:.2f} ms (warm, on one thread: not the budget's figure)")


if __name__ == "__main__":
    main()
