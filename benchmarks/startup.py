"""What the start-up hook costs an interpreter that does not use lineage.

Installing spark-lineage puts ``spark_lineage.pth`` in site-packages, so every Python of that environment
imports ``spark_lineage._autoload`` at start-up. This measures that, side by side in one run:

1. ``python -c pass`` in two fresh virtual environments that differ only in this package, installed from a
   wheel built here (what ``pip install spark-lineage`` gives): the start-up cost of every interpreter;
2. what the hook adds to ``import pyspark.sql`` in this environment (needs pyspark): importing PySpark takes
   hundreds of milliseconds and varies by tens from run to run on a busy machine, so a side-by-side difference
   would be noise; instead each of a series of fresh interpreters times the hook's own work from inside (our
   finder's answers to every import, loading ``spark_lineage._autoload``, wrapping ``SparkSession``).

Side-by-side runs alternate so drift hits both alike. Budget: under 2 ms added.

    python benchmarks/startup.py [--runs 300]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUDGET_MS = 2.0


def build_environments(workdir: Path) -> tuple[Path, Path]:
    """Two bare virtual environments; the second has spark-lineage (without dependencies) installed from a wheel."""
    wheels = workdir / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(ROOT)],
        check=True,
    )
    (wheel,) = wheels.glob("spark_lineage-*.whl")
    pythons = []
    for name in ("without", "with"):
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(workdir / name)], check=True)
        pythons.append(workdir / name / "bin" / "python")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(pythons[1]), "install", "-q", "--no-deps", str(wheel)],
        check=True,
    )
    return pythons[0], pythons[1]


def alternate(commands: dict[str, tuple[list[str], dict[str, str]]], runs: int) -> dict[str, list[float]]:
    """Wall time of each command, in ms, ``runs`` times each, alternating."""
    times: dict[str, list[float]] = {label: [] for label in commands}
    labels = list(commands)
    for run in range(runs):
        for label in labels if run % 2 == 0 else reversed(labels):
            command, env = commands[label]
            started = time.perf_counter()
            subprocess.run(command, env=env, check=True)
            times[label].append((time.perf_counter() - started) * 1000)
    return times


HOOK_TIMER = """
# Counts: every answer of the .pth file's finder (including, for pyspark.sql.session, the lookup the import
# system would otherwise make itself), loading spark_lineage._autoload, and wrapping SparkSession.
import json, sys, time
spent = 0.0
hook = next(f for f in sys.meta_path if type(f).__name__ == "SparkLineageStartupHook")
answer = hook.find_spec

def timed(function):
    def run(*args, **kwargs):
        global spent
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            spent += time.perf_counter() - started
    return run

hook.find_spec = timed(answer)
started = time.perf_counter()
import spark_lineage._autoload as autoload
spent += time.perf_counter() - started
autoload._patch_session_class = timed(autoload._patch_session_class)
import pyspark.sql
assert getattr(pyspark.sql.SparkSession.__init__, "_spark_lineage_patched", False), "the hook did not run"
print(json.dumps({"ms": spent * 1000}))
"""


def hook_time_importing_pyspark(env: dict[str, str]) -> float:
    result = subprocess.run([sys.executable, "-c", HOOK_TIMER], env=env, check=True, capture_output=True, text=True)
    return float(json.loads(result.stdout.splitlines()[-1])["ms"])


def report(title: str, times: dict[str, list[float]], baseline: str, measured: str) -> float:
    base, with_hook = statistics.median(times[baseline]), statistics.median(times[measured])
    added = with_hook - base
    print(f"\n{title}")
    print(f"  {baseline}: median {base:7.2f} ms, fastest {min(times[baseline]):7.2f} ms")
    print(f"  {measured}: median {with_hook:7.2f} ms, fastest {min(times[measured]):7.2f} ms")
    verdict = "within" if added < BUDGET_MS else "OVER"
    print(f"  added: {added:+.2f} ms   ratio {with_hook / base:.3f}   ({verdict} the {BUDGET_MS:.0f} ms budget)")
    return added


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=300, help="runs per side (default 300)")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "SPARK_LINEAGE_AUTOLOAD")}
    worst = 0.0
    with tempfile.TemporaryDirectory() as workdir:
        without, with_package = build_environments(Path(workdir))
        times = alternate(
            {
                "without spark-lineage": ([str(without), "-c", "pass"], env),
                "with spark-lineage": ([str(with_package), "-c", "pass"], env),
            },
            args.runs,
        )
        worst = max(
            worst, report("interpreter start-up (python -c pass)", times, "without spark-lineage", "with spark-lineage")
        )
    if importlib.util.find_spec("pyspark") is not None:
        hook_ms = [hook_time_importing_pyspark(env) for _ in range(max(args.runs // 10, 10))]
        added = statistics.median(hook_ms)
        print("\nimport pyspark.sql: the hook's own time, timed inside fresh interpreters")
        print(f"  median {added:.3f} ms, max {max(hook_ms):.3f} ms over {len(hook_ms)} interpreters")
        worst = max(worst, added)
    return 0 if worst < BUDGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
