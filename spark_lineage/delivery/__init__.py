"""Getting events to the backend without losing them and without holding up the job.

- :mod:`~spark_lineage.delivery.spool`: the durable spool every event goes into before it is sent;
- :mod:`~spark_lineage.delivery.failover`: this process's spool, on disk or, when the disk fails, in memory, and
  what became of each of its events;
- :mod:`~spark_lineage.delivery.sender`: the thread that sends what the spool holds, with one backoff per
  backend;
- :mod:`~spark_lineage.delivery.enrichment`: what openlineage-python's client does to an event, done before it
  is spooled;
- :mod:`~spark_lineage.delivery.payloads`: events as the spool stores them;
- :mod:`~spark_lineage.delivery.transports`: how the spool's transports are made (and made again for replay,
  secrets put back), and how a spooled event's JSON goes out through them as it is (what each kind of
  transport is called, and its retries, are its kind's: :mod:`spark_lineage.transports`);
- :mod:`~spark_lineage.delivery.replay`: sending what earlier processes left (``spark-lineage replay``);
- :mod:`~spark_lineage.delivery.salvage`: reading what can still be read from a damaged spool file.

:class:`Delivery` is what both engines (a Spark session's lineage, ``iceberg_facets``) hand their events to: one
at a time, or the events of a query together, spooled in one transaction.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spark_lineage import costs
from spark_lineage.costs import Stage
from spark_lineage.delivery.encoding import EventEncoder
from spark_lineage.delivery.enrichment import Enricher, Enrichments, prepare
from spark_lineage.delivery.failover import FailoverSpool, Fates
from spark_lineage.delivery.journal import Journal, journals_supported
from spark_lineage.delivery.payloads import Event, Payload, to_payloads
from spark_lineage.delivery.sender import Sender, lineage_events, undelivered
from spark_lineage.delivery.spool import SPOOL_DIR_ENV, Handoff, Spool, SpooledEvent, default_spool_dir
from spark_lineage.delivery.transports import create_client, needs_api_key
from spark_lineage.redaction import Redactor
from spark_lineage.transports import describe, kind_of, leave_retries_to_the_spool, warnings
from spark_lineage.worker import ErrorLog, one_line

if TYPE_CHECKING:
    from openlineage.client import OpenLineageClient

    from spark_lineage.config import LineageConfig

log = logging.getLogger("spark_lineage")
_WARNED: set[str] = set()
"""What was said of the transports' settings (:func:`spark_lineage.transports.warnings`), to say it once."""

__all__ = [
    "Delivery",
    "FailoverSpool",
    "Held",
    "RunBatches",
    "Spool",
    "create_client",
    "fates_line",
    "open_spool",
    "prepare",
    "undelivered",
    "where_events_go",
]


def open_spool(
    config: LineageConfig, setting: str = "spark.openlineage.python.spool.dir", label: str = "spark_lineage"
) -> FailoverSpool:
    """This process's spool, as the configuration names it: ``python.spool.dir``, ``$SPARK_LINEAGE_SPOOL_DIR``,
    or the user's state directory; in memory with ``python.spool.disabled=true``. Never raises: a directory that
    cannot hold a spool is said once, at WARNING, naming ``setting`` (what the user calls the directory setting)
    and what it costs, and events are held in memory (see :mod:`~spark_lineage.delivery.failover`)."""
    if config.spool_disabled:
        return FailoverSpool(None, config.spool_max_bytes, label=label)
    directory = Path(config.spool_dir).expanduser() if config.spool_dir else default_spool_dir()
    if config.spool_dir:
        source = setting
    elif os.environ.get(SPOOL_DIR_ENV):
        source = f"${SPOOL_DIR_ENV}"
    else:
        source = f"${SPOOL_DIR_ENV} or {setting}"
    return FailoverSpool(directory, config.spool_max_bytes, label=label, setting=source)


_HANDING = "handing events to a sender's lane"
"""The kind of error of offering a sender's lane a query's events, or handing them over (logged once)."""


@dataclass(frozen=True)
class Held:
    """Why a delivery sends nothing while lineage is still captured (the transport settings were refused), and
    the ``--conf`` flags that were refused, as the user gave them without their secrets: its events are
    spooled, and the lines at its start and end say how to deliver them once the settings are fixed."""

    reason: str
    confs: str


