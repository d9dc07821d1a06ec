"""Quiet by default: a backend that is down is one WARNING line per kind of problem, with counts, and no
traceback above DEBUG; the line saying where lineage goes names no secret; openlineage-python's own warnings
during sends are said once, not once per event; the fallback handler prints only while nobody configured
logging."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import requests
from openlineage.client import OpenLineageClient
from openlineage.client.transport import get_default_factory

from spark_lineage.config import resolve
from spark_lineage.delivery import Delivery, FailoverSpool, create_client
from spark_lineage.redaction import Redactor, protect_logs
from spark_lineage.transports import leave_retries_to_the_spool
from spark_lineage.worker import ErrorLog, problem
from tests.support import REPO_ROOT, free_port, minimal_run_event

EVENTS = 12


def _deliver_to(
    transport_settings: dict[str, object], spool: FailoverSpool, caplog: pytest.LogCaptureFixture
) -> Delivery:
    transport = get_default_factory().create(transport_settings)
    leave_retries_to_the_spool(transport)
    delivery = Delivery(OpenLineageClient(transport=transport), spool, ErrorLog(), Redactor())
    with caplog.at_level(logging.DEBUG):
        for run in range(EVENTS):
            delivery.submit(minimal_run_event(run))
        assert not delivery.close(1.5)
        # close() returns once the backend failed (what waits is on disk), which the lane may say after: the
        # failure at WARNING, then its details at DEBUG, both while DEBUG is captured.
        deadline = time.monotonic() + 30
        while not 0 < _said_at_warning(caplog) <= _details_at_debug(caplog):
            assert time.monotonic() < deadline, "a failure said at WARNING has no details at DEBUG"
            time.sleep(0.01)
    return delivery


def _said_at_warning(caplog: pytest.LogCaptureFixture) -> int:
    return len([r for r in caplog.records if r.levelno == logging.WARNING and "details at DEBUG" in r.getMessage()])


def _details_at_debug(caplog: pytest.LogCaptureFixture) -> int:
    return len([r for r in caplog.records if r.levelno == logging.DEBUG and r.exc_info])


def _printed(record: logging.LogRecord) -> str:
    """What a plain handler prints for ``record``: its message and any traceback."""
    return logging.Formatter("%(message)s").format(record)


def test_a_dead_backend_is_one_warning_with_where_the_events_wait_and_a_count_at_close(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    _deliver_to({"type": "http", "url": url}, FailoverSpool(tmp_path), caplog)

    warnings = [_printed(r) for r in caplog.records if r.levelno >= logging.WARNING]
    # How many events wait when the first send fails depends on how fast the sender woke up.
    waiting = re.fullmatch(
        r"spark_lineage: (1 lineage event|([2-9]|1[0-2]) lineage events) not delivered .*", warnings[0]
    )
    assert waiting, warnings[0]
    assert warnings == [
        f"spark_lineage: {waiting.group(1)} not delivered to http {url}/api/v1/lineage "
        f"(connection refused); they wait in the spool at {tmp_path} and are sent when the backend answers "
        f"again, or with: spark-lineage replay --spool {tmp_path} (repeats are counted; details at DEBUG)",
        f"spark_lineage: {EVENTS} lineage events: 0 delivered, {EVENTS} spooled for replay, 0 lost; the {EVENTS} "
        "spooled (jobs default/job_0, default/job_1, default/job_10, default/job_11, default/job_2 and 7 more) were "
        f"not delivered to http {url}/api/v1/lineage (connection refused) and wait in {tmp_path}: deliver them "
        f"with: spark-lineage replay --spool {tmp_path}",
    ]
    tracebacks = [_printed(r) for r in caplog.records if r.levelno == logging.DEBUG and r.exc_info]
    assert tracebacks and all("Traceback (most recent call last)" in text for text in tracebacks)
    assert any("ConnectionRefusedError" in text for text in tracebacks)


def test_a_composite_transports_failing_child_is_one_warning_not_one_per_event(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    events_file = tmp_path / "events.jsonl"
    settings = {
        "type": "composite",
        "continue_on_failure": True,
        "transports": [
            {"type": "http", "url": url, "name": "backend"},
            {"type": "file", "log_file_path": str(events_file), "append": True, "name": "copy"},
        ],
    }
    transport = get_default_factory().create(settings)
    leave_retries_to_the_spool(transport)
    delivery = Delivery(
        OpenLineageClient(transport=transport), FailoverSpool(tmp_path / "spool"), ErrorLog(), Redactor()
    )
    with caplog.at_level(logging.DEBUG):
        for run in range(EVENTS):
            delivery.submit(minimal_run_event(run))
        assert delivery.close(30)  # the composite delivered each event (to the file)
    assert len(events_file.read_text().splitlines()) == EVENTS

    warnings = [_printed(r) for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings
    (warning,) = warnings
    assert warning == (
        f"spark_lineage: sending to composite(http {url}/api/v1/lineage, file {events_file}): "
        "openlineage.client.transport.composite: Transport <HttpTransport(name=backend, kind=http, priority=0)> "
        "failed to emit event with error: connection refused (repeats are counted; details at DEBUG)"
    )
    # openlineage-python's own line for each event is still there for DEBUG readers.
    demoted = [
        r for r in caplog.records if r.name == "openlineage.client.transport.composite" and "failed to emit" in r.msg
    ]
    assert len(demoted) == EVENTS and {r.levelname for r in demoted} == {"DEBUG"}


def test_an_error_kind_that_keeps_happening_is_mentioned_again_at_most_every_few_minutes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    errors = ErrorLog(clock=lambda: now[0], reminder_seconds=300)
    with caplog.at_level(logging.DEBUG, logger="spark_lineage"):
        for second in range(0, 700, 10):
            now[0] = float(second)
            errors.report("analyzing a query", ValueError(f"bad plan at {second}"))
        errors.report("reading a report", KeyError("x"))
        errors.summarize()
        errors.summarize()  # nothing new: nothing said
    warnings = [_printed(r) for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == [
        "spark_lineage: analyzing a query failed: ValueError: bad plan at 0 (repeats are counted; details at DEBUG)",
        "spark_lineage: analyzing a query failed: ValueError: bad plan at 300 (30 more failures since the last "
        "mention, 31 in all)",
        "spark_lineage: analyzing a query failed: ValueError: bad plan at 600 (30 more failures since the last "
        "mention, 61 in all)",
        "spark_lineage: reading a report failed: KeyError: 'x' (repeats are counted; details at DEBUG)",
        "spark_lineage: analyzing a query failed 9 more times (70 in all; details at DEBUG)",
    ]
    assert errors.counts == {"analyzing a query": 70, "reading a report": 1}
    assert len([r for r in caplog.records if r.levelno == logging.DEBUG and r.exc_info]) == 71


def test_where_lineage_goes_names_no_secret(tmp_path: Path) -> None:
    secret = "s3cr3t-in-the-query"
    api_key = "planted-api-key-123"
    port = free_port()
    config = resolve(
        {
            "spark.openlineage.transport.type": "http",
            "spark.openlineage.transport.url": f"http://lineage:pw-in-url@127.0.0.1:{port}/base?api_key={secret}",
            "spark.openlineage.transport.auth.type": "api_key",
            "spark.openlineage.transport.auth.apiKey": api_key,
            "spark.openlineage.python.spool.dir": str(tmp_path),
        }
    )
    redactor = Redactor(config.redaction_pattern)
    client = create_client(config, redactor)
    delivery = Delivery(client, FailoverSpool(tmp_path), ErrorLog(), redactor)
    described = delivery.description()
    delivery.close(0)
    assert described.startswith(f"events go to http://127.0.0.1:{port}/")
    assert described.endswith(f"(spooled in {tmp_path})")
    for planted in (secret, api_key, "pw-in-url"):
        assert planted not in described


FALLBACK_SCRIPT = """
import logging, os, sys
from spark_lineage import logs
if sys.argv[1] == "configured":
    logging.basicConfig(format="CONFIGURED %(levelname)s %(message)s", level=logging.WARNING)
