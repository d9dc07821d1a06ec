"""pyiceberg write time with iceberg_facets on versus off, measured side by side in one process.

    python benchmarks/pyiceberg_appends.py [--appends 200] [--block 5] [--repeat 3] [--calibrate]

No Spark: a sqlite catalog on a temporary warehouse, two tables, and ``--appends`` appends of 10 rows to each.
Lineage is enabled once, as a job would. The appends alternate in blocks of ``--block`` (5): a block on the
first table with lineage on, then a block on the second table with pyiceberg's own methods put back, so no
lineage work at all; before an "off" block the delivery helper is let finish what it still has to send, so
that it cannot slow that block. The final ``disable()``, which waits for the last events to be sent, is
counted on the "on" side. Drift in the machine's load (large on a shared
2-core VM) and the tables' growth (pyiceberg rewrites a longer manifest list and metadata file at each commit)
hit both sides alike. Events go over HTTP to a lineage backend on loopback, in another process.

Printed for each of ``--repeat`` runs: the total times per side and their ratio, and the median of the on/off
ratios of adjacent blocks; then the median ratio over the runs. ``--calibrate`` runs the same comparison with
the "on" side doing no lineage work either, which shows how far apart two identical sides land on this machine.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def measure(args: argparse.Namespace, url: str) -> dict[str, float]:
    """One run: ``args.appends`` appends per side, alternating in blocks; returns times and ratios."""
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog

    import iceberg_facets

    schema = pa.schema([pa.field("id", pa.int64()), pa.field("tag", pa.string())])
    seconds = {"on": 0.0, "off": 0.0}
    pairs: list[float] = []
    backlog_seconds = 0.0
    with tempfile.TemporaryDirectory() as workdir:
        catalog = SqlCatalog("bench", uri=f"sqlite:///{workdir}/catalog.db", warehouse=f"file://{workdir}/wh")
        catalog.create_namespace("db")
        tables = {side: catalog.create_table(f"db.events_{side}", schema=schema) for side in seconds}

        def append(side: str, index: int) -> None:
            ids = list(range(index * 10, index * 10 + 10))
            tables[side].append(pa.table({"id": ids, "tag": [f"t{i % 3}" for i in ids]}, schema=schema))

        started = time.perf_counter()
        handle = iceberg_facets.enable(transport={"type": "http", "url": url})
        enable_seconds = time.perf_counter() - started
        # Lineage stays enabled; an "off" block runs with pyiceberg's own methods put back, so it does no
        # lineage work at all.
        instrumentation = handle._runtime.instrumentation  # type: ignore[union-attr]
        instrumentation.remove()
        lineage_on = not args.calibrate
        for side in seconds:  # warm-up: first-commit costs, the delivery's first connection
            if side == "on" and lineage_on:
                instrumentation.install()
            append(side, 0)
            instrumentation.remove()
        done = 0
        while done < args.appends:
            count = min(args.block, args.appends - done)
            block: dict[str, float] = {}
            for side in ("on", "off") if (done // args.block) % 2 == 0 else ("off", "on"):
                if side == "off":  # the helper finishes its backlog first, so that it cannot slow this block
                    waited = time.perf_counter()
                    assert handle.flush(60), "events left undelivered"
                    backlog_seconds += time.perf_counter() - waited
                started = time.perf_counter()
                if side == "on" and lineage_on:
                    instrumentation.install()
                for index in range(done, done + count):
                    append(side, 1 + index)
                instrumentation.remove()
                block[side] = time.perf_counter() - started
                seconds[side] += block[side]
            pairs.append(block["on"] / block["off"])
            done += count
        instrumentation.install()
        started = time.perf_counter()
        assert handle.disable(timeout=60), "events left undelivered"
        disable_seconds = time.perf_counter() - started
        seconds["on"] += disable_seconds
    return {
        "on": seconds["on"],
        "off": seconds["off"],
        "ratio": seconds["on"] / seconds["off"],
        "paired": statistics.median(pairs),
        "enable": enable_seconds,
        "disable": disable_seconds,
        "backlog": backlog_seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--appends", type=int, default=200, help="appends per side")
    parser.add_argument("--block", type=int, default=5, help="appends per block")
    parser.add_argument("--repeat", type=int, default=3, help="runs")
    parser.add_argument("--calibrate", action="store_true", help="no lineage work on either side")
    args = parser.parse_args()

    backend_script = str(Path(__file__).with_name("_sidebyside.py"))
    backend = subprocess.Popen([sys.executable, backend_script], stdout=subprocess.PIPE, text=True)
    assert backend.stdout is not None
    url = f"http://127.0.0.1:{backend.stdout.readline().strip()}"
    ratios = []
    try:
        for run in range(1, args.repeat + 1):
            result = measure(args, url)
            ratios.append(result["ratio"])
            print(
                f"run {run}: lineage off {result['off']:.3f} s ({result['off'] / args.appends * 1000:.1f} ms per "
                f"append), on {result['on']:.3f} s; ratio on/off {result['ratio']:.3f}, median of paired blocks "
                f"{result['paired']:.3f}; enable() {result['enable'] * 1000:.1f} ms, final disable() "
                f"{result['disable'] * 1000:.1f} ms (counted), helper backlog {result['backlog']:.3f} s (not counted)",
                flush=True,
            )
    finally:
        backend.terminate()
    sides = "lineage doing nothing on both sides (calibration)" if args.calibrate else "lineage on versus off"
    print(f"\n{args.appends} appends of 10 rows per side, in blocks of {args.block}, sqlite catalog; {sides}")
    print(f"median ratio over {args.repeat} runs: {statistics.median(ratios):.3f}   (target <= 1.02)")


if __name__ == "__main__":
    main()