HELD_DESTINATION = "spark.openlineage.transport.* (refused)"
"""What a held delivery's events are spooled under: the spool keeps no settings for it, so ``spark-lineage
replay`` asks for ``--conf spark.openlineage.transport.*``, and sends them there."""


@dataclass(frozen=True)
class RunBatches:
    """What the events of one run share when they are handed over in several batches (a Spark Connect client's
    action: its START when it is sent, its end when it ends): the encoder that converts the parts they share
    once, and the enrichment the client's first event taught (:class:`~spark_lineage.delivery.enrichment.Enricher`)."""

    encoder: EventEncoder
    enricher: Enricher


class _HeldSender:
    """The sender of a held delivery: it takes nothing and sends nothing; the events stay spooled."""

    sent = 0
    problem = None
    """Said when the delivery started (and by its destination's name): not again at its end."""

    def offer(self) -> None:
        return None

    def hand(self, handoff: Handoff, leased: list[SpooledEvent], asked: float) -> None:
        """Nothing is ever offered."""

    def wake(self) -> None:
        """Nothing is sent."""

    def flush(self, timeout: float | None, *, past_refusals: bool = True) -> bool:
        return False

    def close(self, timeout: float | None, *, past_refusals: bool = True) -> bool:
        return False

    def after_stop(self, action: Callable[[], object]) -> None:
        action()