logs.show_on_stderr("INFO")
log = logging.getLogger("spark_lineage")
log.info("spark_lineage: lineage on for application app; events go to http://host/api/v1/lineage")
log.debug("spark_lineage: a detail")
log.warning("spark_lineage: a problem")
"""


@pytest.mark.parametrize(
    ("mode", "level", "printed"),
    [
        (
            "unconfigured",
            None,
            [
                "spark_lineage: lineage on for application app; events go to http://host/api/v1/lineage",
                "spark_lineage: a problem",
            ],
        ),
        ("unconfigured", "WARNING", ["spark_lineage: a problem"]),
        ("unconfigured", "OFF", []),
        (
            "unconfigured",
            "debug",
            [
                "spark_lineage: lineage on for application app; events go to http://host/api/v1/lineage",
                "spark_lineage: a detail",
                "spark_lineage: a problem",
            ],
        ),
        # The application's own configuration decides, and our handler prints nothing twice.
        ("configured", None, ["CONFIGURED WARNING spark_lineage: a problem"]),
    ],
)
def test_the_fallback_handler_prints_only_while_nobody_configured_logging(
    tmp_path: Path, mode: str, level: str | None, printed: list[str]
) -> None:
    script = tmp_path / "fallback.py"
    script.write_text(textwrap.dedent(FALLBACK_SCRIPT))
    env = {"PYTHONPATH": str(REPO_ROOT), **({"SPARK_LINEAGE_LOG_LEVEL": level} if level else {})}
    result = subprocess.run(
        [sys.executable, str(script), mode], capture_output=True, text=True, env=env, timeout=60, check=True
    )
    assert result.stderr.splitlines() == printed
    assert result.stdout == ""


def test_the_redaction_applies_to_the_lines_said_once(caplog: pytest.LogCaptureFixture) -> None:
    secret = "hunter2-planted-secret"
    protect_logs(Redactor(secrets=[secret]))
    errors = ErrorLog()
    with caplog.at_level(logging.DEBUG, logger="spark_lineage"):
        try:
            raise RuntimeError(f"backend said password={secret}")
        except RuntimeError as error:
            errors.report("sending", error)
    assert caplog.records
    for record in caplog.records:
        assert secret not in _printed(record)


def _chained(outer: BaseException, inner: BaseException) -> BaseException:
    outer.__cause__ = inner
    return outer


def _http_error(status: int) -> BaseException:
    response = requests.Response()
    response.status_code = status
    return requests.HTTPError(f"{status} Server Error", response=response)


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (
            _chained(requests.ConnectionError("Max retries exceeded"), ConnectionRefusedError(111, "refused")),
            "connection refused",
        ),
        (requests.ReadTimeout("read timed out"), "timed out"),
        (_http_error(503), "HTTP 503"),
        (_chained(requests.ConnectionError("x"), OSError("[Errno -2] Name or service not known")), "unknown host"),
        (RuntimeError("the broker said no\nand more"), "RuntimeError: the broker said no"),
    ],
)
def test_a_failed_send_is_said_in_a_few_words(error: BaseException, said: str) -> None:
    assert problem(error) == said


def test_lineage_that_cannot_turn_on_is_one_line_with_the_traceback_at_debug(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from spark_lineage import _autoload, activation

    def broken(session: object) -> None:
        raise RuntimeError("the JVM went away\nwith more lines")

    monkeypatch.setattr(activation, "session_created", broken)
    with caplog.at_level(logging.DEBUG, logger="spark_lineage"):
        _autoload._session_created(object())  # never raises into the user's SparkSession
    (warning,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert _printed(warning) == "spark_lineage: could not turn lineage on: RuntimeError: the JVM went away"
    (detail,) = [r for r in caplog.records if r.levelno == logging.DEBUG]
    assert "Traceback (most recent call last)" in _printed(detail)
