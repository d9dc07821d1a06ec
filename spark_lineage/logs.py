"""What this library prints, and where: quiet by default, one line per problem, tracebacks at DEBUG.

- :func:`sending`: while the sender thread hands an event to openlineage-python, what openlineage-python,
  requests and urllib3 log at WARNING or above (a composite transport's child that failed, urllib3's retry
  warnings) is reported once per kind through the sender's :class:`~spark_lineage.worker.ErrorLog` instead of
  once per event; the record itself goes on at DEBUG only.
- :func:`show_on_stderr`: a job turned on by configuration alone (``spark-submit --conf spark.openlineage.*``)
  never configures Python logging, and Python then prints WARNING and above only: the activation path calls
  this so that the one INFO line saying where lineage goes is seen too. It adds a handler of its own to the
  ``spark_lineage`` logger only while nobody configured logging (no handler on the way to the root logger),
  at the level ``$SPARK_LINEAGE_LOG_LEVEL`` names (default INFO).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from collections.abc import Iterator

from spark_lineage.worker import ErrorLog, problem

LOG_LEVEL_ENV = "SPARK_LINEAGE_LOG_LEVEL"
"""``DEBUG``, ``INFO`` (the default for configuration-driven lineage), ``WARNING``, ``ERROR`` or ``OFF``."""

LIBRARY_LOGGERS = (
    "openlineage.client.client",
    "openlineage.client.transport",
    "openlineage.client.transport.composite",
    "openlineage.client.transport.http",
    "openlineage.client.transport.kafka",
    "openlineage.client.transport.msk_iam",
    "openlineage.client.transport.transform",
    "openlineage.client.transport.file",
    "openlineage.client.transport.console",
    "requests",
    "urllib3.connectionpool",
    "urllib3.util.retry",
)
"""The loggers openlineage-python's transports log through while sending (a filter on a logger sees only the
records logged on that very logger, not on its children, so each is named)."""

_state = threading.local()
_filter_lock = threading.Lock()
_filter_installed = False


class _DuringSends(logging.Filter):
    """On a thread inside :func:`sending`, a record at WARNING or above becomes one report of the sender's
    :class:`ErrorLog` (said once per kind) and is kept only where DEBUG is on, as a DEBUG record."""

    def filter(self, record: logging.LogRecord) -> bool:
        errors: ErrorLog | None = getattr(_state, "errors", None)
        if errors is None or record.levelno < logging.WARNING:
            return True
        destination = getattr(_state, "destination", "the backend")
        said = _first_line(_in_few_words(record))
        # One kind per call site and problem (a composite's child that is down is one kind, however many events).
        errors.report(
            f"{record.name} while sending: {said}", message=f"sending to {destination}: {record.name}: {said}"
        )
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


def _in_few_words(record: logging.LogRecord) -> str:
    """The record's message, with each exception among its arguments said as :func:`problem` says it."""
    if not isinstance(record.args, tuple) or not any(isinstance(arg, BaseException) for arg in record.args):
        return record.getMessage()
    args = tuple(problem(arg) if isinstance(arg, BaseException) else arg for arg in record.args)
    try:
        return str(record.msg) % args
    except (TypeError, ValueError):
        return record.getMessage()


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0][:300] if lines else ""


@contextlib.contextmanager
def sending(errors: ErrorLog, destination: str) -> Iterator[None]:
    """Within this block, on this thread, what openlineage-python and urllib3 warn about is reported once per
    kind through ``errors`` (see the module doc)."""
    _install_filter()
    previous = getattr(_state, "errors", None), getattr(_state, "destination", None)
    _state.errors, _state.destination = errors, destination
    try:
        yield
    finally:
        _state.errors, _state.destination = previous


def _install_filter() -> None:
    global _filter_installed
    if _filter_installed:
        return
    with _filter_lock:
        if _filter_installed:
            return
        only = _DuringSends()
        for name in LIBRARY_LOGGERS:
            logging.getLogger(name).addFilter(only)
        _filter_installed = True


class _WhileUnconfigured(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to the current ``sys.stderr``, and only while no handler exists on the way to the root logger
    besides this one: once the application configures logging, its handlers print our lines, not this one."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("%(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        if _configured_elsewhere(self):
            return
        self.stream = sys.stderr  # pytest and notebooks swap sys.stderr: follow it
        super().emit(record)


def _configured_elsewhere(ours: logging.Handler | None = None) -> bool:
    """Whether a handler other than ``ours`` would get the ``spark_lineage`` logger's records."""
    logger: logging.Logger | None = logging.getLogger("spark_lineage")
    while logger is not None:
        if any(handler is not ours for handler in logger.handlers):
            return True
        if not logger.propagate:
            return False
        logger = logger.parent
    return False


def show_on_stderr(default: str | None = "INFO") -> None:
    """Make the ``spark_lineage`` logger's lines reach stderr from ``$SPARK_LINEAGE_LOG_LEVEL``, or else from
    ``default`` (``None``: leave logging alone unless the variable is set), when the application configured no
    logging of its own; with logging configured, only the variable's level is applied to the logger. Calling it
    again changes nothing."""
    wanted = (os.environ.get(LOG_LEVEL_ENV) or default or "").strip().upper()
    logger = logging.getLogger("spark_lineage")
    if not wanted or any(isinstance(handler, _WhileUnconfigured) for handler in logger.handlers):
        return
    level = logging.CRITICAL + 1 if wanted == "OFF" else logging.getLevelName(wanted)
    if not isinstance(level, int):
        level = logging.INFO
    configured = _configured_elsewhere()
    # An application that configured logging chose its levels: only the variable overrides them.
    quieter = logger.level == logging.NOTSET or logger.level > level
    if os.environ.get(LOG_LEVEL_ENV) or (not configured and quieter):
        logger.setLevel(level)
    if wanted == "OFF" or configured:
        return
    handler = _WhileUnconfigured()
    handler.setLevel(level)
    logger.addHandler(handler)
