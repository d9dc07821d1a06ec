"""The console transport prints one line per run (per event when asked), also when openlineage-python falls back
to it."""

from __future__ import annotations

import io
import sys

import pytest
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.transport.console import ConsoleTransport

from spark_lineage.config import resolve
from spark_lineage.delivery.console import PrintingConsoleTransport, summary_line
from spark_lineage.delivery.transports import create_client, make_transport
from spark_lineage.redaction import Redactor

EVENT = RunEvent(
    eventType=RunState.COMPLETE,
    eventTime="2026-01-01T00:00:00Z",
    run=Run(runId="019a0000-0000-7000-8000-000000000001"),
    job=Job(namespace="default", name="app.write"),
    producer="https://example.com/spark-lineage",
    inputs=[InputDataset(namespace="file", name="/data/in"), InputDataset(namespace="s3://b", name="k/dims")],
    outputs=[OutputDataset(namespace="file", name="/data/out")],
)


def test_a_line_per_event(capsys: pytest.CaptureFixture[str]) -> None:
    assert summary_line(EVENT) == (
        "OpenLineage COMPLETE default/app.write run 019a0000-0000-7000-8000-000000000001: "
        "/data/in, s3://b/k/dims -> /data/out"
    )
    started = RunEvent(eventType=RunState.START, eventTime=EVENT.eventTime, run=EVENT.run, job=EVENT.job, producer="p")
    assert summary_line(started) == "OpenLineage START default/app.write run 019a0000-0000-7000-8000-000000000001"
    PrintingConsoleTransport().emit(EVENT)
    assert capsys.readouterr().out == summary_line(EVENT) + "\n"


def test_every_console_transport_prints(monkeypatch: pytest.MonkeyPatch, tmp_path: pytest.TempPathFactory) -> None:
    for name in ("OPENLINEAGE_URL", "OPENLINEAGE_CONFIG", "OPENLINEAGE__TRANSPORT__TYPE", "OPENLINEAGE_DISABLED"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # no openlineage.yml
    fallback = create_client(resolve({}), Redactor()).transport  # nothing configured anywhere
    assert type(fallback) is PrintingConsoleTransport
    assert type(make_transport({"type": "console"})) is PrintingConsoleTransport
    assert isinstance(fallback, ConsoleTransport) and fallback.kind == "console"


def test_a_line_per_run_unless_every_event_is_asked_for(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: pytest.TempPathFactory
) -> None:
    """A query's START and RUNNING events print nothing by default: its end says what it read and wrote."""
    started = RunEvent(eventType=RunState.START, eventTime=EVENT.eventTime, run=EVENT.run, job=EVENT.job, producer="p")
    running = RunEvent(
        eventType=RunState.RUNNING, eventTime=EVENT.eventTime, run=EVENT.run, job=EVENT.job, producer="p"
    )
    for name in ("OPENLINEAGE_URL", "OPENLINEAGE_CONFIG", "OPENLINEAGE__TRANSPORT__TYPE", "OPENLINEAGE_DISABLED"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    quiet = create_client(resolve({}), Redactor()).transport
    chatty = create_client(resolve({"spark.openlineage.python.console.everyEvent": "true"}), Redactor()).transport
    for event in (started, running, EVENT):
        quiet.emit(event)
    assert capsys.readouterr().out == summary_line(EVENT) + "\n"
    for event in (started, running, EVENT):
        chatty.emit(event)
    assert capsys.readouterr().out.splitlines() == [summary_line(e) for e in (started, running, EVENT)]


def test_a_closed_stdout_does_not_fail_the_send(monkeypatch: pytest.MonkeyPatch) -> None:
    """The line is for people; the event counts as sent whether or not it could be printed (no resend)."""
    closed = io.StringIO()
    closed.close()
    monkeypatch.setattr(sys, "stdout", closed)
    PrintingConsoleTransport().emit(EVENT)  # raises nothing
