"""``spark-lineage replay``: the command line around :func:`spark_lineage.delivery.replay.replay`."""

from __future__ import annotations

import contextlib
import math
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from spark_lineage.delivery.replay import Progress, replay
from spark_lineage.delivery.spool import SPOOL_FILE, Spool, default_spool_dir
from spark_lineage.delivery.transports import create_client, make_transport
from spark_lineage.redaction import Redactor, protect_logs


def replay_command(directory: Path | None, confs: Mapping[str, str], timeout: float) -> int:
    """Deliver the spool's events; print what was sent and what is left. 0 when nothing is left. On a terminal,
    stderr shows the progress meanwhile."""
    if not math.isfinite(timeout) or timeout < 0:
        print(
            f"spark-lineage replay: --timeout={timeout} is not valid; accepted: a number of seconds >= 0",
            file=sys.stderr,
        )
        return 2
    where = (directory or default_spool_dir()).expanduser()
    if not (where / SPOOL_FILE).is_file():
        print(f"spark-lineage replay: no spool at {where} (nothing was ever left to deliver there)")
        return 0
    try:
        transport, concurrency = _configured_transport(confs)
    except Exception as error:  # noqa: BLE001 - a configuration that cannot work is reported, not raised
        print(f"spark-lineage replay: {error}", file=sys.stderr)
        return 2
    spool = Spool(where)
    before = spool.pending()
    meter = ProgressLine(sys.stderr) if sys.stderr.isatty() else None
    try:
        result = replay(spool, transport, timeout, concurrency, meter)
    finally:
        if meter is not None:
            meter.clear()
    spool.close()
    for problem in result.problems:
        print(f"spark-lineage replay: {problem}", file=sys.stderr)
    for refusal in result.refusals:
        print(f"spark-lineage replay: stopped: {refusal}", file=sys.stderr)
    print(f"spark-lineage replay: {result.sent} of {before.count} events delivered from {where}", end="")
    if result.left:
        jobs = ", ".join(result.jobs_left[:5]) + (" and more" if len(result.jobs_left) > 5 else "")
        if result.refusals:
            print(f"; {result.left} left (jobs {jobs}), kept in the spool")
        else:
            print(f"; {result.left} left (jobs {jobs}): the backend did not take them, try again later")
        return 1
    print()
    return 1 if result.refusals else 0


class ProgressLine:
    """The replay's progress, one line rewritten in place on a terminal: ``1200 delivered, 800 left, 95.3
    events/s``. Never raises: a terminal gone away only costs the progress."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self._shown = False

    def __call__(self, progress: Progress) -> None:
        line = f"spark-lineage replay: {progress.done} delivered, {progress.left} left, {progress.rate:.1f} events/s"
        self._write(f"\r{line}{CLEAR_TO_END}")
        self._shown = True

    def clear(self) -> None:
        if self._shown:
            self._write(f"\r{CLEAR_TO_END}")

    def _write(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.stream.write(text)
            self.stream.flush()


CLEAR_TO_END = "\x1b[K"
"""The terminal sequence that erases the rest of the line."""


def _configured_transport(confs: Mapping[str, str]) -> tuple[Any | None, int]:
    """The transport ``--conf`` keys or openlineage-python's own configuration name (``None`` when neither
    names one: then each event's own destination is used), and how many requests may be in flight
    (``python.delivery.concurrency``)."""
    from spark_lineage import config

    spark_keys = {key: value for key, value in confs.items() if key.startswith(config.CONF_PREFIX)}
    settings = config.resolve(spark_keys)
    if settings.transport is not None:
        redactor = Redactor(settings.redaction_pattern)
        protect_logs(redactor)
        return create_client(settings, redactor).transport, settings.delivery_concurrency
    from openlineage.client import OpenLineageClient
    from openlineage.client.transport.noop import NoopConfig, NoopTransport

    # A client with a transport given reads openlineage.yml and OPENLINEAGE__* without resolving (and
    # announcing) a fallback transport of its own.
    own = OpenLineageClient(transport=NoopTransport(NoopConfig())).config.transport or {}
    if own.get("type"):
        return make_transport(own), settings.delivery_concurrency
    if os.environ.get("OPENLINEAGE_URL"):
        return OpenLineageClient().transport, settings.delivery_concurrency
    return None, settings.delivery_concurrency
