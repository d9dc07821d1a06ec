"""Lineage for a Spark Connect client session whose server runs elsewhere, told from the client alone.

:func:`spark_lineage.enable` on such a session (``spark_lineage.activation``'s ``_start_remote``) reads the
session's confs once (one round trip): where the server already reports its sessions (openlineage-spark, or this
library), it only sets the client's identity confs, which the server's lineage reads, and reports nothing
itself. Otherwise a :class:`ClientRuntime` reports the session:

- a run for the session (named as the server side names a Connect session's run), START now, COMPLETE when
  lineage is turned off, the session stopped or the process ends;
- a run per action that writes (a ``save``, ``saveAsTable``, ``insertInto``, ``writeTo``, a SQL command that
  writes; a read-only action only with ``python.filterReadOnlyActions=false``): START when its request is sent,
  COMPLETE when its response stream ends, FAIL with the server's message when it raises, its datasets read from
  the request (:mod:`~spark_lineage.connect.client.requests`, :mod:`~spark_lineage.connect.client.datasets`),
  tables located through the server once each (:mod:`~spark_lineage.connect.client.tables`), and its job named
  as the driver side names it (:mod:`~spark_lineage.connect.client.jobs`).

The user's thread only queues (:mod:`~spark_lineage.connect.client.tap`); reading requests, asking for tables,
building events and spooling them happen on one worker thread; delivery is the same as a driver's (spool,
redaction, transports). Nothing of this raises into the client's calls. Column lineage is derived from the
request (:mod:`~spark_lineage.connect.client.columns`); each column it does not claim is named in the run's
``extractionError`` facet.
"""

from __future__ import annotations

import functools
import itertools
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from openlineage.client.event_v2 import RunEvent, RunState
from openlineage.client.generated.lifecycle_state_change_dataset import LifecycleStateChange

from spark_lineage import costs, naming
from spark_lineage.config import CONF_PREFIX, LineageConfig
from spark_lineage.connect.client.columns import dataframe_columns, merged, sql_columns
from spark_lineage.connect.client.datasets import ActionDatasets, action_datasets, read_datasets
from spark_lineage.connect.client.frames import LeafColumns
from spark_lineage.connect.client.jobs import SAVE_INTO_DATA_SOURCE, action_command
from spark_lineage.connect.client.requests import (
    ActionKind,
    ClientAction,
    ReadSource,
    RequestHeader,
    read_plan,
    request_header,
)
from spark_lineage.connect.client.sql import declared_columns
from spark_lineage.connect.client.statements import classify
from spark_lineage.connect.client.tables import TABLES_KEPT, TableDatasets, TableDetails, qualifiers, quoted
from spark_lineage.connect.client.tap import EXECUTE_METHOD, ClientTap
from spark_lineage.connect.identity import CLIENT_KEYS
from spark_lineage.connect.sessions import session_run_job_name
from spark_lineage.costs import Stage
from spark_lineage.deadline import Deadline
from spark_lineage.delivery import Delivery, Held, RunBatches, undelivered
from spark_lineage.errors import ConnectClientError
from spark_lineage.events import EventBuilder, new_run_id, unchecked_copy
from spark_lineage.facets import PRODUCER, SPARK_CONNECT_FACET, SparkConnectRunFacet
from spark_lineage.handlers.base import schema_fields
from spark_lineage.lineage import ColumnLineage, DatasetLineage, QueryLineage, SchemaField
from spark_lineage.plan import SessionInfo
from spark_lineage.worker import BoundedWorker, ErrorLog, one_line

if TYPE_CHECKING:
    from openlineage.client import OpenLineageClient

    from spark_lineage.redaction import Redactor
    from spark_lineage.session import SparkLineageHandle

log = logging.getLogger("spark_lineage")

RUNS_KEPT = 10_000
"""Actions still running that one session keeps at most; beyond, the oldest one's run ends ABORT."""
KEPT_AT_MOST = 128
"""Batches of events (an action's START, an action's end) one session keeps for ``python.connect.spoolDelayMillis``
at most; with more, they are spooled at once."""


