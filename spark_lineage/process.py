"""What one Python process holds for all its lineage-enabled sessions, in one place (:data:`PROCESS`).

A process has one SparkContext at a time, one exit, and one convention for dataset names, however many sessions
have lineage on. So these are the process's, not a session's:

- the enabled handles, by JVM session (a clone of a session shares its parent's), and which runtime's job
  listener serves each SparkContext (a job belongs to the context, and is reported once);
- the dataset-name trimmers (``dataset.disabledTrimmers`` / ``dataset.extraTrimmers``): the last session
  enabled sets them, and when it ends, those of the session enabled before it that is still on come back (the
  defaults when none is);
- the exit hooks (:mod:`spark_lineage.endings`), the wrapped ``SparkContext.stop`` and the JVM watch's
  callback, which end every session's application run;
- the query runs that finished last, for ``%lineage``.

:mod:`spark_lineage.session` runs a session's lineage; it registers here when it starts and leaves when it ends.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from openlineage.client.event_v2 import RunEvent, RunState

from spark_lineage import endings, naming
from spark_lineage.deadline import Deadline
from spark_lineage.delivery.console import dataset_label

if TYPE_CHECKING:
    from spark_lineage.config import LineageConfig
    from spark_lineage.delivery import Delivery
    from spark_lineage.session import LineageRuntime, SparkLineageHandle


class Runtime(Protocol):
    """What the process asks of a session's lineage, whichever runs it: a driver's session
    (:class:`spark_lineage.session.LineageRuntime`) or a Spark Connect client's
    (:class:`spark_lineage.connect.client.runtime.ClientRuntime`)."""

    config: LineageConfig
    delivery: Delivery
    app_run_id: str
    active: bool

    @property
    def context_id(self) -> int | None:
        """``id`` of the Python SparkContext whose stop ends it; ``None``: none does (a Connect client's)."""
        ...

    @property
    def jvm_gone(self) -> bool:
        """Whether the JVM it reads has ended under it."""
        ...

    def owns_listener(self, name: str) -> bool:
        """Whether it registered Spark's query listener of this name."""
        ...

    def flush(self, timeout: float | None, *, past_refusals: bool = True) -> bool: ...

    def shutdown(
        self,
        state: RunState,
        *,
        timeout: float | None = None,
        error: str | None = None,
        stack: str | None = None,
        ending_first: bool = False,
    ) -> bool: ...

    def wait_ended(self, timeout: float) -> bool: ...


@dataclass(frozen=True)
class RunSummary:
    """What one finished query run read and wrote, for people looking at a session (``%lineage``)."""

    job_name: str
    state: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    run_id: str = ""
    job_namespace: str = ""
    datasets: tuple[tuple[str, str, str], ...] = ()
    """``(label, namespace, name)`` of each input and output: the full identity behind a label."""

    @classmethod
    def of(cls, event: RunEvent) -> RunSummary:
        every = [*(event.inputs or ()), *(event.outputs or ())]
        return cls(
            job_name=event.job.name,
            state=event.eventType.value if event.eventType else "",
            inputs=tuple(dataset_label(d.namespace, d.name) for d in event.inputs or ()),
            outputs=tuple(dataset_label(d.namespace, d.name) for d in event.outputs or ()),
            run_id=str(event.run.runId),
            job_namespace=event.job.namespace,
            datasets=tuple(dict.fromkeys((dataset_label(d.namespace, d.name), d.namespace, d.name) for d in every)),
        )


RECENT_RUNS = 1000
"""How many finished query runs ``%lineage`` can show."""


class LineageProcess:
    """The process-wide state of lineage. Thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._handles: dict[str, SparkLineageHandle] = {}
        """The enabled handle of each session, by the JVM session's key."""
        self.job_listener_owners: dict[int, LineageRuntime] = {}
        """The runtime whose job listener serves each SparkContext (by ``id`` of the Python context)."""
        self._trimmers: list[tuple[object, tuple[str, ...], tuple[str, ...]]] = []
        """Who set the trimmers, and to what, oldest first: the last one applies."""
        self._recent_runs: deque[RunSummary] = deque(maxlen=RECENT_RUNS)

    # --- handles ---------------------------------------------------------------------------------------------

    def handle_for(self, session_key: str) -> SparkLineageHandle | None:
        with self.lock:
            handle = self._handles.get(session_key)
            return handle if handle is not None and handle.enabled else None

    def handle_of_listener(self, name: str) -> SparkLineageHandle | None:
        """The enabled handle whose runtime registered the query listener of this name."""
        with self.lock:
            for handle in self._handles.values():
                if handle.enabled and handle._runtime is not None and handle._runtime.owns_listener(name):
                    return handle
        return None

    def share_handle(self, session_key: str, handle: SparkLineageHandle) -> None:
        """Serve another JVM session (a clone whose queries ``handle``'s listener already hears) with ``handle``."""
        with self.lock:
            self._handles[session_key] = handle

    def add(self, session_key: str, handle: SparkLineageHandle, spark_context: Any) -> None:
        """A session whose lineage starts: its handle, its trimmers, and the hooks that end it."""
        runtime = handle._runtime
        assert runtime is not None
        with self.lock:
            endings.install(self._end_all, self._end_all, runtime.config.shutdown_timeout)
            if spark_context is not None:
                self._wrap_context_stop(spark_context)
            naming_config = runtime.config.dataset_naming
            self.set_trimmers(runtime, naming_config.disabled_trimmers, naming_config.extra_trimmers)
            self._handles[session_key] = handle

    def set_trimmers(self, owner: object, disabled: tuple[str, ...], extra: tuple[str, ...]) -> None:
        """The dataset-name trimmers ``owner`` (a session's runtime) asks for, from now until it is removed."""
        with self.lock:
            self._trimmers.append((owner, disabled, extra))
            naming.use_trimmers(disabled, extra)

    def remove(self, runtime: object) -> None:
        """A session whose lineage ended: its handles go, and the trimmers it set give way to those of the
        session enabled before it that is still on."""
        with self.lock:
            for key, handle in list(self._handles.items()):
                if handle._runtime is runtime:
                    del self._handles[key]
            if any(owner is runtime for owner, _, _ in self._trimmers):
                self._trimmers = [entry for entry in self._trimmers if entry[0] is not runtime]
                disabled, extra = self._trimmers[-1][1:] if self._trimmers else ((), ())
                naming.use_trimmers(disabled, extra)

    def live_runtimes(self) -> list[Runtime]:
        with self.lock:
            return [handle._runtime for handle in self._handles.values() if handle._runtime is not None]

    # --- what every session shares -----------------------------------------------------------------------------

    def finished(self, events: Sequence[RunEvent]) -> None:
        """Keep what the finished runs among ``events`` read and wrote, for ``%lineage``."""
        for event in events:
            if event.eventType in (RunState.COMPLETE, RunState.FAIL):
                self._recent_runs.append(RunSummary.of(event))

    def recent_runs(self) -> list[RunSummary]:
        """The query runs of this process that finished most recently, oldest first (at most
        :data:`RECENT_RUNS`)."""
        return list(self._recent_runs)

    def destinations(self) -> list[str]:
        """Where the enabled sessions send their events (``http <url>``, ``file <path>``, ``console``, ...),
        without secrets, each once."""
        return list(dict.fromkeys(runtime.delivery.destination for runtime in self.live_runtimes()))

    def flush_all(self, timeout: float, *, past_refusals: bool = True) -> None:
        """Deliver what every enabled session has queued, within ``timeout`` seconds overall (without
        ``past_refusals``, not waiting for a backend that refuses)."""
        deadline = Deadline(timeout)
        for runtime in self.live_runtimes():
            runtime.flush(deadline.seconds(), past_refusals=past_refusals)

    def disable_all(self) -> None:
        """Turn lineage off for every session of this process (a Ctrl-C that ended one's closing is raised once
        every one is off)."""
        _each_shut_down(self.live_runtimes())

    # --- the ends of the process, the context and the JVM -------------------------------------------------

    def _wrap_context_stop(self, spark_context: Any) -> None:
        """Run our shutdown before the SparkContext stops, while the JVM can still answer. ``SparkSession.stop``
        goes through ``SparkContext.stop``, so wrapping the context's method covers both."""
        if getattr(spark_context.stop, "_spark_lineage_wrapped", False):
            return
        stop = stopping_after(
            spark_context.stop,
            lambda: _each_shut_down([r for r in self.live_runtimes() if r.context_id == id(spark_context)]),
        )
        stop._spark_lineage_wrapped = True  # type: ignore[attr-defined]
        spark_context.stop = stop

    def _end_all(self, ending: endings.Ending) -> None:
        """End every application run of this process as ``ending`` says, within the bounded shutdown time, after
        draining what Spark still holds for our listener."""
        for runtime in self.live_runtimes():
            runtime.shutdown(ending.state, error=ending.error, stack=ending.stack, ending_first=ending.ending_first)
        # Those still here are being ended on another thread. The JVM watch's have their terminal event spooled
        # already; let them deliver, within their own deadline, before the process goes.
        for runtime in self.live_runtimes():
            if runtime.jvm_gone:
                runtime.wait_ended(runtime.config.shutdown_timeout + 1.0)

    def jvm_ended(self) -> None:
        """The JVM watch's callback: the JVM has ended. Its application runs end as :func:`endings.jvm_ended`
        says, on the watch's thread, with no JVM call (the bridge is gone)."""
        ending = endings.jvm_ended()
        if ending is None:
            return
        for runtime in self.live_runtimes():
            if runtime.jvm_gone:
                runtime.shutdown(ending.state, error=ending.error, ending_first=ending.ending_first)


def stopping_after(original: Callable[..., Any], shut_down: Callable[[], object]) -> Callable[..., Any]:
    """A ``stop`` (a SparkContext's, a Spark Connect session's) that runs ``shut_down`` (lineage's part, while what
    ``original`` stops can still answer) and then ``original``, even when ``shut_down`` raised: the user's Ctrl-C
    that ended lineage's part is raised once ``original`` ran."""

    def stop(*args: Any, **kwargs: Any) -> Any:
        try:
            shut_down()
        finally:
            stopped = original(*args, **kwargs)
        return stopped

    return stop


def _each_shut_down(runtimes: list[Runtime]) -> None:
    """Shut each of ``runtimes`` down, ending its application run COMPLETE. The user's Ctrl-C that ended one's
    closing (raised on by its ``shutdown``) is raised once every one is shut down: the others still close."""
    interrupt: KeyboardInterrupt | None = None
    for runtime in runtimes:
        try:
            runtime.shutdown(RunState.COMPLETE)
        except KeyboardInterrupt as error:
            interrupt = interrupt or error
    if interrupt is not None:
        raise interrupt


PROCESS = LineageProcess()
"""This process's lineage state."""
