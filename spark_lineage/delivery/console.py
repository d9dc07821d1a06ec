"""The console transport, made visible: one line per event on stdout.

openlineage-python's console transport (also what it falls back to when nothing is configured) writes each
event to an INFO log record, which nobody sees unless logging is set up for it: in a notebook or a plain
``spark-submit`` the events vanish without a word. This one still logs the JSON as before, and prints a short
line per event, so "no configuration" shows what lineage would send.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

from openlineage.client.transport.console import ConsoleConfig, ConsoleTransport
from openlineage.client.transport.transport import Transport


class PrintingConsoleTransport(ConsoleTransport):
    """openlineage-python's console transport that also prints each event as one line on stdout."""

    def __init__(self, config: ConsoleConfig | None = None) -> None:
        super().__init__(config or ConsoleConfig())

    def emit(self, event: Any) -> None:
        super().emit(event)
        # The spool hands over events it already redacted, so the line holds no secret.
        # A closed stdout (a kernel gone) must not make a delivered event count as failed and be sent again.
        with contextlib.suppress(OSError, ValueError):
            print(summary_line(event), file=sys.stdout, flush=True)


def summary_line(event: Any) -> str:
    """``OpenLineage COMPLETE ns/job run <id>: in1, in2 -> out``: what one event is about, without facets
    (datasets on the event that ends a run only)."""
    kind = getattr(getattr(event, "eventType", None), "value", None) or type(event).__name__
    job = getattr(event, "job", None)
    parts = [f"OpenLineage {kind}"]
    if job is not None:
        parts.append(f"{job.namespace}/{job.name}")
    run = getattr(event, "run", None)
    if run is not None:
        parts.append(f"run {run.runId}")
    line = " ".join(parts)
    if kind in ("START", "RUNNING"):  # the run's end says what it read and wrote: one long line, not four
        return line
    inputs = [_dataset(d) for d in getattr(event, "inputs", None) or ()]
    outputs = [_dataset(d) for d in getattr(event, "outputs", None) or ()]
    if getattr(event, "dataset", None) is not None:
        outputs.append(_dataset(event.dataset))
    if inputs or outputs:
        line += f": {', '.join(inputs) or '(no inputs)'} -> {', '.join(outputs) or '(no outputs)'}"
    return line


def dataset_label(namespace: str, name: str) -> str:
    """A dataset as people read it: local paths as they are, anything else with its namespace (this line,
    ``%lineage``)."""
    return name if namespace == "file" else f"{namespace}/{name}"


def _dataset(dataset: Any) -> str:
    return dataset_label(dataset.namespace, dataset.name)


def visible(transport: Transport) -> Transport:
    """``transport``, or a printing one in place of openlineage-python's own console transport."""
    return PrintingConsoleTransport() if type(transport) is ConsoleTransport else transport
