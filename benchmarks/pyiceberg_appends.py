"""pyiceberg write time with iceberg_facets on versus off, measured side by side in one process.

    python benchmarks/pyiceberg_appends.py [--appends 200] [--block 10]

No Spark: a sqlite catalog on a temporary warehouse, two tables, and ``--appends`` appends of 10 rows to each.
Lineage is enabled once (the time ``enable()`` and ``disable()`` take is printed apart). The appends alternate
in blocks of ``--block`` (5): a block on the first table with lineage on, ending when every event of the block
has been delivered (``flush()``), then a block on the second table with pyiceberg's own methods put back, so
no lineage work at all. Drift in the machine's load (large on a shared
2-core VM) and the tables' growth (pyiceberg rewrites a longer manifest list and metadata file at each commit)
hit both sides alike. Events go over HTTP to a lineage backend on loopback, in another process. Printed: the
ratio of the total times, and the median of the on/off ratios of adjacent blocks, which a burst of load on
the machine cannot move much.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time

BACKEND = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Sink(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass

server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--appends", type=int, default=200, help="appends per side")
    parser.add_argument("--block", type=int, default=5, help="appends per block")
    args = parser.parse_args()

    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog

    import iceberg_facets

    backend = subprocess.Popen([sys.executable, "-c", BACKEND], stdout=subprocess.PIPE, text=True)
    assert backend.stdout is not None
    url = f"http://127.0.0.1:{backend.stdout.readline().strip()}"
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("tag", pa.string())])
    seconds = {"on": 0.0, "off": 0.0}
    pairs: list[float] = []
    try:
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
            # lineage work at all, and an "on" block waits at its end until its events have been delivered.
            instrumentation = handle._runtime.instrumentation  # type: ignore[union-attr]
            instrumentation.remove()
            for side in seconds:  # warm-up: first-commit costs, the delivery's first connection
                if side == "on":
                    instrumentation.install()
                append(side, 0)
                if side == "on":
                    assert handle.flush(60)
                    instrumentation.remove()
            done = 0
            while done < args.appends:
                count = min(args.block, args.appends - done)
                block: dict[str, float] = {}
                for side in ("on", "off") if (done // args.block) % 2 == 0 else ("off", "on"):
                    started = time.perf_counter()
                    if side == "on":
                        instrumentation.install()
                    for index in range(done, done + count):
                        append(side, 1 + index)
                    if side == "on":
                        assert handle.flush(60), "events left undelivered"
                        instrumentation.remove()
                    block[side] = time.perf_counter() - started
                    seconds[side] += block[side]
                pairs.append(block["on"] / block["off"])
                done += count
            instrumentation.install()
            started = time.perf_counter()
            assert handle.disable(timeout=60)
            disable_seconds = time.perf_counter() - started
    finally:
        backend.terminate()

    on, off = seconds["on"], seconds["off"]
    print(f"{args.appends} appends of 10 rows per side, in blocks of {args.block}, sqlite catalog")
    print(f"lineage off: {off:.3f} s ({off / args.appends * 1000:.1f} ms per append)")
    print(f"lineage on:  {on:.3f} s ({on / args.appends * 1000:.1f} ms per append)")
    print(f"ratio on/off: {on / off:.3f}   (target <= 1.02)")
    print(f"median of the {len(pairs)} paired block ratios: {statistics.median(pairs):.3f}   (robust to drift)")
    print(f"once per process: enable() {enable_seconds * 1000:.1f} ms, disable() {disable_seconds * 1000:.1f} ms")


if __name__ == "__main__":
    main()
