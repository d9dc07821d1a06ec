"""How an application run ends when its process does: COMPLETE, FAIL or ABORT, and why.

What the process did last decides it:

- an uncaught exception: FAIL, with its message and stack;
- an uncaught ``KeyboardInterrupt`` (Ctrl-C), or a non-zero exit after one: ABORT;
- ``sys.exit`` with a non-zero code: FAIL, the code in the message;
- SIGTERM: FAIL, ended inside the signal handler (the terminal event spooled before anything is sent, so a
  later ``spark-lineage replay`` delivers it even when the process dies mid-send), then the signal goes on to
  whatever handled it before: the default action ends the process as it would have without us;
- the JVM ended while the process ran (:data:`JVM_ENDED`): FAIL, ``the JVM ended``, whatever the job raised
  after (its next Spark call fails);
- otherwise: COMPLETE.

The JVM can end first: under ``spark-submit`` the JVM is the Python driver's parent, and Kubernetes stopping
the application, or the kernel's OOM killer, SIGTERM or SIGKILL that JVM alone. Spark's
``PythonRunner`` then sends the driver no signal (on SIGTERM the JVM's shutdown hooks stop the SparkContext and
the JVM exits): the driver lives on, its gateway gone. A watch on the gateway (:mod:`spark_lineage.jvm.watch`)
sees the JVM's process end, and :func:`jvm_ended` says how the runs end: at once, as FAIL ``the JVM ended``,
terminal event spooled first, with no JVM call after. Unless the process's own ending speaks for it: a SIGTERM
or SIGINT the driver got too (one signal to a whole process group ends both; its ending stays), or an exit
under way (the main thread has finished: the JVM ending then is no failure of the job, and the exit decides,
COMPLETE included).

``os._exit`` and SIGKILL run no Python code: the application run then gets no ending, and queries Spark had
not yet handed to the listener, or that were still being analysed, are lost (the spool keeps everything that
was spooled). ``raise SystemExit(n)`` without ``sys.exit`` is seen as an ordinary exit.

Every hook is chained to what was there before (``sys.excepthook``, ``sys.exit``, the user's signal
handlers), installed once per process, and never raises.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType, TracebackType
from typing import Any

from openlineage.client.event_v2 import RunState

log = logging.getLogger("spark_lineage")


@dataclass(frozen=True)
class Ending:
    """How the application runs of this process end."""

    state: RunState
    error: str | None = None
    stack: str | None = None
    ending_first: bool = False
    """Spool the terminal event before the last queries are analysed and sent: the process may die soon."""


COMPLETED = Ending(RunState.COMPLETE)
JVM_ENDED = Ending(RunState.FAIL, "the JVM ended", ending_first=True)
"""The ending of application runs whose JVM ended under a running driver (SIGTERM, SIGKILL or a crash)."""


@dataclass
class _Facts:
    """What the process has done that decides its ending."""

    uncaught: tuple[type[BaseException], str, str] | None = None
    exit_status: object = None
    interrupted: bool = False
    terminated_by: str | None = None
    jvm_ended: bool = False


_facts = _Facts()
_installed = False
_install_lock = threading.Lock()


def decide() -> Ending:
    """The ending the process has earned so far."""
    facts = _facts
    if facts.terminated_by is not None:
        return Ending(RunState.FAIL, f"the application was terminated by {facts.terminated_by}", ending_first=True)
    code = exit_code(facts.exit_status)
    if facts.uncaught is not None and issubclass(facts.uncaught[0], KeyboardInterrupt):
        return Ending(RunState.ABORT, "the application was interrupted (KeyboardInterrupt)", facts.uncaught[2])
    if facts.jvm_ended and not (facts.interrupted and code):
        return JVM_ENDED  # what the job raised after that (py4j errors) is a consequence, not the cause
    if facts.uncaught is not None:
        _, message, stack = facts.uncaught
        return Ending(RunState.FAIL, message, stack)
    if code:
        if facts.interrupted:
            return Ending(RunState.ABORT, f"the application was interrupted (SIGINT) and exited with code {code}")
        return Ending(RunState.FAIL, f"the application exited with code {code} (sys.exit)")
    return COMPLETED


def jvm_ended() -> Ending | None:
    """Record that the JVM ended under this process; returns how its application runs end now, or ``None``
    when the process's own ending decides: a SIGTERM or SIGINT it got too, or an exit already under way (the
    main thread has finished: the exit hook ends the runs as the exit says)."""
    if not threading.main_thread().is_alive():
        return None
    _facts.jvm_ended = True
    if _facts.terminated_by is not None or _facts.interrupted:
        return None
    return JVM_ENDED


def exit_code(status: object) -> int:
    """The process exit code ``sys.exit(status)`` gives: 0 for ``None``, the number, else 1 (a message)."""
    if status is None:
        return 0
    if isinstance(status, int):
        return status
    return 1


def install(end_now: Callable[[Ending], None], end_at_exit: Callable[[Ending], None], timeout: float) -> None:
    """Watch how the process ends. ``end_now`` is called (from a thread of its own, waited for at most
    ``timeout`` seconds) inside a SIGTERM handler, before the signal goes on; ``end_at_exit`` at interpreter
    exit. Signal handlers can only be set from the main thread: elsewhere only the exit hooks are installed."""
    global _installed
    with _install_lock:
        if _installed:
            return
        _installed = True
    _watch_uncaught_exceptions()
    _watch_sys_exit()
    if threading.current_thread() is threading.main_thread():
        _chain_signal(signal.SIGTERM, _on_signal(end_now, timeout, _terminated, lambda name: decide()))
        _chain_signal(signal.SIGINT, _on_signal(end_now, timeout, _interrupted, _aborted))
    else:
        log.debug("spark_lineage: not on the main thread: SIGTERM ends the application run only through atexit")
    atexit.register(lambda: _safely(end_at_exit, decide()))


def _watch_uncaught_exceptions() -> None:
    previous = sys.excepthook

    def excepthook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        try:
            if not issubclass(kind, SystemExit):
                stack = "".join(traceback.format_exception(kind, value, tb))
                _facts.uncaught = (kind, f"{kind.__name__}: {value}", stack)
        finally:
            previous(kind, value, tb)

    sys.excepthook = excepthook


def _watch_sys_exit() -> None:
    previous = sys.exit

    def exit(status: object = None) -> None:
        _facts.exit_status = status
        previous(status)  # type: ignore[arg-type]

    exit.__doc__ = previous.__doc__
    sys.exit = exit  # type: ignore[assignment]


def _chain_signal(signum: signal.Signals, ours: Callable[[int, FrameType | None, Any], None]) -> None:
    previous = signal.getsignal(signum)
    if previous in (signal.SIG_IGN, None):
        return  # ignored (or set outside Python): the process does not end on it, so neither do its runs

    def handler(number: int, frame: FrameType | None) -> None:
        ours(number, frame, previous)

    try:
        signal.signal(signum, handler)
    except (ValueError, OSError) as error:
        log.debug("spark_lineage: cannot watch %s: %s", signum.name, error)


def _on_signal(
    end_now: Callable[[Ending], None], timeout: float, seen: Callable[[str], None], dying: Callable[[str], Ending]
) -> Callable[[int, FrameType | None, Any], None]:
    """A handler that records the signal (``seen``), then lets the previous handler decide whether the process
    ends (it may stop gracefully and exit later: the exit hook ends the runs then). When the previous handler
    is the default action, which ends the process with no exit hook, the runs end first (``dying``)."""

    def on_signal(number: int, frame: FrameType | None, previous: Any) -> None:
        name = signal.Signals(number).name
        seen(name)
        if callable(previous):
            previous(number, frame)
            return
        # A thread of its own: the main thread may hold a lock of ours at the moment the signal arrived.
        ending = dying(name)
        ender = threading.Thread(target=_safely, args=(end_now, ending), name="spark_lineage-ending", daemon=True)
        ender.start()
        ender.join(timeout + 2.0)
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)

    return on_signal


def _terminated(name: str) -> None:
    _facts.terminated_by = name


def _interrupted(name: str) -> None:
    _facts.interrupted = True


def _aborted(name: str) -> Ending:
    return Ending(RunState.ABORT, f"the application was interrupted ({name})", ending_first=True)


def _safely(action: Callable[[Ending], None], ending: Ending) -> None:
    with contextlib.suppress(BaseException):  # never disturb the process while it ends
        action(ending)
