"""Side-by-side measurement: the same job in fresh processes, alternating lineage on and off, with a lineage
backend on loopback that answers at once and keeps connections alive, as a real one does.

``python benchmarks/_sidebyside.py`` runs that backend alone, printing its port, for a benchmark that wants it
in a process of its own."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class _Sink(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    received = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        _Sink.received += 1
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def child_arguments(parser: argparse.ArgumentParser, modes: tuple[str, ...]) -> None:
    """The hidden options a benchmark's child processes take: their side, the backend's URL, a work directory."""
    parser.add_argument("--child", choices=modes, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)


def run_as_child(args: argparse.Namespace, job: Callable[[str, str, Path], float | dict[str, Any]]) -> bool:
    """In a child process (``--child``): run ``job(side, backend_url, workdir)`` and print its seconds the way
    :func:`alternate` reads them (or, when it returns a dict, that dict: its ``seconds`` and whatever else the
    benchmark reports). Returns whether this process is a child."""
    if not args.child:
        return False
    result = job(args.child, args.url, Path(args.workdir))
    print(json.dumps(result if isinstance(result, dict) else {"seconds": result}))
    return True


def alternate(
    rounds: int,
    child_args: Callable[[str, str, str], list[str]],
    modes: tuple[str, ...] = ("on", "off"),
    details: dict[str, list[dict[str, Any]]] | None = None,
    describe: Callable[[dict[str, Any]], str] | None = None,
) -> tuple[dict[str, list[float]], int]:
    """Run ``rounds`` processes per side (``modes``: lineage on, off, and maybe others), in an order that
    turns each round (on, off; off, on; ...) so that drift hits every side alike. ``child_args(mode,
    backend_url, workdir)`` gives a child's command line after the interpreter; the child prints
    ``{"seconds": ...}`` as its last line. Returns the times per side and the events received. With
    ``details``, each child's whole last line is kept there by side; ``describe(last line)`` ends its round's
    line."""
    server = start_backend()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    times: dict[str, list[float]] = {mode: [] for mode in modes}
    try:
        for round_index in range(rounds):
            shift = round_index % len(modes)
            for mode in modes[shift:] + modes[:shift]:
                with tempfile.TemporaryDirectory() as workdir:
                    result = subprocess.run(
                        [sys.executable, *child_args(mode, url, workdir)],
                        capture_output=True,
                        text=True,
                        check=False,
                        env={**os.environ, "PYTHONUNBUFFERED": "1"},
                    )
                if result.returncode:
                    sys.exit(f"the lineage {mode} process failed ({result.returncode}):\n{result.stderr[-4000:]}")
                last = json.loads(result.stdout.strip().splitlines()[-1])
                seconds = last["seconds"]
                times[mode].append(seconds)
                if details is not None:
                    details.setdefault(mode, []).append(last)
                tail = describe(last) if describe is not None else ""
                print(f"round {round_index + 1} lineage {mode:>3}: {seconds:7.3f} s{tail}", flush=True)
    finally:
        server.shutdown()
    return times, _Sink.received


def report(
    times: dict[str, list[float]], operations: int, unit: str, target: float, labels: dict[str, str] | None = None
) -> dict[str, float]:
    """Print the median of each side and its ratio to lineage off; returns the ratios by side."""
    labels = {"on": "lineage on", "off": "lineage off", **(labels or {})}
    off = statistics.median(times["off"])
    print()
    ratios = {}
    for mode, series in times.items():
        median = statistics.median(series)
        ratios[mode] = median / off
        per_operation = f"{median / operations * 1000:.1f} ms per {unit}"
        print(f"median job wall time, {labels.get(mode, mode) + ':':<24} {median:.3f} s ({per_operation})")
    for mode, ratio in ratios.items():
        if mode != "off":
            budget = f"   (target <= {target:.2f})" if mode == "on" else ""
            print(f"ratio {labels.get(mode, mode)} / off: {ratio:.3f}{budget}")
    return ratios


def start_backend() -> ThreadingHTTPServer:
    """The loopback lineage backend, serving from a daemon thread."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


if __name__ == "__main__":
    backend = start_backend()
    print(backend.server_address[1], flush=True)
    threading.Event().wait()
