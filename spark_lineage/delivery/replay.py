"""Sending what earlier processes left in a spool: ``spark-lineage replay``.

Each destination's events go through the transport the caller configured, or else through the transport
their own destination was reached with (its settings are kept in the spool, without secrets: a backend that
needs an api key gets it from the usual configuration, ``OPENLINEAGE_API_KEY`` or ``openlineage.yml``).
Events keep their original times and run ids, go in the order they were spooled, and each one the backend
acknowledges is removed, so nothing acknowledged is sent twice.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from spark_lineage.delivery.failover import FailoverSpool
from spark_lineage.delivery.sender import Backoff, Sender
from spark_lineage.delivery.spool import Spool
from spark_lineage.delivery.transports import (
    API_KEY_ENV,
    leave_retries_to_the_spool,
    make_transport,
    needs_api_key,
    with_api_key,
)
from spark_lineage.worker import ErrorLog

REPLAY_MAX_BACKOFF_SECONDS = 2.0


@dataclass(frozen=True)
class ReplayResult:
    sent: int
    left: int
    jobs_left: tuple[str, ...]
    problems: tuple[str, ...] = ()
    """Destinations that could not be tried, and what to do about it."""


def replay(spool: Spool | FailoverSpool, transport: Any | None, timeout: float) -> ReplayResult:
    """Send everything in ``spool`` within ``timeout`` seconds per destination, through ``transport`` when one
    is given, else through each destination's own."""
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
            settings = json.loads(kept or "{}")
            if needs_api_key(settings):
                api_key = os.environ.get(API_KEY_ENV)
                if not api_key:
                    problems.append(
                        f"{destination} takes an api key, which the spool does not keep: set {API_KEY_ENV}, or "
                        "pass --conf spark.openlineage.transport.* settings"
                    )
                    continue
                settings = with_api_key(settings, api_key)
            try:
                target = make_transport(settings)
            except Exception as error:  # noqa: BLE001 - the other destinations are still replayed
                problems.append(
                    f"{destination}: its transport cannot be made here ({error}); pass --conf "
                    "spark.openlineage.transport.* settings"
                )
                continue
        leave_retries_to_the_spool(target)
        # Someone is waiting for this: a backend that refuses is asked again within seconds, not minutes.
        backoff = Backoff(first=0.25, most=REPLAY_MAX_BACKOFF_SECONDS)
        sender = Sender(spool, destination, target, errors, name="spark-lineage-replay", backoff=backoff)
        sender.close(timeout)
        sent += sender.sent
    left = spool.pending()
    return ReplayResult(sent, left.count, left.jobs, tuple(problems))
