"""The ``%lineage`` graph: which runs to show, and how to draw them at a notebook's width.

By default the graph is the data flow: one node per dataset, and each job an edge from what it read to what it
wrote (:func:`flow` leaves out the runs that wrote nothing, and merges the runs Spark makes for one action).
With ``--runs``, every run is a node of its own (two runs of one job stay two nodes), reads and writes as
edges. Either is laid out left to right. It is drawn by Graphviz's ``dot`` (through the
``graphviz`` package, the ``notebook`` extra) where that is installed, and as Mermaid source (which
JupyterLab 4.1 and later draw) where it is not. Long names are wrapped, and shortened in the middle, since
their start (namespace, application) and their end (table, file) are what tell them apart; the full identity
is in each node's tooltip.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from spark_lineage.errors import DatasetNotFoundError
from spark_lineage.process import RunSummary

SHOWN_RUNS = 12
"""Runs ``%lineage`` draws without ``--last``: more would not fit a notebook's width legibly."""
LINE_CHARS = 24
"""Characters per label line: keeps nodes narrow, so a few ranks fit side by side."""
DATASET_LINES = 3
JOB_LINES = 4
FONT_PT = 10
FIT_PX = 840
"""The widest a drawing is shown: what a notebook's output area leaves of a 1000 px window. A wider one is
scaled down to it, also where it is shown as an image (JupyterLab shows untrusted SVG that way), which CSS
in the SVG cannot shrink."""
MAX_WIDTH_PT = 800
"""Wider than this, a drawing scaled down to :data:`FIT_PX` would show its text below 10 px (Graphviz
works in points, 4/3 px): then it is laid out top to bottom instead, when that is narrower."""
ELLIPSIS = "…"

_JOB_FILL, _DATASET_FILL, _FAILED_FILL = "#e3ecfa", "#eef7ee", "#fde2e1"


@dataclass(frozen=True)
class Node:
    """A dataset or a run, as drawn: ``key`` is its id in the drawing, ``lines`` its label."""

    key: str
    kind: str  # "dataset" or "job"
    lines: tuple[str, ...]
    tooltip: str
    failed: bool = False


@dataclass
class Graph:
    """What one ``%lineage`` shows: nodes in the order things happened, edges from reads and writes."""

    nodes: list[Node] = field(default_factory=list)
    edges: list[tuple[str, str]] = field(default_factory=list)
    labels: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    """The lines of an edge's label: the job of a data flow's edge."""
    note: str = ""
    """Says what was left out (older runs), or is empty."""


ADAPTIVE = ".adaptive_spark_plan."
"""In a job's name, Spark's adaptive plan around a command's own write (4.3): the command names the action."""


def flow(runs: Sequence[RunSummary]) -> list[RunSummary]:
    """The runs of a data flow: those that wrote something (not read-only runs, nor runs without datasets),
    with the runs Spark makes for one action (a CTAS command and the adaptive plan of its write, each writing
    the same datasets one after the other) merged into one, named after the command, reading what either read."""
    merged: list[RunSummary] = []
    for run in runs:
        if not run.outputs:
            continue
        previous = merged[-1] if merged else None
        if previous is None or set(previous.outputs) != set(run.outputs):
            merged.append(run)
            continue
        named = previous if ADAPTIVE in run.job_name and ADAPTIVE not in previous.job_name else run
        merged[-1] = replace(
            named,
            state=previous.state if previous.state not in ("COMPLETE", "") else run.state,
            inputs=tuple(dict.fromkeys((*previous.inputs, *run.inputs))),
            datasets=tuple(dict.fromkeys((*previous.datasets, *run.datasets))),
        )
    return merged


def select_runs(
    runs: Sequence[RunSummary], last: int | None = None, dataset: str | None = None
) -> tuple[list[RunSummary], str]:
    """The runs to show, oldest first, and a note saying what was left out: those that read or wrote
    ``dataset`` (its label, its name, or a part of its label when nothing matches whole), then the last
    ``last`` (:data:`SHOWN_RUNS` when not given)."""
    chosen = list(runs)
    if dataset is not None:
        matching = _matching_labels(chosen, dataset)
        if not matching:
            raise DatasetNotFoundError(f"no run in this session read or wrote a dataset named {dataset!r}")
        chosen = [run for run in chosen if matching & {*run.inputs, *run.outputs}]
    limit = SHOWN_RUNS if last is None else last
    note = ""
    if len(chosen) > limit:
        note = f"the last {limit} of {len(chosen)} runs" + (" (--last N shows more)" if last is None else "")
        chosen = chosen[-limit:]
    return chosen, note


def _matching_labels(runs: Sequence[RunSummary], wanted: str) -> set[str]:
    labels: dict[str, set[str]] = {}  # label -> the names it is known by
    for run in runs:
        for label in (*run.inputs, *run.outputs):
            labels.setdefault(label, {label})
        for label, namespace, name in run.datasets:
            labels.setdefault(label, {label}).update({name, f"{namespace}/{name}"})
    whole = {label for label, names in labels.items() if wanted in names}
    return whole or {label for label in labels if wanted in label}