@dataclass(frozen=True)
class _Sent:
    token: int
    plan: Any
    """The request's ``Plan`` (read on the worker: the client leaves it as it is)."""
    header: RequestHeader
    """The rest of the request, read when it was sent (the client changes it afterwards)."""
    time_ms: int


@dataclass(frozen=True)
class _Ended:
    token: int
    time_ms: int
    error: str | None


@dataclass(frozen=True)
class _Release:
    """Spool the events kept and the STARTs held (:meth:`ClientRuntime.flush`)."""


@dataclass(frozen=True)
class _Ending:
    """Lineage ends: the runs of actions still running end ABORT, on the worker (which owns them)."""

    time_ms: int


@dataclass
class _ActionRun:
    """A reported action whose end is still to come."""

    run_id: str
    job_name: str
    action: ClientAction
    lineage: QueryLineage
    facet: SparkConnectRunFacet
    batches: RunBatches
    """What its START's delivery leaves its end's: the parts they share are converted once, and enriched once."""
    sent_ms: int
    """When its request was sent: its START's time."""
    created_tables: list[str] = field(default_factory=list)
    """Output tables that did not exist when the action was sent (placed where the catalog would put them):
    asked again at its end."""
    column_lineage: ColumnLineage | None = None
    """What its outputs' columns come from, as derived when it was sent."""
    lifecycle: LifecycleStateChange | None = None
    """What it does to its outputs (as the driver side's handler of its command says)."""
    start: RunEvent | None = None
    """The run's START, which its later events are made from: built when it is spooled (see
    ``python.connect.startDelayMillis``)."""
    outputs_changed: bool = False
    """Whether its outputs were named again at its end (a table it created), or are the START's."""
    start_due: float | None = None
    """Until when (``time.monotonic()``) its START waits for its end, to be spooled and sent with it; ``None``
    once spooled."""


def session_conf(spark: Any) -> dict[str, str]:
    """Every conf the client's server-side session shows it (its server's SparkConf included): one round trip."""
    get_all = getattr(spark.conf, "getAll", None)
    if get_all is not None:  # PySpark 4.x
        return {str(key): str(value) for key, value in dict(get_all).items()}
    # PySpark 3.5's client has no getAll: the same config request, asked directly.
    from pyspark.sql.connect.proto import base_pb2

    operation = base_pb2.ConfigRequest.Operation(get_all=base_pb2.ConfigRequest.GetAll())
    result = spark.client.config(operation)
    return {str(key): str(value) for key, value in result.pairs if value is not None}


def _plan() -> Any:
    """An empty ``Plan`` of the client's protos (the ones its requests are made of: PySpark's own)."""
    from pyspark.sql.connect.proto import base_pb2

    return base_pb2.Plan()


def session_info(spark: Any, conf: Mapping[str, str]) -> SessionInfo:
    """What the client knows of its server and its session: the server's application, from its confs."""
    client = spark.client
    return SessionInfo(
        app_name=conf.get("spark.app.name", ""),
        app_id=conf.get("spark.app.id", ""),
        spark_version=str(spark.version),
        master=conf.get("spark.master", ""),
        warehouse=conf.get("spark.sql.warehouse.dir"),
        user=str(getattr(client, "_user_id", "") or "") or None,
        driver_host=conf.get("spark.driver.host"),
        session_id=str(client._session_id),
        conf=dict(conf),
    )


