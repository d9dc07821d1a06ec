"""Lineage in IPython and Jupyter: ``%load_ext spark_lineage`` and the ``%lineage`` magic.

- ``%load_ext spark_lineage``: lineage on for the active SparkSession, and for every session created later;
- ``%lineage off`` / ``%lineage on``: switch it for this kernel's sessions;
- ``%lineage``: the runs so far, inputs -> job -> outputs, as a graph (SVG) in a notebook and as text in a
  terminal.

Where the notebook's file name can be known (Jupyter server's ``JPY_SESSION_NAME``, VS Code's
``__vsc_ipynb_file__``), it names the application in job names, so runs of different notebooks stay apart.
"""

from __future__ import annotations

import html
import os
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import PurePath
from typing import Any

from spark_lineage.session import RunSummary

USAGE = "usage: %lineage [on | off]   (no argument: show the runs of this session so far)"
FLUSH_SECONDS = 10.0


def notebook_name() -> str | None:
    """The running notebook's file name without ``.ipynb``, when the front end says which it is."""
    candidates = [os.environ.get("JPY_SESSION_NAME")]
    shell = _ipython()
    if shell is not None:
        candidates += [shell.user_ns.get("__vsc_ipynb_file__"), shell.user_ns.get("__session__")]
    for candidate in candidates:
        if isinstance(candidate, str) and candidate.endswith(".ipynb"):
            return PurePath(candidate).stem
    return None


def load(ipython: Any) -> None:
    """``%load_ext spark_lineage``."""
    ipython.register_magic_function(lineage_magic, magic_kind="line", magic_name="lineage")
    switch(True)


def unload(ipython: Any) -> None:
    """``%unload_ext spark_lineage``: lineage off, and later sessions decided by their configuration again."""
    from spark_lineage import activation

    switch(False)
    activation.follow_new_sessions(None)


def lineage_magic(line: str) -> LineageGraph | None:
    """``%lineage [on | off]``."""
    argument = line.strip().lower()
    if argument in ("on", "off"):
        switch(argument == "on")
        print(f"spark_lineage: lineage {argument} for this kernel's Spark sessions")
        return None
    if argument:
        print(USAGE, file=sys.stderr)
        return None
    from spark_lineage import session

    session.flush_all(FLUSH_SECONDS)
    return LineageGraph(session.recent_runs())


def switch(on: bool) -> None:
    """Lineage on (or off) for the active SparkSession and every one created from now on."""
    from spark_lineage import _autoload, activation, session

    activation.follow_new_sessions(on)
    if not on:
        session.disable_all()
        return
    _autoload.install(force=True)
    active = _active_spark_session()
    if active is not None:
        activation.session_created(active)


def _active_spark_session() -> Any:
    module = sys.modules.get("pyspark.sql.session")
    if module is None:
        return None
    try:
        return module.SparkSession.getActiveSession()
    except Exception:  # noqa: BLE001 - no usable session is the same as none
        return None


def _ipython() -> Any:
    module = sys.modules.get("IPython")
    get = getattr(module, "get_ipython", None)
    return get() if get is not None else None


class LineageGraph:
    """Runs as a graph: datasets and jobs as nodes, reads and writes as edges. Shows as SVG where the front
    end renders images, and as one line per run elsewhere."""

    def __init__(self, runs: Sequence[RunSummary]) -> None:
        self.runs = list(runs)

    def __repr__(self) -> str:
        if not self.runs:
            return "no lineage runs yet in this session"
        lines = []
        for run in self.runs:
            inputs = ", ".join(run.inputs) or "(no inputs)"
            outputs = ", ".join(run.outputs) or "(no outputs)"
            lines.append(f"{inputs} -> [{run.job_name}] -> {outputs}" + ("" if run.state == "COMPLETE" else " FAILED"))
        return "\n".join(lines)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))

    def _repr_svg_(self) -> str | None:
        if not self.runs:
            return None
        return _svg(_layout(self.runs), self.runs)


# --- layout and drawing ---------------------------------------------------------------------------------------

_NODE_WIDTH = 310
_NODE_HEIGHT = 34
_COLUMN_GAP = 70
_ROW_GAP = 16
_MARGIN = 12
_CHARS = 46  # what fits in a node at the font size used
_LOOP_ROOM = 30  # above the nodes, for edges that go back to an earlier column


def _edges(runs: Iterable[RunSummary]) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    edges = []
    for run in runs:
        job = ("job", run.job_name)
        edges += [(("dataset", name), job) for name in run.inputs]
        edges += [(job, ("dataset", name)) for name in run.outputs]
    return list(dict.fromkeys(edges))


