"""iceberg_facets' closing on the user's thread, with no catalog: a Ctrl-C while ``disable()`` or the process's exit
makes what was left into events ends that, says what it cost, and is the user's again only where the user can
get it (not in an exit hook)."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support import validate_event
from tests.unit.test_worker import hold_until_closed, run_to_exit

pytest.importorskip("pyiceberg")

LOST = (
    "iceberg_facets: 2 captured operations were not yet made into lineage events when a KeyboardInterrupt ended "
    "the closing; they are lost"
)


def interrupted_on_the_users_thread(directory: Path) -> Any:
    """Lineage on (events to a file in ``directory``, built on a thread of this process), one block already
    started, then its worker held on its own thread until lineage closes, with two more blocks started after: the
    thread that closes lineage (the main one) takes them over, and a Ctrl-C comes while it makes the first into
    an event. Returns the handle."""
    import iceberg_facets
    from iceberg_facets import runtime
    from iceberg_facets.events import RunIdentity
    from spark_lineage.events import new_run_id

    handle = iceberg_facets.enable(
        transport={"type": "file", "log_file_path": str(directory / "events.jsonl"), "append": True},
        spool_dir=str(directory / "spool"),
        delivery="thread",
        job_name="etl",
    )
    lineage = runtime.active()
    assert lineage is not None
    lineage.start_run(RunIdentity(new_run_id(int(time.time() * 1000)), "etl.first", None))
    assert handle.flush(30)
    hold_until_closed(lineage.worker, lambda item: True)
    for name in ("etl.second", "etl.third"):
        lineage.start_run(RunIdentity(new_run_id(int(time.time() * 1000)), name, None))
    return handle


def _sent(directory: Path) -> list[dict[str, Any]]:
    """The events written to the file in ``directory``, each validated."""
    sent = [json.loads(line) for line in (directory / "events.jsonl").read_text().splitlines()]
    for event in sent:
        validate_event(event)
    return sent


def test_a_ctrl_c_while_disable_makes_what_was_left_into_events_is_raised_once_lineage_has_closed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    handle = interrupted_on_the_users_thread(tmp_path)
    with caplog.at_level(logging.WARNING, logger="iceberg_facets"), pytest.raises(KeyboardInterrupt):
        handle.disable(timeout=10)
    assert LOST in caplog.messages
    assert not handle.enabled and handle.disable() is True, "raised once"
    assert [(e["job"]["name"], e["eventType"]) for e in _sent(tmp_path)] == [("etl.first", "START")]


AT_EXIT = """
import sys
from pathlib import Path
from tests.unit.test_iceberg_facets_runtime import interrupted_on_the_users_thread

interrupted_on_the_users_thread(Path(sys.argv[1]))
print("exiting", flush=True)
"""


def test_a_ctrl_c_while_the_exit_makes_what_was_left_into_events_is_said_and_not_raised_again(
    tmp_path: Path,
) -> None:
    """At the process's exit (iceberg_facets' exit hook) the interrupt only cut the exit's work short: what it
    left is counted in a warning, and the exit goes on with no traceback (Python would print an interrupt raised
    in an exit hook as an exception ignored there)."""
    result = run_to_exit(AT_EXIT, str(tmp_path))
    assert (result.returncode, result.stdout) == (0, "exiting\n"), result.stderr
    printed = result.stderr.splitlines()
    assert LOST in printed and not [line for line in printed if "Traceback" in line or "ignored" in line], printed
    assert [(e["job"]["name"], e["eventType"]) for e in _sent(tmp_path)] == [("etl.first", "START")]