class ClientRuntime:
    """The live machinery of one Connect client session's lineage."""

    def __init__(
        self,
        spark: Any,
        config: LineageConfig,
        client: OpenLineageClient,
        session: SessionInfo,
        redactor: Redactor,
        held: Held | None = None,
    ) -> None:
        self.spark = spark
        self.config = config
        self.client = client
        self.session = session
        self.errors = ErrorLog()
        self.started_ms = int(time.time() * 1000)
        self.app_run_id = config.application_run_id or new_run_id(self.started_ms)
        self.context_id = None
        """No SparkContext of this process serves this session."""
        server_job = naming.normalize_job_name(session.app_name) or "unknown"
        run_job = session_run_job_name(config.app_name, None, server_job)
        self.events = EventBuilder(config, session, self.app_run_id, run_job_name=run_job)
        self.active = False
        self.tap = ClientTap(spark.client, self, self.errors.report)
        self.tables = TableDatasets(session, self._describe, self._current_database)
        self.worker: BoundedWorker[_Sent | _Ended | _Release | _Ending] = BoundedWorker(
            "spark_lineage-connect-client",
            self._analyze,
            config.queue_size,
            self.errors,
            on_drop=self._dropped,
            timer=self._due,
            yield_cpu=False,  # the job runs on the server: see yield_cpu_to_the_job
        )
        self.delivery = Delivery.configured(
            config,
            client,
            self.errors,
            redactor,
            held=held,
            yield_cpu=False,
            linger=config.connect_send_delay_millis / 1000,
        )
        self._adaptive = session.conf.get("spark.sql.adaptive.enabled", "true").strip().lower() != "false"
        self._tokens = itertools.count(1)
        self._runs: dict[int, _ActionRun] = {}
        self._held_starts: dict[int, _ActionRun] = {}
        """Runs whose START waits for their end (oldest first): see ``python.connect.startDelayMillis``."""
        self._start_delay = config.connect_start_delay_millis / 1000
        self._kept = 0
        """Batches of events the delivery keeps, to spool together: see ``python.connect.spoolDelayMillis``."""
        self._kept_due: float | None = None
        """When (``time.monotonic()``) the events kept are to be spooled."""
        self._spool_delay = config.connect_spool_delay_millis / 1000
        self._unreported_ends: dict[int, str] = {}
        """Actions whose end lineage's queue had no room for, and why (their runs end ABORT with the session)."""
        self._read_schemas: dict[bytes, tuple[tuple[str, str | None], ...] | None] = {}
        self._shutdown_lock = threading.Lock()
        self._ended = threading.Event()
        self._original_stop: Any = None

    # --- lifecycle -----------------------------------------------------------------------------------------

    def start(self) -> None:
        """Observe the client's actions and start the session's run; raises :class:`ConnectClientError` for a
        client whose calls cannot be observed (nothing is reported then)."""
        if not self.tap.install():
            self.worker.close(0)
            self.delivery.close(0)
            raise ConnectClientError(
                f"its client ({type(self.spark.client).__name__}) has no {EXECUTE_METHOD}() to observe, or another "
                "tap observes it already"
            )
        self.delivery.submit(
            self.events.application_event(
                RunState.START, self.started_ms, run_facets={SPARK_CONNECT_FACET: self._session_facet()}
            )
        )
        self.active = True
        self._wrap_stop()
        log.info(
            "spark_lineage: lineage on for Spark Connect session %s (as %s, namespace %s), derived on the client; %s",
            self.session.session_id,
            self.events.run_job_name,
            self.config.namespace,
            self.delivery.description(),
        )

    @property
    def jvm_gone(self) -> bool:
        """A client holds no JVM: none can end under it."""
        return False

    def owns_listener(self, name: str) -> bool:
        return False

    def flush(self, timeout: float | None, *, past_refusals: bool = True) -> bool:
        """Analyze and deliver what is queued, every START held included, within ``timeout``; True once all of it
        was delivered."""
        deadline = Deadline(timeout)
        # The flush's own request waits for room in a full queue (it is no lineage to drop); once lineage has
        # ended, no START is held (its end spooled them).
        released = self.worker.submit_within(_Release(), deadline.seconds()) or not self.active
        analyzed = self.worker.flush(deadline.seconds())
        return self.delivery.flush(deadline.seconds(), past_refusals=past_refusals) and analyzed and released

    def shutdown(
        self,
        state: RunState,
        *,
        timeout: float | None = None,
        error: str | None = None,
        stack: str | None = None,
        ending_first: bool = False,
    ) -> bool:
        """Stop observing, report what was observed, end the session's run as ``state`` says, within the
        configured shutdown timeout. Never raises, but the user's own Ctrl-C (a ``KeyboardInterrupt`` on this
        thread while it analyzes what was left), raised on once lineage has closed (not at the process's exit:
        see :meth:`~spark_lineage.worker.BoundedWorker.raise_interrupt`); True when every event was delivered."""
        from spark_lineage.process import PROCESS

        with self._shutdown_lock:
            if not self.active:
                return True
            self.active = False
        try:
            deadline = Deadline(self.config.shutdown_timeout if timeout is None else timeout)
            self.tap.uninstall()
            self._unwrap_stop()
            ending = self.events.application_event(
                state,
                int(time.time() * 1000),
                error=error,
                stack=stack,
                run_facets={SPARK_CONNECT_FACET: self._session_facet()},
            )
            if ending_first:
                self.delivery.submit(ending)
            self.worker.submit(_Ending(int(time.time() * 1000)))
            # A dying process's thread (a signal's handler) leaves the analysis to the worker's.
            analyzed = self.worker.close(deadline.seconds(), take_over=not ending_first)
            if not ending_first:
                self.delivery.submit(ending)
            delivered = self.delivery.close(deadline.seconds())
            self.errors.summarize(skip=undelivered)
            try:
                self.client.close(max(deadline.seconds() or 0.0, 0.0))
            except Exception as exc:  # noqa: BLE001
                self.errors.report("closing the transport", exc)
            self.worker.raise_interrupt()
            return analyzed and delivered
        except Exception as exc:  # noqa: BLE001 - no error of lineage's reaches the user's code
            self.errors.report("shutting lineage down", exc)
            return False
        finally:
            PROCESS.remove(self)
            self._ended.set()

    def wait_ended(self, timeout: float) -> bool:
        return self._ended.wait(timeout)

    def _wrap_stop(self) -> None:
        """Lineage ends before the session stops (its channel is still open for what is left to ask)."""
        from spark_lineage.process import stopping_after

        original = getattr(self.spark, "stop", None)
        if original is None:
            return
        self._original_stop = original
        try:
            self.spark.stop = stopping_after(original, lambda: self.shutdown(RunState.COMPLETE))
        except Exception as exc:  # noqa: BLE001 - the process's exit still ends the run
            self.errors.report("wrapping the session's stop()", exc)

    def _unwrap_stop(self) -> None:
        if self._original_stop is not None and "stop" in getattr(self.spark, "__dict__", {}):
            try:
                del self.spark.stop
            except Exception as exc:  # noqa: BLE001
                self.errors.report("restoring the session's stop()", exc)

    # --- what the tap tells (the user's thread: queue only) ---------------------------------------------------

    def sent(self, request: Any, time_ms: int) -> object:
        token = next(self._tokens)
        self.worker.submit(_Sent(token, request.plan, request_header(request), time_ms))
        return token

    def ended(self, token: object, time_ms: int, error: BaseException | None) -> None:
        assert isinstance(token, int)
        self.worker.submit(_Ended(token, time_ms, None if error is None else server_message(error)))

    # --- the worker ----------------------------------------------------------------------------------------

    def _analyze(self, item: _Sent | _Ended | _Release | _Ending) -> None:
        if isinstance(item, _Sent):
            self._started(item)
        elif isinstance(item, _Ended):
            self._finished(item)
        elif isinstance(item, _Release):
            self._release_kept()
            self._release_starts(None)
        else:
            self._abort_open_runs(item.time_ms)

    def _started(self, sent: _Sent) -> None:
        with costs.stage(Stage.ANALYSIS):
            action = read_plan(sent.plan, sent.header)
            if action.kind == ActionKind.OTHER:
                return
            found = action_datasets(action)
        if action.kind == ActionKind.SQL and any(classify(text).moves_tables for text in action.sql):
            for table in (*found.input_tables, *found.output_tables):
                self.tables.forget(table)  # dropped, renamed or replaced: where it is now is asked again
        errors = list(found.unnamed)
        inputs = found.lineage(found.inputs)
        inputs += self._tables(found.input_tables, errors, created=False)
        outputs = found.lineage(found.outputs)
        outputs += self._tables(found.output_tables, errors, created=True)
        if not outputs and not found.output_tables and (self.config.filter_read_only_actions or not inputs):
            return  # an action that writes nothing (a query, a SELECT, DDL of no dataset)
        schema = None
        if outputs and self.config.connect_resolve_schemas and action.input is not None:
            schema = self._written_schema(action.input, errors)
            for dataset in outputs:
                dataset.schema = schema
        runs = action_command(action, outputs, found.output_tables, adaptive=self._adaptive)
        for dataset in outputs:
            dataset.lifecycle = runs.lifecycle
        column_lineage = None
        if outputs and self.config.column_lineage is not None:
            with costs.stage(Stage.COLUMN_LINEAGE):
                try:
                    analyzed = runs.command == SAVE_INTO_DATA_SOURCE
                    column_lineage = self._column_lineage(action, found, schema, errors, analyzed)
                except Exception as error:  # noqa: BLE001 - a plan no rule foresaw must not cost the run its datasets
                    errors.append(f"column lineage failed ({one_line(error)}); the datasets are reported without it")
            for dataset in outputs:
                dataset.column_lineage = column_lineage
        lineage = QueryLineage(inputs=inputs, outputs=outputs, job_suffix=runs.suffix or None, errors=errors)
        name = self._job_name(runs.command, runs.suffix)
        facet = unchecked_copy(
            self._action_facet, operationId=action.operation_id or None, tags=list(action.tags) or None
        )
        created = [table for table in found.output_tables if not self.tables.known(table)]
        run = _ActionRun(
            new_run_id(sent.time_ms),
            name,
            action,
            lineage,
            facet,
            self.delivery.run_batches(),
            sent.time_ms,
            created_tables=created,
            column_lineage=column_lineage,
            lifecycle=runs.lifecycle,
        )
        self._runs[sent.token] = run
        if self._spool_delay > 0:  # kept (journaled) with what the next actions' ends keep
            self._keep(self._start(run), run.batches)
        elif self._start_delay > 0:
            run.start_due = time.monotonic() + self._start_delay
            self._held_starts[sent.token] = run
        else:
            self._deliver(self._start(run), run.batches)
        self._deliver(self._evicted(sent.time_ms))

    def _finished(self, ended: _Ended) -> None:
        run = self._runs.pop(ended.token, None)
        if run is None:
            return
        # Its START, if held, goes with its end, as it was when the action was sent.
        start = self._start(run, self._held_starts.pop(ended.token, None) is not None)
        if run.created_tables and ended.error is None:
            # The write made its tables: where they are is the server's to say now.
            errors = [e for e in run.lineage.errors if not e.startswith("table ")]
            found = action_datasets(run.action)
            outputs = found.lineage(found.outputs)
            outputs += self._tables(found.output_tables, errors, created=True)
            for dataset in outputs:
                dataset.column_lineage = run.column_lineage
                dataset.lifecycle = run.lifecycle
            run.lineage = QueryLineage(
                inputs=run.lineage.inputs, outputs=outputs, job_suffix=run.lineage.job_suffix, errors=errors
            )
            run.outputs_changed = True
        state = RunState.COMPLETE if ended.error is None else RunState.FAIL
        events = [*start, self._event(run, state, ended.time_ms, ended.error)]
        if self._spool_delay > 0:
            self._keep(events, run.batches)
        else:
            self._deliver(events, run.batches)

    def _keep(self, events: list[RunEvent], batches: RunBatches) -> None:
        """Keep a run's events (journaled: see :meth:`Delivery.keep`) to spool with those the next actions keep
        within the spool delay, in one transaction (at once, with :data:`KEPT_AT_MOST` batches kept)."""
        from spark_lineage.process import PROCESS

        PROCESS.finished(events)
        self.delivery.keep(events, batches)
        self._kept += 1
        if self._kept_due is None:
            self._kept_due = time.monotonic() + self._spool_delay
        if self._kept >= KEPT_AT_MOST:
            self._release_kept()

    def _release_kept(self) -> None:
        """Spool the events kept, in one transaction."""
        if self._kept:
            self._kept, self._kept_due = 0, None
            self.delivery.spool_kept()

    def _start(self, run: _ActionRun, held: bool = True) -> list[RunEvent]:
        """The run's START, built now (``[]`` when it was spooled already: not ``held``)."""
        if not held:
            return []
        run.start_due = None
        run.start = self._event(run, RunState.START, run.sent_ms, None)
        return [run.start]

    def _due(self) -> float | None:
        """The worker's timer: spool the events kept for the spool delay, and the STARTs whose end did not come
        in time; how long until the next is due (``None``: nothing is kept or held)."""
        now = time.monotonic()
        if self._kept_due is not None and self._kept_due <= now:
            self._release_kept()
        starts = self._release_starts(now)
        kept = None if self._kept_due is None else self._kept_due - now
        return kept if starts is None else starts if kept is None else min(starts, kept)

    def _release_starts(self, now: float | None) -> float | None:
        """Spool the held STARTs due by ``now`` (``None``: every one), oldest first, each with its run's batches;
        how long until the next is due (``None``: none is held)."""
        while self._held_starts:
            token, run = next(iter(self._held_starts.items()))
            if now is not None and run.start_due is not None and run.start_due > now:
                return run.start_due - now
            del self._held_starts[token]
            self._deliver(self._start(run), run.batches)
        return None

    def _evicted(self, time_ms: int) -> list[RunEvent]:
        """The ABORTs of the oldest open runs beyond :data:`RUNS_KEPT` (actions whose end never came: a stream
        nobody read to its end nor closed), each after its START if that was held."""
        ends = []
        while len(self._runs) > RUNS_KEPT:
            token = next(iter(self._runs))
            oldest = self._runs.pop(token)
            ends += self._start(oldest, self._held_starts.pop(token, None) is not None)
            ends.append(self._event(oldest, RunState.ABORT, time_ms, None))
        return ends

    def _abort_open_runs(self, time_ms: int) -> None:
        """Actions still running when lineage ends: their runs end ABORT (the client stops waiting for them); one
        whose end was dropped (lineage's queue was full) says so in its ``errorMessage``."""
        self._release_kept()
        self._release_starts(None)
        runs, self._runs = dict(self._runs), {}
        ends = []
        for token, run in runs.items():
            why = self._unreported_ends.pop(token, None)
            error = f"the action's end was not reported: {why}" if why is not None else None
            ends.append(self._event(run, RunState.ABORT, time_ms, error))
        self._deliver(ends)

    def _event(self, run: _ActionRun, state: RunState, time_ms: int, error: str | None) -> RunEvent:
        with costs.stage(Stage.EVENTS):
            return self._built(run, state, time_ms, error)

    def _built(self, run: _ActionRun, state: RunState, time_ms: int, error: str | None) -> RunEvent:
        return self.events.action_event(
            state,
            time_ms,
            run.run_id,
            run.job_name,
            run.lineage,
            sql=run.action.sql[0] if run.action.kind == ActionKind.SQL and run.action.sql else None,
            error=error,
            run_facets={SPARK_CONNECT_FACET: run.facet},
            start=run.start,
            outputs_of_start=not run.outputs_changed,
        )

    def _job_name(self, command: str, suffix: str) -> str:
        name = f"{self.events.app_job_name}.{command}"
        if self.config.append_dataset_name and suffix:
            name += "." + suffix.replace(".", "_")
        return name

    def _tables(self, names: Sequence[str], errors: list[str], *, created: bool) -> list[DatasetLineage]:
        datasets = (self.tables.dataset(name, errors, created=created) for name in names)
        return [dataset for dataset in datasets if dataset is not None]

    def _deliver(self, events: Sequence[RunEvent], batches: RunBatches | None = None) -> None:
        from spark_lineage.process import PROCESS

        if events:
            PROCESS.finished(events)
            self.delivery.submit_all(events, batches)

    def _dropped(self, item: object, why: str) -> None:
        if isinstance(item, _Sent):
            self.delivery.spool.lost("(a Spark Connect action)", f"not analyzed: {why}")
        elif isinstance(item, _Ending):  # the runs still open then get no end: each is counted
            for run in list(self._runs.values()):
                self.delivery.spool.lost(run.job_name, f"its end was not reported: {why}")
        elif isinstance(item, _Ended):  # its run ends ABORT with the session's, saying why
            self._unreported_ends[item.token] = why

    def _column_lineage(
        self,
        action: ClientAction,
        found: ActionDatasets,
        schema: Sequence[SchemaField] | None,
        errors: list[str],
        analyzed: bool,
    ) -> ColumnLineage | None:
        """What the columns an action writes come from, as far as the client can tell (its reads' datasets as
        ``found`` named them); what it cannot is said in ``errors``. ``analyzed``: the server writes the plan as
        analyzed (a data source save)."""
        config = self.config.column_lineage
        assert config is not None
        tables = found.output_tables
        target = self.tables.columns(tables[0]) if len(tables) == 1 and _appends(action) else None
        leaf = functools.partial(self._leaf, named=found)
        if action.kind == ActionKind.SQL:
            if not action.sql:
                return None
            claimed = sql_columns(action.sql[0], leaf, target=target, schema_size_limit=config.schema_size_limit)
        elif action.input is not None:
            claimed = dataframe_columns(
                action.input,
                leaf,
                names=[column.name for column in schema] if schema else None,
                target=target,
                positional=action.write is not None and action.write.method == "insertInto",
                schema_size_limit=config.schema_size_limit,
                analyzed=analyzed,
            )
        else:
            return None
        errors.extend(f"column lineage: {message}" for message in claimed.unclaimed)
        if not claimed.fields:
            return None
        if config.dataset_lineage:
            return ColumnLineage(claimed.fields, claimed.dataset)
        return ColumnLineage(merged(claimed))

    def _leaf(self, read: ReadSource, message: Any, named: ActionDatasets | None = None) -> LeafColumns:
        """What a read of an action's input stands for: a table's dataset and columns (from the server's
        catalog, asked once), or a data source's datasets (as ``named`` named them, when it did) and the columns
        it declares (or, with ``python.connect.resolveSchemas``, the server says)."""
        if read.table is not None:
            dataset = self.tables.dataset(read.table, [])
            if dataset is None:
                return LeafColumns((), unclaimed=f"table {read.table} is not followed (its error says why)")
            return LeafColumns((dataset.identifier,), self.tables.columns(read.table), qualifiers(read.table))
        identifiers = read_datasets(read, named)
        if not identifiers:
            return LeafColumns((), unclaimed="a source this library has no name for")
        columns = declared_columns(read.schema) if read.schema else None
        if columns is None and self.config.connect_resolve_schemas and message is not None:
            columns = self._read_schema(message)
        return LeafColumns(tuple(identifiers), columns)

    # --- asking the server (the worker's thread; not observed) ------------------------------------------------

    def _describe(self, name: str) -> TableDetails | None:
        table = quoted(name)
        with self.tap.unobserved():
            if not self.spark.catalog.tableExists(table):
                return None
            rows = self.spark.sql(f"DESCRIBE TABLE EXTENDED {table}").collect()
        return TableDetails.from_rows([tuple(row) for row in rows])

    def _written_schema(self, relation: Any, errors: list[str]) -> list[SchemaField] | None:
        """The schema of what a write writes, asked of the server (``python.connect.resolveSchemas``)."""
        plan = _plan()
        plan.root.CopyFrom(relation)
        try:
            with self.tap.unobserved():
                schema = self.spark.client.schema(plan)
        except Exception as error:  # noqa: BLE001 - the outputs then have no schema facet, and it is said
            errors.append(f"the schema written could not be asked of the server: {one_line(error)}")
            return None
        return schema_fields(schema.json())

    def _read_schema(self, read: Any) -> tuple[tuple[str, str | None], ...] | None:
        """The columns a read reads, asked of the server once per read (``python.connect.resolveSchemas``)."""
        key = read.SerializeToString()
        if key in self._read_schemas:
            return self._read_schemas[key]
        plan = _plan()
        plan.root.read.CopyFrom(read)
        try:
            with self.tap.unobserved():
                schema = self.spark.client.schema(plan)
            columns: tuple[tuple[str, str | None], ...] | None = tuple(
                (str(f.name), str(f.dataType.simpleString())) for f in schema.fields
            )
        except Exception:  # noqa: BLE001 - the read stays open: its columns are taken by name
            columns = None
        if len(self._read_schemas) >= TABLES_KEPT:
            self._read_schemas.pop(next(iter(self._read_schemas)))
        self._read_schemas[key] = columns
        return columns

    def _current_database(self) -> str | None:
        with self.tap.unobserved():
            return str(self.spark.catalog.currentDatabase())

    @cached_property
    def _action_facet(self) -> SparkConnectRunFacet:
        """The ``spark_connect`` facet of the session's actions, checked once (its producer and schema URL): each
        action's is a copy with its operation id and tags, which no check looks at."""
        return SparkConnectRunFacet(
            sessionId=self.session.session_id, userId=self.session.user or "", derivedOnClient=True, producer=PRODUCER
        )

    def _session_facet(self) -> SparkConnectRunFacet:
        builder = getattr(self.spark.client, "_builder", None)
        agent = getattr(builder, "userAgent", None)
        return SparkConnectRunFacet(
            sessionId=self.session.session_id,
            userId=self.session.user or "",
            userAgent=str(agent) if agent else None,
            derivedOnClient=True,
            producer=PRODUCER,
        )