def build(runs: Sequence[RunSummary], note: str = "", flow: bool = False) -> Graph:
    """The graph of ``runs``: a dataset read or written by several runs is one node; each run is a node of its
    own, or with ``flow`` an edge from each dataset it read to each it wrote, labelled with its job (a run that
    read nothing stays a node, the start of its edges)."""
    graph = Graph(note=note)
    dataset_keys: dict[str, str] = {}
    repeated = _repeated_job_names(runs)
    for index, run in enumerate(runs):
        identities = {label: (namespace, name) for label, namespace, name in run.datasets}
        sources = [_dataset_node(graph, dataset_keys, label, identities) for label in run.inputs]
        if flow and sources:
            label = wrap_middle(run.job_name, 2, width=2 * LINE_CHARS)
            if run.state not in ("COMPLETE", ""):
                label += (run.state,)
            for target in (_dataset_node(graph, dataset_keys, output, identities) for output in run.outputs):
                for source in sources:
                    graph.edges.append((source, target))
                    graph.labels.setdefault((source, target), label)
            continue
        job = f"r{index}"
        failed = run.state not in ("COMPLETE", "")
        lines = wrap_middle(run.job_name, JOB_LINES)
        if run.job_name in repeated and run.run_id:  # same job, other run: the run id tells them apart
            lines += (f"run {ELLIPSIS}{run.run_id[-8:]}",)
        if failed:
            lines += (run.state,)
        identity = (f"namespace: {run.job_namespace or '?'}", f"name: {run.job_name}", f"run: {run.run_id or '?'}")
        tooltip = "\n".join(("job", *identity, run.state))
        graph.nodes.append(Node(job, "job", lines, tooltip, failed))
        graph.edges += [(source, job) for source in sources]
        graph.edges += [(job, _dataset_node(graph, dataset_keys, label, identities)) for label in run.outputs]
    graph.edges = list(dict.fromkeys(graph.edges))
    return graph


def _dataset_node(graph: Graph, keys: dict[str, str], label: str, identities: dict[str, tuple[str, str]]) -> str:
    """The key of the dataset ``label``, added to ``graph`` the first time it is seen."""
    if label not in keys:
        keys[label] = f"d{len(keys)}"
        namespace, name = identities.get(label, ("?", label))
        tooltip = f"dataset\nnamespace: {namespace}\nname: {name}"
        graph.nodes.append(Node(keys[label], "dataset", wrap_middle(label, DATASET_LINES), tooltip))
    return keys[label]


def _repeated_job_names(runs: Sequence[RunSummary]) -> set[str]:
    seen: set[str] = set()
    repeated: set[str] = set()
    for run in runs:
        (repeated if run.job_name in seen else seen).add(run.job_name)
    return repeated


_PIECE = re.compile(r"[^/._:\-]*[/._:\-]*")


