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
from typing import TYPE_CHECKING, Any

from openlineage.client.event_v2 import RunState

from spark_lineage import endings, naming
from spark_lineage.deadline import Deadline

if TYPE_CHECKING:
    from spark_lineage.session import LineageRuntime, RunSummary, SparkLineageHandle

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
                if handle.enabled and handle._runtime is not None and handle._runtime.listener.toString() == name:
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

    def live_runtimes(self) -> list[LineageRuntime]:
        with self.lock:
            return [handle._runtime for handle in self._handles.values() if handle._runtime is not None]

    # --- what every session shares -----------------------------------------------------------------------------

    def finished(self, run: RunSummary) -> None:
        self._recent_runs.append(run)

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
        """Turn lineage off for every session of this process."""
        for runtime in self.live_runtimes():
            runtime.shutdown(RunState.COMPLETE)

    # --- the ends of the process, the context and the JVM -------------------------------------------------

    def _wrap_context_stop(self, spark_context: Any) -> None:
        """Run our shutdown before the SparkContext stops, while the JVM can still answer. ``SparkSession.stop``
        goes through ``SparkContext.stop``, so wrapping the context's method covers both."""
        if getattr(spark_context.stop, "_spark_lineage_wrapped", False):
            return
        original = spark_context.stop

        def stop(*args: Any, **kwargs: Any) -> Any:
            for runtime in self.live_runtimes():
                if runtime.context_id == id(spark_context):
                    runtime.shutdown(RunState.COMPLETE)
            return original(*args, **kwargs)

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
            if runtime.bridge.gone:
                runtime.wait_ended(runtime.config.shutdown_timeout + 1.0)

    def jvm_ended(self) -> None:
        """The JVM watch's callback: the JVM has ended. Its application runs end as :func:`endings.jvm_ended`
        says, on the watch's thread, with no JVM call (the bridge is gone)."""
        ending = endings.jvm_ended()
        if ending is None:
            return
        for runtime in self.live_runtimes():
            if runtime.bridge.gone:
                runtime.shutdown(ending.state, error=ending.error, ending_first=ending.ending_first)


PROCESS = LineageProcess()
"""This process's lineage state."""