class Delivery:
    """Spools each event, without its secrets, then sends it from a background thread; whatever cannot be
    sent stays spooled."""

    @classmethod
    def configured(
        cls,
        config: LineageConfig,
        client: OpenLineageClient,
        errors: ErrorLog,
        redactor: Redactor,
        *,
        held: Held | None = None,
        label: str = "spark_lineage",
        spool_setting: str = "spark.openlineage.python.spool.dir",
        yield_cpu: bool = True,
        linger: float = 0.0,
    ) -> Delivery:
        """The delivery ``config`` describes (its spool, producer and concurrency), sending through ``client``;
        ``spool_setting`` is what the user calls the spool directory's setting (see :func:`open_spool`);
        ``yield_cpu``: its threads yield the CPU to the job, which runs in this process (see
        :func:`~spark_lineage.worker.yield_cpu_to_the_job`)."""
        spool = open_spool(config, spool_setting, label=label)
        return cls(
            client,
            spool,
            errors,
            redactor,
            label,
            config.producer,
            config.delivery_concurrency,
            held,
            yield_cpu=yield_cpu,
            linger=linger,
        )

    def __init__(
        self,
        client: OpenLineageClient,
        spool: FailoverSpool,
        errors: ErrorLog,
        redactor: Redactor,
        label: str = "spark_lineage",
        producer: str | None = None,
        concurrency: int = 1,
        held: Held | None = None,
        *,
        yield_cpu: bool = True,
        linger: float = 0.0,
    ) -> None:
        """``label`` starts the log lines (the library the user turned on); ``producer`` (the
        ``python.producer`` setting) replaces the default producer in every event (see :func:`to_payload`);
        ``concurrency`` (``python.delivery.concurrency``) is how many requests may be in flight at once;
        ``held``: why nothing is to be sent (every event is spooled, for ``spark-lineage replay``); ``linger``:
        how long the sender lets spooled events wait for more (see :class:`~spark_lineage.delivery.sender.Sender`)."""
        self.client = client
        self._enrichments = Enrichments(client)
        """What the client added to the runs given :meth:`run_batches` so far, for their later runs."""
        self.producer = producer
        self.spool = spool
        self.redactor = redactor
        self.label = label
        self._errors = errors
        self.held = held
        self._keeping = threading.Lock()
        """Held while events are kept or spooled: the kept ones go before any spooled after them."""
        self._kept: list[Payload] = []
        self._journal: Journal | None = None
        self.sender: Sender | _HeldSender
        if held is not None:
            self.enabled = True
            self.destination = HELD_DESTINATION
            self._needs_api_key = False
            self.sender = _HeldSender()
            log.warning(
                "%s: delivery is off: %s. Lineage is still captured, and spooled in %s: nothing is lost. Once the "
                "settings are fixed, deliver it with: %s",
                label,
                redactor.text(held.reason).rstrip("."),
                spool.path if spool.path is not None else "memory (python.spool.disabled=true: lost at exit)",
                self._replay_command(),
            )
            return
        transport = client.transport
        self.enabled = sends_anywhere(transport)
        self.destination, settings = describe(transport)
        self._needs_api_key = needs_api_key(settings)
        if not self.enabled:
            return
        for warning in warnings(transport):  # sent as openlineage-python sends; said once per process
            if warning not in _WARNED:
                _WARNED.add(warning)
                log.warning("%s: %s", label, redactor.text(warning))
        leave_retries_to_the_spool(transport)
        spool.remember_destination(self.destination, json.dumps(settings, sort_keys=True))
        self.sender = Sender(
            spool, self.destination, transport, errors, concurrency=concurrency, yield_cpu=yield_cpu, linger=linger
        )

    def submit(self, event: Event) -> None:
        """Spool ``event`` (on the calling thread: about a millisecond) and let the sender know. Never raises."""
        self.submit_all((event,))

    def run_batches(self) -> RunBatches:
        """What the batches of one run's events are to share (see :meth:`submit_all`)."""
        return RunBatches(EventEncoder(), Enricher(self.client, self._enrichments))

    def submit_all(self, events: Sequence[Event], run: RunBatches | None = None) -> None:
        """Spool ``events`` in order, in one transaction (a query's events: its START, RUNNING and end), and let
        the sender know once; ``run``: what earlier batches of the same run's events left (see
        :meth:`run_batches`), so that the parts these share with them are converted once and the client's
        enrichment is not asked again. An event that cannot be built is counted lost by its job, and the others
        go on. Never raises."""
        if not self.enabled or not events:
            return
        payloads = self._payloads(events, run)
        with self._keeping:
            self._spool_after_kept(payloads)

    def keep(self, events: Sequence[Event], run: RunBatches | None = None) -> None:
        """:meth:`submit_all`, but the events wait, made, in memory for :meth:`spool_kept`, which spools every one
        kept in one transaction (a Spark Connect client's actions close together: each START as it is sent, each
        end's events as it ends). They are written
        to the delivery's journal first (one write), which the next process to open the spool reads should
        this one be killed meanwhile (see :mod:`~spark_lineage.delivery.journal`); where there can be no
        journal, or it cannot be written, they are spooled at once. Never raises."""
        if not self.enabled or not events:
            return
        payloads = self._payloads(events, run)
        if not payloads:
            return
        with self._keeping:
            if self._journal_for_keeping(payloads):
                self._kept += payloads
            else:
                self._spool_after_kept(payloads)

    def spool_kept(self) -> None:
        """Spool the events :meth:`keep` kept, in one transaction, and empty the journal. Never raises."""
        with self._keeping:
            self._spool_after_kept([])

    def _spool_after_kept(self, payloads: list[Payload]) -> None:
        """Spool what is kept and then ``payloads``, in one transaction, and empty the journal (under
        ``_keeping``)."""
        kept, self._kept = self._kept, []
        self._spool(kept + payloads)
        if kept and self._journal is not None:
            try:
                self._journal.clear()
            except OSError as error:  # the next process spools them again: at least once, as always
                self._errors.report("emptying the journal of the events kept", error)

    def _journal_for_keeping(self, payloads: Sequence[Payload]) -> bool:
        """Whether ``payloads`` may be kept (under ``_keeping``): written to the journal, or with the spool in
        memory (killed, the process loses what it spooled there too)."""
        directory = self.spool.path
        if directory is None:
            return True
        if not journals_supported():
            return False
        try:
            if self._journal is None:
                self._journal = Journal(directory)
            self._journal.append(self.destination, payloads)
        except OSError as error:
            self._errors.report("writing the journal of the events kept", error)
            return False
        return True

    def _spool(self, payloads: list[Payload]) -> None:
        """Spool ``payloads`` in one transaction and let the sender know (under ``_keeping``)."""
        if not payloads:
            return
        # Leased to a lane waiting for work as they are spooled, when nothing is before them: the lane sends them
        # without reading them back (see Spool.put_all).
        try:
            handoff = self.sender.offer()
        except Exception as error:  # noqa: BLE001 - spooled without a handoff: a lane leases them
            self._errors.report(_HANDING, error)
            handoff = None
        asked = time.time()
        try:
            with costs.stage(Stage.SPOOL_WRITE):
                stored = self.spool.put_all(self.destination, payloads, handoff)
        except Exception as error:  # noqa: BLE001 - a spool that cannot be written must not fail the job
            self._lost([payload.job for payload in payloads], error)
            return
        dropped = stored.dropped
        if dropped.count:
            # Once full, the spool drops events at every put: said once, then counted (ErrorLog).
            self._errors.report(
                "keeping events in a full spool",
                message=f"the lineage spool at {self.spool.location} is full (python.spool.maxBytes="
                f"{self.spool.max_bytes}): dropped the {dropped.count} oldest query-run events (jobs "
                f"{', '.join(sorted(dropped.jobs))}); application-run events are kept",
            )
        try:
            if handoff is not None:
                self.sender.hand(handoff, stored.leased, asked)
            else:
                self.sender.wake()
        except Exception as error:  # noqa: BLE001 - spooled: given back, a lane leases them in their turn
            self._errors.report(_HANDING, error)
            self._give_back(handoff, stored.leased)

    def _payloads(self, events: Sequence[Event], run: RunBatches | None) -> list[Payload]:
        """The payloads of one run's ``events``, enriched and encoded (see :meth:`submit_all`)."""
        prepared: list[Event] = []
        enrich = run.enricher if run is not None else Enricher(self.client, self._enrichments)
        encoder = run.encoder if run is not None else None
        with costs.stage(Stage.ENRICHMENT):
            for event in events:
                try:
                    enriched = enrich(event)
                    if enriched is not None:
                        prepared.append(enriched)
                except Exception as error:  # noqa: BLE001 - an event that cannot be built must not fail the job
                    self._lost([_job_name(event)], error)
        # Encoded once all are prepared (enrichment changes events in place), with one encoder: the parts the
        # events share are converted once.
        return to_payloads(
            prepared, self.redactor, self.producer, lambda event, error: self._lost([_job_name(event)], error), encoder
        )

    def _give_back(self, handoff: Handoff | None, leased: Sequence[SpooledEvent]) -> None:
        """Release the events a handoff leased to a lane they never reached, and wake a lane to lease them (should
        that fail too, their lease runs out and they go then)."""
        try:
            if handoff is not None and leased:
                self.spool.release([event.id for event in leased], handoff.owner)
            self.sender.wake()
        except Exception as error:  # noqa: BLE001
            self._errors.report("giving back events a lane never got", error)

    def _lost(self, jobs: list[str], error: Exception) -> None:
        """Events of ``jobs`` that could not be built or spooled: said once, and counted at the end."""
        self._errors.report("spooling an event", error)
        for job in jobs:
            self.spool.lost(job, f"it could not be built or spooled ({one_line(error)})")

    def description(self) -> str:
        """Where events go, for people (see :func:`where_events_go`)."""
        if self.held is not None:
            where = f"spooled in {self.spool.path}" if self.spool.path is not None else "held in memory"
            return f"events are {where}, not sent: the transport settings were refused"
        return where_events_go(self.client.transport, self.spool)

    def _replay_command(self) -> str:
        """The command that delivers what this process spooled (with the fixed settings, when held)."""
        confs = f" {self.held.confs}" if self.held is not None and self.held.confs else ""
        return f"spark-lineage replay --spool {self.spool.directory}{confs}"

    def flush(self, timeout: float | None, *, past_refusals: bool = True) -> bool:
        return self.sender.flush(timeout, past_refusals=past_refusals) if self.enabled else True

    def close(self, timeout: float | None) -> bool:
        """Send what can be sent within ``timeout``, close the spool, and say in one line what became of this
        process's events (see :func:`fates_line`). Returns whether everything was delivered."""
        if not self.enabled:
            self.spool.close()
            return True
        self.spool_kept()
        with self._keeping:
            if self._journal is not None:
                self._journal.close()
        # What waits on disk is safe: a backend that refuses is not waited for (a replay, or the next process's
        # sender, delivers it). What only memory holds is waited for, within the timeout.
        on_disk_only = self.spool.pending_in_memory(self.destination) == 0
        delivered = self.sender.close(timeout, past_refusals=not on_disk_only)
        fates = self.spool.fates()
        self.sender.after_stop(self.spool.close)
        level, line = fates_line(
            fates,
            label=self.label,
            destination=self.destination,
            problem=self.sender.problem,
            spool=self.spool,
            api_key=self._needs_api_key,
            replay=self._replay_command(),
        )
        if fates.total:
            log.log(level, "%s", line)
        return delivered and fates.total == fates.delivered