def wrap_middle(text: str, max_lines: int, width: int = LINE_CHARS) -> tuple[str, ...]:
    """``text`` in lines of about ``width`` characters, broken after ``/ . _ : -`` where it can; when that
    takes more than ``max_lines`` lines, the middle ones go (marked ``…``): the start and the end stay."""
    lines: list[str] = []
    current = ""
    for piece in filter(None, _PIECE.findall(text)):
        if len(current) + len(piece) <= width:
            current += piece
            continue
        if current:
            lines.append(current)
        rest = piece
        while len(rest) > width:  # one piece longer than a line: cut it where the line ends
            lines.append(rest[:width])
            rest = rest[width:]
        current = rest
    if current:
        lines.append(current)
    if len(lines) <= max_lines:
        return tuple(lines) or ("",)
    head = max(max_lines // 2, 1)
    tail = lines[len(lines) - (max_lines - head) :]
    return (*lines[:head], ELLIPSIS + tail[0], *tail[1:])


# --- Graphviz -------------------------------------------------------------------------------------------------


def dot_available() -> bool:
    """Whether Graphviz can draw here: the ``graphviz`` package and the ``dot`` program."""
    try:
        import graphviz  # noqa: F401
    except ImportError:
        return False
    return shutil.which("dot") is not None


def dot_source(graph: Graph, rankdir: str = "LR") -> str:
    """The graph in Graphviz's language."""
    import graphviz

    drawing = graphviz.Digraph(
        "lineage",
        graph_attr={
            "rankdir": rankdir,
            "nodesep": "0.15",
            "ranksep": "0.3",
            "pad": "0.1",
            "fontname": "Helvetica,Arial,sans-serif",
            "fontsize": str(FONT_PT),
            "labelloc": "t",
            "labeljust": "l",
            "label": _dot_text(graph.note and f"showing {graph.note}"),
        },
        node_attr={
            "fontname": "Helvetica,Arial,sans-serif",
            "fontsize": str(FONT_PT),
            "margin": "0.08,0.04",
            "height": "0.3",
            "color": "#888888",
            "style": "filled",
        },
        edge_attr={
            "color": "#555555",
            "arrowsize": "0.6",
            "fontname": "Helvetica,Arial,sans-serif",
            "fontsize": str(FONT_PT),
        },
    )
    for node in graph.nodes:
        fill = _FAILED_FILL if node.failed else (_JOB_FILL if node.kind == "job" else _DATASET_FILL)
        drawing.node(
            node.key,
            label=_dot_text(*node.lines),
            tooltip=_dot_text(*node.tooltip.splitlines()),
            shape="box" if node.kind == "job" else "cylinder",
            style="rounded,filled" if node.kind == "job" else "filled",
            fillcolor=fill,
            # the SVG's class names the node's kind, so pages and tests can find datasets and runs
            **{"class": node.kind + (" failed" if node.failed else "")},
        )
    for source, target in graph.edges:
        label = graph.labels.get((source, target))
        if label is None:
            drawing.edge(source, target)
        else:
            drawing.edge(source, target, label=_dot_text(*label), fontcolor="#333333")
    text: str = drawing.source
    return text


def _dot_text(*lines: str) -> str:
    # Graphviz reads backslashes in labels as its own escapes: a Windows path keeps its backslashes doubled.
    return "\\n".join(line.replace("\\", "\\\\") for line in lines)


def svg(graph: Graph) -> str:
    """The graph drawn by ``dot`` as an SVG that shrinks to the width of its container, never grows, and is
    laid out top to bottom instead when left to right would be too wide to read at a notebook's width."""
    import graphviz

    drawn: str = graphviz.pipe("dot", "svg", dot_source(graph).encode(), quiet=True).decode()
    if _width_pt(drawn) > MAX_WIDTH_PT:
        downwards = graphviz.pipe("dot", "svg", dot_source(graph, "TB").encode(), quiet=True).decode()
        drawn = min(drawn, downwards, key=_width_pt)
    drawn = drawn[drawn.index("<svg") :]  # no XML prolog or DOCTYPE: the SVG goes inline into HTML
    return _fit(drawn)


def _fit(drawn: str) -> str:
    """The SVG at most :data:`FIT_PX` wide (its viewBox keeps the drawing whole), and shrinking with its
    container where it is inline in a page."""
    size = re.search(r'<svg([^>]*?) width="([\d.]+)pt" height="([\d.]+)pt"', drawn)
    if size is None:
        return drawn
    width, height = float(size.group(2)) * 4 / 3, float(size.group(3)) * 4 / 3
    scale = min(1.0, FIT_PX / width)
    fitted = (
        f'<svg{size.group(1)} width="{width * scale:.0f}px" height="{height * scale:.0f}px" '
        'style="max-width:100%;height:auto"'
    )
    return drawn[: size.start()] + fitted + drawn[size.end() :]


def _width_pt(drawn: str) -> float:
    found = re.search(r'<svg[^>]*\bwidth="([\d.]+)pt"', drawn)
    return float(found.group(1)) if found else 0.0


# --- Mermaid --------------------------------------------------------------------------------------------------


def mermaid(graph: Graph) -> str:
    """The graph as a Mermaid flowchart (datasets as cylinders, runs as rounded boxes), for front ends that
    draw Mermaid where Graphviz is not installed. Mermaid has no tooltips without scripts: no full names."""
    lines = ["flowchart LR"]
    if graph.note:
        lines.append(f"%% showing {graph.note}")
    for node in graph.nodes:
        label = "<br/>".join(_mermaid_text(line) for line in node.lines)
        lines.append(f'  {node.key}[("{label}")]' if node.kind == "dataset" else f'  {node.key}("{label}")')
    for source, target in graph.edges:
        job = graph.labels.get((source, target))
        text = "<br/>".join(_mermaid_text(line) for line in job) if job else ""
        lines.append(f'  {source} -->|"{text}"| {target}' if job else f"  {source} --> {target}")
    lines += [
        f"  classDef dataset fill:{_DATASET_FILL},stroke:#888",
        f"  classDef job fill:{_JOB_FILL},stroke:#888",
        f"  classDef failed fill:{_FAILED_FILL},stroke:#c00",
    ]
    for kind in ("dataset", "job", "failed"):
        keys = [n.key for n in graph.nodes if (n.failed if kind == "failed" else n.kind == kind and not n.failed)]
        if keys:
            lines.append(f"  class {','.join(keys)} {kind}")
    return "\n".join(lines)


def _mermaid_text(text: str) -> str:
    # Mermaid's entity codes: quotes would end the label, angle brackets would be read as HTML.
    for char, code in (("#", "#35;"), ('"', "#quot;"), ("<", "#lt;"), (">", "#gt;")):
        text = text.replace(char, code)
    return text