def _appends(action: ClientAction) -> bool:
    """Whether an action writes into a table that keeps its columns (the server then casts what it writes to
    them): an ``insertInto``, an append, a SQL ``INSERT``."""
    if action.kind == ActionKind.SQL:
        return True
    write = action.write
    if write is None:
        return False
    if write.method == "insertInto":
        return True
    return write.mode in ("append", "overwrite_partitions") or (write.method == "writeTo" and write.mode == "overwrite")


def server_message(error: BaseException) -> str:
    """The server's message of a failed action, without the JVM stack trace PySpark may append."""
    text = str(getattr(error, "message", None) or error)
    return text.split("\n\nJVM stacktrace:", 1)[0].strip() or type(error).__name__


def identity_confs(overrides: Mapping[str, Any]) -> tuple[dict[str, str], list[str]]:
    """What of ``enable()``'s overrides a client may set on its session for the server's lineage to read (its
    names, parents, tags, owners), as confs; and the keys that are the server's to decide."""
    from spark_lineage.config.readers import overrides as flat_overrides

    confs: dict[str, str] = {}
    others: list[str] = []
    for key, value in flat_overrides(overrides).items():
        if key in CLIENT_KEYS or key.startswith("job.owners."):
            confs[CONF_PREFIX + key] = value if isinstance(value, str) else str(value)
        else:
            others.append(key)
    return confs, others


