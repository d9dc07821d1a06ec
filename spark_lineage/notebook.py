"""Lineage in IPython and Jupyter: ``%load_ext spark_lineage`` and the ``%lineage`` magic.

- ``%load_ext spark_lineage``: lineage on for the active SparkSession, and for every session created later;
- ``%lineage off`` / ``%lineage on``: switch it for this kernel's sessions;
- ``%lineage [--last N] [--dataset NAME] [--runs]``: the data flow so far, as a graph in a notebook
  (:mod:`spark_lineage.notebook_graph` draws it) and as text in a terminal: datasets, and an edge for each job
  from what it read to what it wrote (``--runs``: every run, reading or writing, as a node of its own).

``spark`` may be a Spark Connect session of a server PySpark runs in the kernel (``remote("local[N]")``): the
switch then applies to that server's session (:mod:`spark_lineage.connect.local`), which reports the client's
queries.

Where the notebook's file name can be known (Jupyter server's ``JPY_SESSION_NAME``, VS Code's
``__vsc_ipynb_file__``), it names the application in job names, so runs of different notebooks stay apart.
"""

from __future__ import annotations

import contextlib
import logging
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from spark_lineage import notebook_graph
from spark_lineage.errors import DatasetNotFoundError, NotebookUsageError
from spark_lineage.process import RunSummary

USAGE = (
    "usage: %lineage [--last N] [--dataset NAME] [--runs]\n"
    "                                               show this kernel's data flow: the jobs that wrote (the last\n"
    "                                               N; those that read or wrote dataset NAME); --runs: every run\n"
    "       %lineage on | off                       switch lineage for this kernel's Spark sessions"
)
FLUSH_SECONDS = 10.0
CELL_FLUSH_SECONDS = 5.0
"""How long the end of a cell waits for its queries' lineage, so that their lines print under it: Spark hands
over a finished query a moment after the action returns, and its events are sent from a background thread. A
backend that refuses is not waited for (the events wait in the spool)."""


def load(ipython: Any) -> None:
    """``%load_ext spark_lineage``: lineage on, one line saying where events go, and each cell's lineage
    delivered (and printed, with the console transport) before the cell ends."""
    ipython.register_magic_function(lineage_magic, magic_kind="line", magic_name="lineage")
    switch(True)
    with contextlib.suppress(ValueError):  # loaded twice: registered once
        ipython.events.unregister("post_run_cell", after_cell)
    ipython.events.register("post_run_cell", after_cell)
    print(f"spark_lineage: {_where_events_go()}")


def unload(ipython: Any) -> None:
    """``%unload_ext spark_lineage``: lineage off, and later sessions decided by their configuration again."""
    from spark_lineage import activation

    switch(False)
    activation.follow_new_sessions(None)
    with contextlib.suppress(ValueError):
        ipython.events.unregister("post_run_cell", after_cell)


def after_cell(result: Any = None) -> None:
    """IPython's ``post_run_cell``: deliver what the cell's queries sent, within :data:`CELL_FLUSH_SECONDS`, so
    that what prints of it prints under this cell, not the next. Never raises."""
    from spark_lineage.process import PROCESS

    try:
        PROCESS.flush_all(CELL_FLUSH_SECONDS, past_refusals=False)
    except Exception:
        logging.getLogger("spark_lineage").debug("spark_lineage: flushing after a cell failed", exc_info=True)


@dataclass(frozen=True)
class Options:
    """What a ``%lineage`` line asks for: a switch (``on``/``off``), or which runs to show."""

    switch: bool | None = None
    last: int | None = None
    dataset: str | None = None
    runs: bool = False
    """Every run as Spark made it, not the data flow."""


def parse_options(line: str) -> Options:
    """The options of a ``%lineage`` line; :class:`NotebookUsageError` for anything else."""
    try:
        words = shlex.split(line)
    except ValueError as error:  # an unclosed quote
        raise NotebookUsageError(str(error)) from None
    if len(words) == 1 and words[0].lower() in ("on", "off"):
        return Options(switch=words[0].lower() == "on")
    last: int | None = None
    dataset: str | None = None
    every_run = False
    while words:
        word = words.pop(0)
        if word == "--runs":
            every_run = True
            continue
        option, equals, value = word.partition("=")
        if option not in ("--last", "--dataset"):
            raise NotebookUsageError(f"unknown argument {word!r}")
        if not equals:
            if not words:
                raise NotebookUsageError(f"{option} needs a value")
            value = words.pop(0)
        if option == "--dataset":
            dataset = value
        elif not value.isdigit() or int(value) < 1:
            raise NotebookUsageError(f"--last takes a number of runs (1 or more), not {value!r}")
        else:
            last = int(value)
    return Options(last=last, dataset=dataset, runs=every_run)