JOBS_NAMED = 5
"""How many jobs a line names before it says how many more there are."""


def fates_line(
    fates: Fates,
    *,
    label: str,
    destination: str,
    problem: str | None,
    spool: FailoverSpool,
    api_key: bool = False,
    replay: str | None = None,
) -> tuple[int, str]:
    """The line that ends a process's lineage, and its level: how many of its events were delivered, spooled for
    a replay, and lost; the jobs of those not delivered, and why. INFO when all were delivered, else WARNING.

    ``spark_lineage: 210 lineage events: 30 delivered, 1 spooled for replay, 179 lost; the 1 spooled (jobs a) were
    not delivered to http h/api/v1/lineage (connection refused) and wait in /s: deliver them with: spark-lineage
    replay --spool /s; 179 lost (jobs b, c): neither spooled (...) nor delivered to ... before the process
    ended``"""
    lost = len(fates.unsent) + len(fates.lost)
    line = (
        f"{label}: {lineage_events(fates.total)}: {fates.delivered} delivered, {len(fates.spooled)} spooled for "
        f"replay, {lost} lost"
    )
    if not fates.spooled and not lost:
        return logging.INFO, line
    why = f" ({problem})" if problem else ""
    if fates.spooled:
        where = spool.directory
        # No "OPENLINEAGE_API_KEY=<key>" here: the log redaction would take "<key>" for a secret value.
        with_key = ", with the api key in $OPENLINEAGE_API_KEY" if api_key else ""
        line += (
            f"; the {len(fates.spooled)} spooled (jobs {named(fates.spooled)}) were not delivered to {destination}"
            f"{why} and wait in {where}: deliver them with: {replay or f'spark-lineage replay --spool {where}'}"
            f"{with_key}"
        )
    reasons: dict[str, list[str]] = {}
    if fates.unsent:
        reasons[f"neither spooled ({spool.problem}) nor delivered to {destination}{why} before the process ended"] = (
            list(fates.unsent)
        )
    for loss in fates.lost:
        reasons.setdefault(loss.reason, []).append(loss.job)
    for reason, jobs in reasons.items():
        line += f"; {len(jobs)} lost (jobs {named(jobs)}): {reason}"
    return logging.WARNING, line


