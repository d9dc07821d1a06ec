"""How the application run ends when the process does, seen from real processes ending each way (no Spark:
the hooks are plain Python; tests/integration/test_shutdown.py runs the same endings with a Spark job)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

from spark_lineage import endings

SCRIPT = textwrap.dedent(
    """
    import atexit, os, signal, sys, time
    from spark_lineage import endings

    def user_handler(number, frame):
        print("USER HANDLER", number, flush=True)
        sys.exit(0)

    mode = sys.argv[1]
    if mode == "user_handler":
        signal.signal(signal.SIGTERM, user_handler)

    def end(ending):
        print("ENDING", ending.state.value, ending.error, ending.ending_first, flush=True)

    def jvm_ends():
        ending = endings.jvm_ended()
        print("JVM ENDED", ending and ending.error, flush=True)

    endings.install(end, end, timeout=5)
    if mode == "jvm_ends_at_exit":  # registered later, so run first: the JVM ends before lineage's exit hook
        atexit.register(jvm_ends)
    if mode == "jvm_ends":
        jvm_ends()
    if mode == "jvm_ends_then_raise":
        jvm_ends()
        raise ConnectionRefusedError(111, "Connection refused")
    if mode == "interrupted_then_jvm_ends":
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(30)
        except KeyboardInterrupt:
            jvm_ends()
            sys.exit(130)
    if mode == "exit3":
        sys.exit(3)
    if mode == "exit_message":
        sys.exit("no input files")
    if mode == "exit0":
        sys.exit(0)
    if mode == "raise":
        raise ValueError("bad input")
    if mode == "caught_interrupt_exit":
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(30)
        except KeyboardInterrupt:
            sys.exit(130)
    if mode in ("signal", "user_handler"):
        print("READY", flush=True)
        time.sleep(30)
    """
)


def _run(mode: str, send: signal.Signals | None = None) -> tuple[int, list[str]]:
    process = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    if send is not None:
        assert process.stdout.readline().strip() == "READY"
        process.send_signal(send)
    out, _ = process.communicate(timeout=60)
    return process.returncode, [line for line in out.splitlines() if line.strip() and line != "READY"]


@pytest.mark.parametrize(
    ("mode", "send", "returncode", "lines"),
    [
        ("exit0", None, 0, ["ENDING COMPLETE None False"]),
        ("exit3", None, 3, ["ENDING FAIL the application exited with code 3 (sys.exit) False"]),
        ("exit_message", None, 1, ["ENDING FAIL the application exited with code 1 (sys.exit) False"]),
        ("raise", None, 1, ["ENDING FAIL ValueError: bad input False"]),
        (
            "signal",
            signal.SIGINT,
            -signal.SIGINT,
            ["ENDING ABORT the application was interrupted (KeyboardInterrupt) False"],
        ),
        (
            "caught_interrupt_exit",
            None,
            130,
            ["ENDING ABORT the application was interrupted (SIGINT) and exited with code 130 False"],
        ),
        # Ended inside the handler (terminal event first), then the default action: killed by SIGTERM as before.
        ("signal", signal.SIGTERM, -signal.SIGTERM, ["ENDING FAIL the application was terminated by SIGTERM True"]),
        # The user's own handler runs and decides; it exits, and the exit hook ends the run as FAIL.
        (
            "user_handler",
            signal.SIGTERM,
            0,
            ["USER HANDLER 15", "ENDING FAIL the application was terminated by SIGTERM True"],
        ),
    ],
)
def test_each_way_of_ending_gets_its_state(
    mode: str, send: signal.Signals | None, returncode: int, lines: list[str]
) -> None:
    assert _run(mode, send) == (returncode, lines)


@pytest.mark.parametrize(
    ("mode", "returncode", "lines"),
    [
        # The runs end at once (on the watch's thread, in lineage), and the exit hook finds them ended.
        ("jvm_ends", 0, ["JVM ENDED the JVM ended", "ENDING FAIL the JVM ended True"]),
        # What the job raised once its JVM was gone is a consequence: the cause is the message.
        ("jvm_ends_then_raise", 1, ["JVM ENDED the JVM ended", "ENDING FAIL the JVM ended True"]),
        # The JVM ending while the process exits is no failure: the exit decides (with PySpark's hook first).
        ("jvm_ends_at_exit", 0, ["JVM ENDED None", "ENDING COMPLETE None False"]),
        # Ctrl-C reaches the whole process group, the JVM included: the driver's own interruption speaks.
        (
            "interrupted_then_jvm_ends",
            130,
            ["JVM ENDED None", "ENDING ABORT the application was interrupted (SIGINT) and exited with code 130 False"],
        ),
    ],
)
def test_the_jvm_ending_first_fails_the_runs_unless_the_process_ends_its_own_way(
    mode: str, returncode: int, lines: list[str]
) -> None:
    assert _run(mode) == (returncode, lines)


def test_exit_codes_as_sys_exit_gives_them() -> None:
    assert [endings.exit_code(status) for status in (None, 0, 3, "message")] == [0, 0, 3, 1]