def session_key(spark: Any) -> str:
    """What the process knows a client session's lineage by."""
    return f"connect-client:{spark.client._session_id}"


def start(key: str, runtime: ClientRuntime) -> SparkLineageHandle:
    """Start a client session's lineage, registered with the process first (so that its exit ends it)."""
    from spark_lineage.process import PROCESS
    from spark_lineage.session import SparkLineageHandle

    with PROCESS.lock:
        handle = SparkLineageHandle(runtime)
        PROCESS.add(key, handle, None)
        try:
            runtime.start()
        except BaseException:
            PROCESS.remove(runtime)
            raise
        return handle


def set_identity(spark: Any, overrides: Mapping[str, Any], reason: str) -> None:
    """The server reports the session (``reason`` says how): the client only sets its identity confs from
    ``overrides``, for the server's lineage to read, and says so once."""
    confs, others = identity_confs(overrides)
    for key, value in confs.items():
        spark.conf.set(key, value)
    log.info(
        "spark_lineage: %s, so this Spark Connect client reports nothing itself%s",
        reason,
        f"; it set its identity: {', '.join(sorted(confs))}" if confs else "",
    )
    if others:
        log.warning(
            "spark_lineage: not applied, as the server's lineage decides them: %s (a client sets only %s and "
            "job.owners.<type>)",
            ", ".join(sorted(others)),
            ", ".join(sorted(CLIENT_KEYS)),
        )