def named(jobs: list[str] | tuple[str, ...]) -> str:
    """``a, b and 3 more``: the distinct jobs, in order, at most :data:`JOBS_NAMED` of them."""
    distinct = sorted(set(jobs))
    more = len(distinct) - JOBS_NAMED
    return ", ".join(distinct[:JOBS_NAMED]) + (f" and {more} more" if more > 0 else "")


def sends_anywhere(transport: Any) -> bool:
    """Whether a transport sends events anywhere (not ``None``, not ``noop``: its kind's
    :attr:`~spark_lineage.transports.TransportKind.sends`)."""
    return transport is not None and kind_of(transport).sends


def where_events_go(transport: Any, spool: Spool | FailoverSpool) -> str:
    """``events go to <target> (spooled in <dir>)``: the line that says lineage is on ends with it, from
    either engine."""
    if not sends_anywhere(transport):
        return "events go nowhere (no transport, or a noop one)"
    target = describe(transport)[0].removeprefix("http ")
    spooled = f"spooled in {spool.path}" if spool.path is not None else "spooled in memory"
    return f"events go to {target} ({spooled})"


def _job_name(event: Event) -> str:
    """An event's job as the spool names it (``/`` for what has none, or is no event)."""
    try:
        job = getattr(event, "job", None)
        return f"{job.namespace}/{job.name}" if job is not None else "/"
    except Exception:  # noqa: BLE001 - counted lost all the same, under no name
        return "/"
