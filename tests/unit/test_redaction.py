"""Secrets never leave: the redaction rules, events as the spool stores them, and log records."""

from __future__ import annotations

import json
import logging

import pytest
from openlineage.client.event_v2 import InputDataset, Job, Run, RunEvent, RunState
from openlineage.client.facet_v2 import sql_job

from spark_lineage.delivery.payloads import to_payload
from spark_lineage.redaction import REDACTED, Redactor, protect_logs, url_passwords


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "jdbc:postgresql://db:5432/sales?user=etl&password=hunter22&ssl=true",
            f"jdbc:postgresql://db:5432/sales?user=etl&password={REDACTED}&ssl=true",
        ),
        (
            "jdbc:sqlserver://db;user=etl;password=hunter22;databaseName=x",
            f"jdbc:sqlserver://db;user=etl;password={REDACTED};databaseName=x",
        ),
        ("jdbc:mysql://etl:hunter22@db:3306/sales", "jdbc:mysql://db:3306/sales"),
        ("jdbc:oracle:thin:etl/hunter22@//db:1521/svc", "jdbc:oracle:thin:@//db:1521/svc"),
        ("s3a://AKIAEXAMPLE:wJalrXUtn@bucket/key", "s3a://bucket/key"),
        (
            "CREATE TABLE t USING parquet OPTIONS ('password'='hunter22', path '/x')",
            f"CREATE TABLE t USING parquet OPTIONS ('password'='{REDACTED}', path '/x')",
        ),
        ('OPTIONS (secret.key "hunter22")', f'OPTIONS (secret.key "{REDACTED}")'),
        (
            "Map(fs.s3a.secret.key -> hunter22, spark.master -> local)",
            f"Map(fs.s3a.secret.key -> {REDACTED}, spark.master -> local)",
        ),
        ('{"access.key": "hunter22", "name": "db.tokens"}', f'{{"access.key": "{REDACTED}", "name": "db.tokens"}}'),
        ("reading db.tokens and db.passwords", "reading db.tokens and db.passwords"),
        ("SELECT password FROM users", "SELECT password FROM users"),
    ],
)
def test_text_rules(text: str, expected: str) -> None:
    assert Redactor().text(text) == expected
    # The quick look that decides whether a spooled event is redacted at all must see every rule's case.
    assert Redactor().needs_redaction(text) or text == expected


def test_spark_redaction_regex_adds_to_the_default_pattern() -> None:
    redactor = Redactor("(?i)pepper")
    properties = {
        "spark.hadoop.fs.s3a.secret.key": "k1",
        "spark.custom.pepper": "k2",
        "spark.openlineage.transport.auth.apiKey": "k3",
        "spark.openlineage.transport.headers.X-Team": "k4",
        "spark.master": "local[2]",
        "spark.app.name": "token refresher",  # a value that matches counts too, as in Spark
    }
    assert redactor.properties(properties) == {
        "spark.hadoop.fs.s3a.secret.key": REDACTED,
        "spark.custom.pepper": REDACTED,
        "spark.openlineage.transport.auth.apiKey": REDACTED,
        "spark.openlineage.transport.headers.X-Team": REDACTED,
        "spark.master": "local[2]",
        "spark.app.name": REDACTED,
    }


def test_known_secrets_are_learned_from_transport_settings_and_found_anywhere() -> None:
    redactor = Redactor()
    redactor.learn_from_transport(
        {
            "type": "composite",
            "transports": [
                {
                    "type": "http",
                    "url": "http://bob:url-password@h",
                    "auth": {"type": "api_key", "apiKey": "the-api-key"},
                },
                {"type": "http", "url": "http://h2", "custom_headers": {"X-Team": "team-header-value"}},
            ],
        }
    )
    assert redactor.secrets == {"url-password", "the-api-key", "team-header-value"}
    assert redactor.text("Bearer the-api-key; X-Team: team-header-value") == f"Bearer {REDACTED}; X-Team: {REDACTED}"
    # A short value is still redacted under its key, but not searched for in every string.
    redactor.learn(["abc"])
    assert "abc" not in redactor.secrets


