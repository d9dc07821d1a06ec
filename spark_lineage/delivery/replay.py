"""Sending what earlier processes left in a spool: ``spark-lineage replay``.

Each destination's events go through the transport the caller configured, or else through the transport
their own destination was reached with (its settings are kept in the spool, without secrets: a backend that
needs an api key, url parameters or headers gets them from the replaying user's configuration, ``--conf
spark.openlineage.transport.*``, ``OPENLINEAGE_API_KEY`` or ``openlineage.yml``; see
:class:`~spark_lineage.delivery.transports.ReplaySecrets`).
Events keep their original times and run ids, go in the order they were spooled, and each one the backend
acknowledges is removed, so nothing acknowledged is sent twice.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from spark_lineage.delivery.failover import FailoverSpool
from spark_lineage.delivery.sender import Backoff, Sender
from spark_lineage.delivery.spool import Spool
from spark_lineage.delivery.transports import CannotRebuildError, ReplaySecrets, leave_retries_to_the_spool, rebuilt
from spark_lineage.worker import ErrorLog

REPLAY_MAX_BACKOFF_SECONDS = 2.0


@dataclass(frozen=True)
class ReplayResult:
    sent: int
    left: int
    jobs_left: tuple[str, ...]
    problems: tuple[str, ...] = ()
    """Destinations that could not be tried, and what to do about it."""


def replay(
    spool: Spool | FailoverSpool, transport: Any | None, timeout: float, secrets: ReplaySecrets | None = None
) -> ReplayResult:
    """Send everything in ``spool`` within ``timeout`` seconds per destination, through ``transport`` when one
    is given, else through each destination's own, with ``secrets`` put back (default: ``$OPENLINEAGE_API_KEY``
    only)."""
    errors = ErrorLog("spark-lineage replay")
    sent = 0
    problems = []
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
            except CannotRebuildError as problem:  # the other destinations are still replayed
                problems.append(str(problem))
                continue
        leave_retries_to_the_spool(target)
        # Someone is waiting for this: a backend that refuses is asked again within seconds, not minutes.
        backoff = Backoff(first=0.25, most=REPLAY_MAX_BACKOFF_SECONDS)
        sender = Sender(spool, destination, target, errors, name="spark-lineage-replay", backoff=backoff)
        sender.close(timeout)
        sent += sender.sent
    left = spool.pending()
    return ReplayResult(sent, left.count, left.jobs, tuple(problems))