def lineage_magic(line: str) -> LineageGraph | None:
    """``%lineage [on | off | --last N | --dataset NAME]``. A line that does not parse prints why and the
    usage, never a traceback: a magic's user is at a notebook, not debugging it."""
    try:
        options = parse_options(line)
    except NotebookUsageError as error:
        print(f"%lineage: {error}\n{USAGE}", file=sys.stderr)
        return None
    if options.switch is not None:
        argument = "on" if options.switch else "off"
        switch(options.switch)
        print(f"spark_lineage: lineage {argument} for this kernel's Spark sessions")
        return None
    from spark_lineage.process import PROCESS

    PROCESS.flush_all(FLUSH_SECONDS)
    runs = PROCESS.recent_runs()
    flow = not options.runs
    try:
        chosen, note = notebook_graph.select_runs(
            notebook_graph.flow(runs) if flow else runs, options.last, options.dataset
        )
    except DatasetNotFoundError as error:
        print(f"%lineage: {error}", file=sys.stderr)
        return None
    return LineageGraph(chosen, note, flow=flow)


def _where_events_go() -> str:
    """``lineage on; events go to <destination>``, without secrets. Never raises: this is only a message."""
    from spark_lineage.process import PROCESS
    from spark_lineage.redaction import Redactor

    where = PROCESS.destinations()
    state = "lineage on" if where else "lineage on from the next SparkSession"
    try:
        where = where or [_configured_destination()]
    except Exception as error:  # noqa: BLE001 - the session will log the same configuration error itself
        return f"{state}; its configuration does not make a transport: {Redactor().text(str(error))}"
    described = ", ".join(
        "the console (one line per query run, printed below the cell that ran it)"
        if destination == "console"
        else destination
        for destination in where
    )
    return Redactor().text(f"{state}; events go to {described}")


def _configured_destination() -> str:
    """Where the client's own configuration (``OPENLINEAGE_URL``, ``openlineage.yml``, ``OPENLINEAGE__*``)
    sends events, as ``spark-lineage doctor`` finds it."""
    from spark_lineage import config
    from spark_lineage.delivery.transports import create_client
    from spark_lineage.redaction import Redactor
    from spark_lineage.transports import describe

    resolved = config.resolve({})
    redactor = Redactor(resolved.redaction_pattern)
    # openlineage-python warns when it falls back to the console; the line printed here says that already,
    # and the session's own client will warn again when it starts
    client_log = logging.getLogger("openlineage.client.client")
    level = client_log.level
    client_log.setLevel(logging.ERROR)
    try:
        destination, _ = describe(create_client(resolved, redactor).transport)
    finally:
        client_log.setLevel(level)
    return redactor.text(destination)


def switch(on: bool) -> None:
    """Lineage on (or off) for the active SparkSession and every one created from now on."""
    from spark_lineage import _autoload, activation
    from spark_lineage.process import PROCESS

    activation.follow_new_sessions(on)
    if not on:
        PROCESS.disable_all()
        return
    _autoload.install(force=True)
    active = _active_spark_session()
    if active is not None:
        activation.session_created(active)


def _active_spark_session() -> Any:
    """The active session: in Spark Connect mode PySpark answers with the Connect client's, which
    :func:`spark_lineage.activation.session_created` takes to its in-process server's."""
    module = sys.modules.get("pyspark.sql.session")
    if module is None:
        return None
    try:
        return module.SparkSession.getActiveSession()
    except Exception:  # noqa: BLE001 - no usable session is the same as none
        return None


class LineageGraph:
    """Runs as a graph: datasets as nodes, and each job an edge from what it read to what it wrote (``flow``),
    or each run a node of its own. Drawn by Graphviz as SVG where it is installed, else given as Mermaid (which
    JupyterLab 4.1 and later draw), and as one line per run in a terminal."""

    def __init__(self, runs: Sequence[RunSummary], note: str = "", flow: bool = False) -> None:
        self.runs = list(runs)
        self.note = note
        """What was left out (older runs), or empty."""
        self.flow = flow

    def __repr__(self) -> str:
        if not self.runs:
            return "no lineage runs yet in this session"
        lines = []
        for run in self.runs:
            inputs = ", ".join(run.inputs) or "(no inputs)"
            outputs = ", ".join(run.outputs) or "(no outputs)"
            lines.append(f"{inputs} -> [{run.job_name}] -> {outputs}" + ("" if run.state == "COMPLETE" else " FAILED"))
        if self.note:
            lines.append(f"(showing {self.note})")
        return "\n".join(lines)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))

    def graph(self) -> notebook_graph.Graph:
        """The nodes and edges drawn."""
        return notebook_graph.build(self.runs, self.note, flow=self.flow)

    def _repr_svg_(self) -> str | None:
        if not self.runs or not notebook_graph.dot_available():
            return None
        return notebook_graph.svg(self.graph())

    def _repr_markdown_(self) -> str | None:
        if not self.runs or notebook_graph.dot_available():
            return None
        return f"```mermaid\n{notebook_graph.mermaid(self.graph())}\n```"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        # JupyterLab 4.1+ draws this MIME type; other front ends fall back to the markdown or the text
        if not self.runs or notebook_graph.dot_available():
            return {}
        return {"text/vnd.mermaid": notebook_graph.mermaid(self.graph())}