def test_url_passwords() -> None:
    assert url_passwords("http://u:p4ss@h and https://only-user@h2") == ["p4ss"]


def _event(sql: str, dataset: str) -> RunEvent:
    return RunEvent(
        eventType=RunState.COMPLETE,
        eventTime="2026-12-01T00:00:00.000+00:00",
        run=Run(runId="0195f5b6-0000-7000-8000-000000000001"),
        job=Job(namespace="default", name="job", facets={"sql": sql_job.SQLJobFacet(query=sql)}),
        inputs=[InputDataset(namespace="postgres://db:5432", name=dataset)],
        producer="https://example.com/producer",
    )


def test_events_are_spooled_without_secrets() -> None:
    redactor = Redactor()
    redactor.learn(["planted-secret-1"])
    event = _event("CREATE TABLE t OPTIONS ('password'='planted-secret-2') AS SELECT 'planted-secret-1'", "db.t")
    payload = to_payload(event, redactor)
    assert "planted-secret" not in payload.json
    data = json.loads(payload.json)
    assert (
        data["job"]["facets"]["sql"]["query"]
        == f"CREATE TABLE t OPTIONS ('password'='{REDACTED}') AS SELECT '{REDACTED}'"
    )
    assert data["inputs"][0]["name"] == "db.t"


def test_an_event_without_secrets_is_spooled_as_openlineage_python_writes_it() -> None:
    event = _event("SELECT * FROM db.t", "db.t")
    assert to_payload(event, Redactor()).json == to_payload(event).json


def test_log_records_are_redacted_at_every_level(caplog: pytest.LogCaptureFixture) -> None:
    redactor = Redactor()
    redactor.learn(["log-planted-key"])
    protect_logs(redactor)
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("openlineage.client.transport.http").debug("config: %s", {"auth": "log-planted-key"})
        logging.getLogger("py4j.clientserver").debug("Command to send: jdbc:postgresql://h/db?password=hunter22")
        try:
            raise RuntimeError("failed with log-planted-key")
        except RuntimeError:
            logging.getLogger("spark_lineage").exception("it broke")
        logging.getLogger("someone.else").debug("log-planted-key stays: not our logger")
    text = caplog.text
    assert "hunter22" not in text
    assert text.count("log-planted-key") == 1 and "not our logger" in text
    assert f"password={REDACTED}" in text
    # Read from the record: a formatter of another library (PySpark 4's JSON one) may leave the traceback out.
    assert any(f"failed with {REDACTED}" in (record.exc_text or "") for record in caplog.records)


def test_a_formatter_that_reads_the_exception_itself_sees_no_secret() -> None:
    """PySpark 4's JSON formatter formats ``exc_info`` itself, not the ``exc_text`` a record carries."""
    redactor = Redactor()
    redactor.learn(["exc-planted-key"])
    protect_logs(redactor)
    seen: list[str] = []

    class ExceptionReader(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            exception = record.exc_info[1] if record.exc_info else None
            seen.append(f"{record.getMessage()} {exception} {record.exc_text}")

    logger = logging.getLogger("spark_lineage.test_exception_reader")
    handler = ExceptionReader()
    logger.addHandler(handler)
    try:
        try:
            raise RuntimeError("failed with exc-planted-key")
        except RuntimeError:
            logger.exception("it broke")
    finally:
        logger.removeHandler(handler)
    (line,) = seen
    assert "exc-planted-key" not in line and f"failed with {REDACTED}" in line


def test_py4j_calls_as_py4j_logs_them() -> None:
    command = "c\no45\nset\nsspark.openlineage.transport.auth.apiKey\nsk-123456\ne\n"
    assert Redactor().text(command) == f"c\no45\nset\nsspark.openlineage.transport.auth.apiKey\ns{REDACTED}\ne\n"
    harmless = "c\no45\nset\nsspark.app.name\nsmy app\ne\n"
    assert Redactor().text(harmless) == harmless
