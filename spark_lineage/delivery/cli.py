"""``spark-lineage replay``: the command line around :func:`spark_lineage.delivery.replay.replay`, and around
:func:`spark_lineage.delivery.salvage.salvage` (``--salvage FILE``, and a spool found damaged). It never prints a
traceback: whatever fails is one line on stderr, and the exit status."""

from __future__ import annotations

import contextlib
import math
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from spark_lineage.delivery.failover import FailoverSpool
from spark_lineage.delivery.replay import Progress, replay
from spark_lineage.delivery.salvage import salvage
from spark_lineage.delivery.spool import SPOOL_FILE, DiskProblem, Spool, default_spool_dir, disk_problem, set_aside
from spark_lineage.delivery.transports import CONF_TRANSPORT, ReplaySecrets, create_client, make_transport
from spark_lineage.redaction import Redactor, protect_logs
from spark_lineage.worker import one_line


def replay_command(
    directory: Path | None, confs: Mapping[str, str], timeout: float, salvaged: Path | None = None
) -> int:
    """Deliver the spool's events (those recovered from the damaged file ``salvaged``, when given); print what
    was sent and what is left. 0 when nothing is left. On a terminal, stderr shows the progress meanwhile.
    Never raises."""
    redactor = Redactor()
    protect_logs(redactor)
    try:
        return _replay(directory, confs, timeout, salvaged, redactor)
    except Exception as error:  # noqa: BLE001 - one line, never a traceback, never a secret
        print(f"spark-lineage replay: {redactor.text(one_line(error))}", file=sys.stderr)
        return 2


def _replay(
    directory: Path | None, confs: Mapping[str, str], timeout: float, salvaged: Path | None, redactor: Redactor
) -> int:
    if not math.isfinite(timeout) or timeout < 0:
        print(
            f"spark-lineage replay: --timeout={timeout} is not valid; accepted: a number of seconds >= 0",
            file=sys.stderr,
        )
        return 2
    where = (directory or default_spool_dir()).expanduser()
    if salvaged is None and not (where / SPOOL_FILE).is_file():
        print(f"spark-lineage replay: no spool at {where} (nothing was ever left to deliver there)")
        return 0
    ReplaySecrets.gathered(confs).teach(redactor)
    try:
        # What the spool does not keep (url parameters, headers, an api key), known before anything is logged.
        secrets = ReplaySecrets.gathered(confs, _client_transport_settings())
        secrets.teach(redactor)
        transport = _configured_transport(confs)
        concurrency = _concurrency(confs)
    except Exception as error:  # noqa: BLE001 - a configuration that cannot work is reported, not raised
        print(f"spark-lineage replay: {redactor.text(str(error))}", file=sys.stderr)
        return 2
    if salvaged is None:
        try:
            Spool(where).close()
        except Exception as error:  # noqa: BLE001
            if disk_problem(error) is not DiskProblem.DAMAGED:
                print(f"spark-lineage replay: cannot open the spool at {where}: {one_line(error)}", file=sys.stderr)
                return 2
            salvaged = set_aside(where)
            print(
                f"spark-lineage replay: the spool at {where} is damaged ({one_line(error)}): moved it to {salvaged}",
                file=sys.stderr,
            )
    if salvaged is not None:
        try:
            recovery = salvage(salvaged)
        except OSError as error:
            print(f"spark-lineage replay: cannot salvage {salvaged}: {one_line(error)}", file=sys.stderr)
            return 2
        where = recovery.directory
        if recovery.earlier:
            print(f"spark-lineage replay: {salvaged} was salvaged before; its events wait in {where}")
        else:
            print(
                f"spark-lineage replay: recovered {recovery.recovered} events from {salvaged} "
                f"({recovery.unreadable} unreadable; read by {' and '.join(recovery.readers)}) into {where}"
            )
    # Read as a job's own spool is (a disk found full is read without writing leases on it), never spooled to.
    spool = FailoverSpool(where, label="spark-lineage replay", setting="--spool", replaying=True)
    before = spool.pending()
    meter = ProgressLine(sys.stderr) if sys.stderr.isatty() else None
    try:
        result = replay(spool, transport, timeout, secrets, concurrency, meter)
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


def _concurrency(confs: Mapping[str, str]) -> int:
    """How many requests may be in flight (``python.delivery.concurrency``, from ``--conf``, else its default)."""
    from spark_lineage import config

    key = f"{config.CONF_PREFIX}python.delivery.concurrency"
    return config.resolve({key: confs[key]} if key in confs else {}).delivery_concurrency


def _configured_transport(confs: Mapping[str, str]) -> Any | None:
    """The transport ``--conf`` keys or openlineage-python's own configuration name; ``None`` when neither
    names one (then each event's own destination is used). ``--conf`` keys that only give secrets (url
    parameters, headers, an api key: :meth:`ReplaySecrets.is_key`) name no transport: they complete each
    destination's own."""
    from spark_lineage import config

    spark_keys = {key: value for key, value in confs.items() if key.startswith(config.CONF_PREFIX)}
    if not any(key.startswith(CONF_TRANSPORT) and not ReplaySecrets.is_key(key) for key in spark_keys):
        spark_keys = {key: value for key, value in spark_keys.items() if not ReplaySecrets.is_key(key)}
    if spark_keys:
        settings = config.resolve(spark_keys)
        if settings.transport is not None:
            redactor = Redactor(settings.redaction_pattern)
            protect_logs(redactor)
            return create_client(settings, redactor).transport
    own = _client_transport_settings()
    redactor = Redactor()
    protect_logs(redactor)
    if own.get("type"):
        redactor.learn_from_transport(own)
        return make_transport(own)
    if os.environ.get("OPENLINEAGE_URL"):
        return create_client(config.resolve({}), redactor).transport  # learns the url's secrets
    return None


def _client_transport_settings() -> dict[str, Any]:
    """openlineage-python's own transport settings (``openlineage.yml``, ``OPENLINEAGE__TRANSPORT__*``)."""
    from openlineage.client import OpenLineageClient
    from openlineage.client.transport.noop import NoopConfig, NoopTransport

    # A client with a transport given reads openlineage.yml and OPENLINEAGE__* without resolving (and
    # announcing) a fallback transport of its own.
    return dict(OpenLineageClient(transport=NoopTransport(NoopConfig())).config.transport or {})
