"""Lineage's Python CPU by stage (:mod:`spark_lineage.costs`), with JVM round trips, as the benchmarks measure
it in a child process and print it in the parent: one table, shared."""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

from spark_lineage import costs
from spark_lineage.costs import Stage
from spark_lineage.jvm import round_trips


@contextmanager
def measuring_stages(into: dict[str, Any], *, jvm: bool = True) -> Iterator[None]:
    """Count round trips while inside, and leave in ``into["stages"]`` what each stage cost meanwhile, as
    ``{stage name: [CPU ns, calls, round trips]}`` (JSON for the parent process). ``jvm=False``: a process
    without py4j (a Spark Connect client's), whose round trips are not counted."""
    with round_trips.counting() if jvm else nullcontext():
        before = costs.snapshot()
        try:
            yield
        finally:
            into["stages"] = {s.name: [c.cpu_ns, c.calls, c.round_trips] for s, c in costs.since(before).items()}


def print_stage_table(runs: list[dict[str, Any]], operations: int, unit: str, indent: str = "") -> dict[Stage, float]:
    """The medians over ``runs`` (each with its ``stages``) per ``unit``, one row per stage that ran; returns the
    CPU milliseconds per ``unit`` of each stage."""
    print(f"{indent}{'stage':<34} {'CPU ms':>8} {'calls':>7} {'round trips':>12}   (per {unit})")
    stage_ms = {}
    for stage in Stage:
        cpu = statistics.median(run["stages"][stage.name][0] for run in runs) / operations / 1e6
        calls = statistics.median(run["stages"][stage.name][1] for run in runs) / operations
        trips = statistics.median(run["stages"][stage.name][2] for run in runs) / operations
        stage_ms[stage] = cpu
        if cpu or calls:
            print(f"{indent}{stage.value:<34} {cpu:>8.3f} {calls:>7.1f} {trips:>12.1f}")
    print(f"{indent}{'sum of the stages':<34} {sum(stage_ms.values()):>8.3f}")
    return stage_ms