def _layout(runs: Sequence[RunSummary]) -> dict[tuple[str, str], tuple[int, int]]:
    """Column = longest path from a source, row = order of first appearance within the column. Cycles (a
    MERGE reads its own target) are cut at the edge that closes them, found by a depth-first walk in the
    order things happened."""
    nodes: dict[tuple[str, str], None] = {}
    for run in runs:
        nodes.update(dict.fromkeys(("dataset", name) for name in run.inputs))
        nodes[("job", run.job_name)] = None
        nodes.update(dict.fromkeys(("dataset", name) for name in run.outputs))
    children: dict[tuple[str, str], list[tuple[str, str]]] = {node: [] for node in nodes}
    for source, target in _edges(runs):
        children[source].append(target)

    closing: set[tuple[tuple[str, str], tuple[str, str]]] = set()
    state: dict[tuple[str, str], str] = {}

    def walk(node: tuple[str, str]) -> None:
        state[node] = "open"
        for child in children[node]:
            if state.get(child) == "open":
                closing.add((node, child))
            elif child not in state:
                walk(child)
        state[node] = "done"

    for node in nodes:
        if node not in state:
            walk(node)
    parents: dict[tuple[str, str], list[tuple[str, str]]] = {node: [] for node in nodes}
    for source, targets in children.items():
        for target in targets:
            if (source, target) not in closing:
                parents[target].append(source)
    column: dict[tuple[str, str], int] = {}

    def depth(node: tuple[str, str]) -> int:
        if node not in column:
            column[node] = max((depth(p) + 1 for p in parents[node]), default=0)
        return column[node]

    for node in nodes:
        depth(node)
    for node in nodes:  # a source sits just before its first reader, so its edge stays short
        readers = [column[child] for child in children[node] if (node, child) not in closing]
        if readers and not parents[node]:
            column[node] = min(readers) - 1
    rows: dict[int, int] = {}
    placed = {}
    for node in nodes:
        col = column[node]
        placed[node] = (col, rows.get(col, 0))
        rows[col] = rows.get(col, 0) + 1
    return placed


def _svg(placed: dict[tuple[str, str], tuple[int, int]], runs: Sequence[RunSummary]) -> str:
    def box(node: tuple[str, str]) -> tuple[int, int]:
        col, row = placed[node]
        return (_MARGIN + col * (_NODE_WIDTH + _COLUMN_GAP), _LOOP_ROOM + row * (_NODE_HEIGHT + _ROW_GAP))

    failed = {("job", run.job_name) for run in runs if run.state != "COMPLETE"}
    width = _MARGIN * 2 + (max(c for c, _ in placed.values()) + 1) * (_NODE_WIDTH + _COLUMN_GAP) - _COLUMN_GAP
    height = _MARGIN + _LOOP_ROOM + (max(r for _, r in placed.values()) + 1) * (_NODE_HEIGHT + _ROW_GAP) - _ROW_GAP
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>',
    ]
    for source, target in _edges(runs):
        (x1, y1), (x2, y2) = box(source), box(target)
        if x2 > x1:  # forward: from the right side of one node to the left side of the next
            x1, y1, y2 = x1 + _NODE_WIDTH, y1 + _NODE_HEIGHT // 2, y2 + _NODE_HEIGHT // 2
            bend = f"C{x1 + _COLUMN_GAP // 2},{y1} {x2 - _COLUMN_GAP // 2},{y2}"
        else:  # back to an earlier column (a job writing what it read): over the top
            x1, x2 = x1 + _NODE_WIDTH // 2, x2 + _NODE_WIDTH // 2
            bend = f"C{x1},{y1 - _LOOP_ROOM} {x2},{y2 - _LOOP_ROOM}"
        parts.append(
            f'<path class="edge" data-from="{_attr(source[1])}" data-to="{_attr(target[1])}" '
            f'd="M{x1},{y1} {bend} {x2},{y2}" fill="none" stroke="#555" marker-end="url(#arrow)"/>'
        )
    for node in placed:
        kind, label = node
        x, y = box(node)
        fill = "#fde2e1" if node in failed else ("#e3ecfa" if kind == "job" else "#eef7ee")
        radius = 4 if kind == "job" else 14
        parts.append(
            f'<g class="{kind}"><title>{html.escape(label)}</title>'
            f'<rect x="{x}" y="{y}" width="{_NODE_WIDTH}" height="{_NODE_HEIGHT}" rx="{radius}" fill="{fill}" '
            f'stroke="#888"/><text x="{x + 8}" y="{y + _NODE_HEIGHT // 2 + 4}">{html.escape(_short(label))}</text>'
            "</g>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _short(label: str) -> str:
    """Long paths keep their end, which is the part that tells datasets apart."""
    return label if len(label) <= _CHARS else "..." + label[-(_CHARS - 3) :]


def _attr(text: str) -> str:
    return html.escape(re.sub(r"\s+", " ", text), quote=True)
