"""The console transport, made visible: one line per run on stdout.

openlineage-python's console transport (also what it falls back to when nothing is configured) writes each
event to an INFO log record, which nobody sees unless logging is set up for it: in a notebook or a plain
``spark-submit`` the events vanish without a word. This one still logs every event's JSON as before, and prints
a short line when a run ends (what it read and wrote, and how it ended), so "no configuration" shows what
lineage would send; ``python.console.everyEvent=true`` prints one for every event (START, each RUNNING). It
takes a spooled event's JSON as it is too (:meth:`PrintingConsoleTransport.emit_json`): the record holds the
text the spool holds.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Mapping
from typing import Any

from openlineage.client.transport.console import ConsoleConfig, ConsoleTransport
from openlineage.client.transport.console import log as console_log
from openlineage.client.transport.transport import Transport


class PrintingConsoleTransport(ConsoleTransport):
    """openlineage-python's console transport that also prints a line on stdout for each event that ends a run
    (and for dataset and job events), or for every event with ``every_event``."""

    def __init__(self, config: ConsoleConfig | None = None, every_event: bool = False) -> None:
        super().__init__(config or ConsoleConfig())
        self.every_event = every_event

    def emit(self, event: Any) -> None:
        super().emit(event)
        self._print(event)

    def emit_json(self, text: str) -> None:
        """Send a spooled event: its JSON as it is, to the log record ``emit`` writes, and its line."""
        console_log.info(text)
        self._print(json.loads(text))

    def _print(self, event: Any) -> None:
        state = _field(event, "eventType")
        if not self.every_event and getattr(state, "value", state) in _UNDER_WAY:
            return
        line = summary_line(event)
        # The spool hands over events it already redacted, so the line holds no secret.
        # A closed stdout (a kernel gone) must not make a delivered event count as failed and be sent again.
        with contextlib.suppress(OSError, ValueError):
            print(line, file=sys.stdout, flush=True)


_UNDER_WAY = ("START", "RUNNING", "OTHER")
"""The states of events that do not end their run: no line of their own unless ``every_event``."""


def summary_line(event: Any) -> str:
    """``OpenLineage COMPLETE ns/job run <id>: in1, in2 -> out``: what one event is about, without facets
    (datasets on the event that ends a run only). ``event``: openlineage-python's, or its JSON document."""
    state = _field(event, "eventType")
    if isinstance(event, Mapping):
        kind = state or ("DatasetEvent" if "dataset" in event else "JobEvent" if "run" not in event else "RunEvent")
    else:
        kind = getattr(state, "value", None) or type(event).__name__
    job = _field(event, "job")
    parts = [f"OpenLineage {kind}"]
    if job is not None:
        parts.append(f"{_field(job, 'namespace')}/{_field(job, 'name')}")
    run = _field(event, "run")
    if run is not None:
        parts.append(f"run {_field(run, 'runId')}")
    line = " ".join(parts)
    if kind in ("START", "RUNNING"):  # the run's end says what it read and wrote: one long line, not four
        return line
    inputs = [_dataset(d) for d in _field(event, "inputs") or ()]
    outputs = [_dataset(d) for d in _field(event, "outputs") or ()]
    if _field(event, "dataset") is not None:
        outputs.append(_dataset(_field(event, "dataset")))
    if inputs or outputs:
        line += f": {', '.join(inputs) or '(no inputs)'} -> {', '.join(outputs) or '(no outputs)'}"
    return line


def _field(part: Any, name: str) -> Any:
    """A field of an event or of a part of it, as an object or as its JSON."""
    return part.get(name) if isinstance(part, Mapping) else getattr(part, name, None)


def dataset_label(namespace: str, name: str) -> str:
    """A dataset as people read it: local paths as they are, anything else with its namespace (this line,
    ``%lineage``)."""
    return name if namespace == "file" else f"{namespace}/{name}"


def _dataset(dataset: Any) -> str:
    return dataset_label(_field(dataset, "namespace"), _field(dataset, "name"))


def visible(transport: Transport, every_event: bool = False) -> Transport:
    """``transport``, or a printing one in place of openlineage-python's own console transport (printing a line
    for every event with ``every_event``, else for each run's end)."""
    if type(transport) is ConsoleTransport:
        return PrintingConsoleTransport(every_event=every_event)
    if isinstance(transport, PrintingConsoleTransport):
        transport.every_event = every_event
    return transport
