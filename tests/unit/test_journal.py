"""The journal of the events a delivery keeps before it spools them (:mod:`spark_lineage.delivery.journal`): a
process killed outright while it keeps some loses none of them, a live owner's journal is never taken, and a
journal that cannot be written costs nothing but the keeping."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from openlineage.client import OpenLineageClient

from spark_lineage.delivery import Delivery, FailoverSpool
from spark_lineage.delivery.journal import Journal, journals_supported
from spark_lineage.delivery.payloads import to_payload
from spark_lineage.delivery.spool import Spool
from spark_lineage.redaction import Redactor
from spark_lineage.worker import ErrorLog
from tests.support import REPO_ROOT, LineageReceiver, minimal_run_event, small_disk, spool_disk, validate_event
from tests.unit.test_delivery_batches import _http, _sent

pytestmark = pytest.mark.skipif(not journals_supported(), reason="a journal needs flock (no journal on Windows)")

_KEEPER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from openlineage.client import OpenLineageClient
    from openlineage.client.transport.http import HttpConfig, HttpTransport
    from spark_lineage.delivery import Delivery, FailoverSpool
    from spark_lineage.redaction import Redactor
    from spark_lineage.worker import ErrorLog
    from tests.support import minimal_run_event

    transport = HttpTransport(HttpConfig.from_dict({"url": sys.argv[2]}))
    spool = FailoverSpool(Path(sys.argv[1]))
    delivery = Delivery(OpenLineageClient(transport=transport), spool, ErrorLog(), Redactor())
    for run in (1, 2, 3):
        delivery.keep([minimal_run_event(run)])
    print("kept", flush=True)
    time.sleep(600)
    """
)


def _jobs(receiver: LineageReceiver) -> list[str]:
    for event in receiver.events:
        validate_event(event)
    return [event["job"]["name"] for event in receiver.events]


def _journals(directory: Path) -> list[Path]:
    return sorted(directory.glob("kept-*.journal"))


def test_what_a_process_killed_outright_kept_is_spooled_by_the_next_to_open_the_spool(tmp_path: Path) -> None:
    """A process that kept three events is killed (SIGKILL) before it spools them: while it lives, its journal
    is its own (a spool opened beside it takes nothing); once it is dead, the next delivery to open the spool
    puts them in it and sends them, each once, and the journal is gone."""
    spool_dir = tmp_path / "spool"
    receiver = LineageReceiver()
    try:
        keeper = subprocess.Popen(
            [sys.executable, "-c", _KEEPER, str(spool_dir), receiver.url],
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO_ROOT,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )
        try:
            assert keeper.stdout is not None
            assert keeper.stdout.readline().strip() == "kept"
            (journal,) = _journals(spool_dir)
            assert journal.name.startswith(f"kept-{keeper.pid}-")
            assert len(journal.read_text().splitlines()) == 3
            beside = Spool(spool_dir)
            assert beside.pending().count == 0
            beside.close()
            assert _journals(spool_dir) == [journal]
        finally:
            keeper.send_signal(signal.SIGKILL)
            keeper.wait(30)
        assert receiver.events == []
        spool = FailoverSpool(spool_dir)
        assert _journals(spool_dir) == []
        delivery = Delivery(OpenLineageClient(transport=_http(receiver.url)), spool, ErrorLog(), Redactor())
        _sent(spool, receiver, 3)
        assert delivery.close(30)
    finally:
        receiver.close()
    assert _jobs(receiver) == ["job_1", "job_2", "job_3"]
    assert set(receiver.copies().values()) == {1}


def test_kept_events_go_in_one_transaction_and_the_journal_is_emptied_then_removed(tmp_path: Path) -> None:
    spool_dir = tmp_path / "spool"
    receiver = LineageReceiver()
    try:
        spool = FailoverSpool(spool_dir)
        delivery = Delivery(OpenLineageClient(transport=_http(receiver.url)), spool, ErrorLog(), Redactor())
        puts: list[int] = []
        put_all = spool.put_all

        def counted(destination: str, payloads: Any, handoff: Any = None) -> Any:
            puts.append(len(payloads))
            return put_all(destination, payloads, handoff)

        spool.put_all = counted  # type: ignore[method-assign]
        delivery.keep([minimal_run_event(1)])
        delivery.keep([minimal_run_event(2), minimal_run_event(3)])
        (journal,) = _journals(spool_dir)
        assert [json.loads(line.split("\t", 1)[1])["job"]["name"] for line in journal.read_text().splitlines()] == [
            "job_1",
            "job_2",
            "job_3",
        ]
        assert puts == []
        delivery.spool_kept()
        assert puts == [3]
        assert journal.stat().st_size == 0
        delivery.submit(minimal_run_event(4))  # nothing kept: spooled on its own
        assert puts == [3, 1]
        delivery.keep([minimal_run_event(5)])
        assert delivery.close(30)
        assert puts == [3, 1, 1]
        assert _journals(spool_dir) == []
    finally:
        receiver.close()
    assert _jobs(receiver) == ["job_1", "job_2", "job_3", "job_4", "job_5"]


def test_a_journal_line_cut_short_or_unreadable_is_left_out_and_the_rest_spooled_in_order(tmp_path: Path) -> None:
    spool_dir = tmp_path / "spool"
    spool_dir.mkdir()
    first, second = (to_payload(minimal_run_event(run)) for run in (1, 2))
    journal = Journal(spool_dir)
    journal.append("http example", [first])
    with journal.path.open("ab") as file:
        file.write(b"\x00\xff not a journal line\n")
    journal.append("http example", [second])
    with journal.path.open("ab") as file:
        file.write(b'["http example", "r", "default/job_3", false]\t{"eventType": "STA')  # its writer died here
    assert journal._fd is not None
    os.close(journal._fd)  # the owner is gone, and its lock with it
    spool = Spool(spool_dir)
    try:
        assert [(event.job, event.payload) for event in spool.lease("http example", "me", 60, 10)] == [
            (first.job, first.json),
            (second.job, second.json),
        ]
    finally:
        spool.close()
    assert _journals(spool_dir) == []


def _fill(disk: Path) -> None:
    """Fill ``disk`` to its last byte."""
    with (disk / "filler").open("wb") as filler:
        try:
            while True:
                filler.write(bytes(64 * 1024))
                filler.flush()
        except OSError as error:
            assert error.errno == errno.ENOSPC


def test_a_journal_a_full_disk_will_not_take_costs_the_keeping_and_no_event(tmp_path: Path) -> None:
    """The disk fills up while events are kept: the next ones cannot be journaled, so they and those kept are
    spooled at once (in memory: the disk is full), said once, and all of them are delivered."""
    receiver = LineageReceiver()
    errors = ErrorLog()
    try:
        with small_disk(tmp_path / "disk", spool_disk(768)) as disk:
            spool = FailoverSpool(disk / "spool")
            delivery = Delivery(OpenLineageClient(transport=_http(receiver.url)), spool, errors, Redactor())
            delivery.keep([minimal_run_event(1)])
            assert len(_journals(disk / "spool")) == 1
            _fill(disk)
            delivery.keep([minimal_run_event(run) for run in range(2, 40)])  # more than the page the journal has
            deadline = time.monotonic() + 30
            while len(receiver.events) < 39:
                assert time.monotonic() < deadline, "the events kept were not sent"
                time.sleep(0.01)
            assert delivery.close(30)
    finally:
        receiver.close()
    assert _jobs(receiver) == [f"job_{run}" for run in range(1, 40)]
    assert errors.counts.get("writing the journal of the events kept") == 1
