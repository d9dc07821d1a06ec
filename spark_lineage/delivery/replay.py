"""Sending what earlier processes left in a spool: ``spark-lineage replay``.

Each destination's events go through the transport the caller configured, or else through the transport
their own destination was reached with (its settings are kept in the spool, without secrets: a backend that
needs an api key, url parameters or headers gets them from the replaying user's configuration, ``--conf
spark.openlineage.transport.*``, ``OPENLINEAGE_API_KEY`` or ``openlineage.yml``; see
:class:`~spark_lineage.delivery.transports.ReplaySecrets`).
Events keep their original times and run ids, each run's events go in the order they were spooled (different
runs in parallel, ``python.delivery.concurrency`` requests at once), and each one the backend acknowledges is
removed, so nothing acknowledged is sent twice. An answer that trying again will not change (HTTP 400, 401,
403, 404, 413) stops the destination's replay at once, with the URL tried and the status.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any
from urllib.parse import urljoin

from openlineage.client.transport.http import HttpTransport

from spark_lineage.delivery.failover import FailoverSpool
from spark_lineage.delivery.sender import Backoff, Sender
from spark_lineage.delivery.spool import Spool
from spark_lineage.delivery.transports import ReplaySecrets, rebuilt
from spark_lineage.errors import CannotRebuildError
from spark_lineage.redaction import Redactor, public_url
from spark_lineage.transports import leave_retries_to_the_spool
from spark_lineage.worker import ErrorLog, problem

REPLAY_MAX_BACKOFF_SECONDS = 2.0
PROGRESS_SECONDS = 0.25
"""How often :func:`replay` reports its progress."""
WILL_NOT_HEAL = {
    400: "the backend rejects the events as sent",
    401: "check the credentials (OPENLINEAGE_API_KEY, or --conf spark.openlineage.transport.auth.*)",
    403: "check the credentials (OPENLINEAGE_API_KEY, or --conf spark.openlineage.transport.auth.*)",
    404: "check the url and endpoint (--conf spark.openlineage.transport.url, .endpoint)",
    413: "an event is larger than the backend accepts",
}
"""HTTP answers that trying again will not change, and what to do about each."""


@dataclass(frozen=True)
class Progress:
    """How far a replay is: events delivered, events left in the spool, and events per second so far."""

    done: int
    left: int
    rate: float


@dataclass(frozen=True)
class ReplayResult:
    sent: int
    left: int
    jobs_left: tuple[str, ...]
    problems: tuple[str, ...] = ()
    """Destinations that could not be tried, and what to do about it."""
    refusals: tuple[str, ...] = ()
    """Destinations whose replay stopped on an answer that will not heal: the URL tried, the status, and what to
    do (``http://marquez:5000/api/v1/lineage answered HTTP 401 Unauthorized: check the credentials ...``)."""


def replay(
    spool: Spool | FailoverSpool,
    transport: Any | None,
    timeout: float,
    secrets: ReplaySecrets | None = None,
    concurrency: int = 1,
    progress: Callable[[Progress], None] | None = None,
) -> ReplayResult:
    """Send everything in ``spool`` within ``timeout`` seconds per destination, through ``transport`` when one
    is given, else through each destination's own, with ``secrets`` put back (default: ``$OPENLINEAGE_API_KEY``
    only), and up to ``concurrency`` requests in flight; ``progress`` hears how far it is every
    :data:`PROGRESS_SECONDS`."""
    errors = ErrorLog("spark-lineage replay")
    started = time.monotonic()
    sent = 0
    problems = []
    refusals = []
    for destination, kept in spool.destinations().items():
        target = transport
        if target is None and kept is None:
            problems.append(
                f"{destination}: the spool keeps no settings to reach it; pass --conf spark.openlineage.transport.* "
                "settings"
            )
            continue
        if target is None:
            try:
                target = rebuilt(destination, json.loads(kept or "{}"), secrets or ReplaySecrets.gathered({}))
            except CannotRebuildError as cannot:  # the other destinations are still replayed
                problems.append(str(cannot))
                continue
        leave_retries_to_the_spool(target)
        # Someone is waiting for this: a backend that refuses is asked again within seconds, not minutes.
        backoff = Backoff(first=0.25, most=REPLAY_MAX_BACKOFF_SECONDS)
        sender = Sender(
            spool,
            destination,
            target,
            errors,
            name="spark-lineage-replay",
            backoff=backoff,
            concurrency=concurrency,
            stop_on=lambda error: status_that_will_not_heal(error) is not None,
        )
        deadline = time.monotonic() + timeout
        while True:
            delivered = sender.flush(min(PROGRESS_SECONDS, max(deadline - time.monotonic(), 0.0)))
            if progress is not None:
                done = sent + sender.sent
                progress(Progress(done, spool.pending().count, done / max(time.monotonic() - started, 1e-3)))
            if delivered or sender.halted_by is not None or time.monotonic() >= deadline:
                break
        sender.close(0)
        sent += sender.sent
        if sender.halted_by is not None:
            refusals.append(refusal(target, sender.halted_by))
    left = spool.pending()
    return ReplayResult(sent, left.count, left.jobs, tuple(problems), tuple(refusals))


def status_that_will_not_heal(error: BaseException) -> int | None:
    """The HTTP status of a failed send, when trying again will not change it (:data:`WILL_NOT_HEAL`)."""
    status = getattr(getattr(_http_error(error), "response", None), "status_code", None)
    return status if status in WILL_NOT_HEAL else None


def refusal(transport: Any, error: BaseException) -> str:
    """``<url tried> answered HTTP <status> <reason>: <what to do>``, without secrets."""
    status = status_that_will_not_heal(error)
    if isinstance(transport, HttpTransport):
        url = urljoin(transport.url, transport.endpoint)
    else:  # an HTTP transport inside a composite or transform one: the request's own URL
        url = str(getattr(getattr(_http_error(error), "response", None), "url", "") or "?")
    shown = Redactor().text(public_url(url))  # without credentials, query-string values, or secret pairs
    if status is None:  # not a refusal after all: said as the sender says failures
        return f"{shown}: {problem(error)}"
    return f"{shown} answered HTTP {status} {HTTPStatus(status).phrase}: {WILL_NOT_HEAL[status]}"


def _http_error(error: BaseException) -> BaseException | None:
    """The link of ``error``'s chain that carries an HTTP response."""
    current: BaseException | None = error
    seen = 0
    while current is not None and seen < 10:
        if getattr(current, "response", None) is not None:
            return current
        current = current.__cause__ or current.__context__
        seen += 1
    return None
