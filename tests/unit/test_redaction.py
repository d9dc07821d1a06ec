"""Secrets never leave: the redaction rules, events as the spool stores them, and log records."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest
from openlineage.client.event_v2 import InputDataset, Job, Run, RunEvent, RunState
from openlineage.client.facet_v2 import sql_job

from spark_lineage.delivery.payloads import to_payload
from spark_lineage.redaction import REDACTED, Redactor, protect_logs, public_url, url_passwords


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


@pytest.mark.parametrize(
    "where",
    ["input name", "input namespace", "output facet", "sql", "job name", "second event's input"],
)
def test_a_secret_in_any_piece_of_a_batchs_events_is_redacted(where: str) -> None:
    """The encoder writes (and the redactor looks at) each dataset once per batch: a secret in a dataset of
    any event of the batch, or in the rest of one, is found all the same."""
    from openlineage.client.event_v2 import OutputDataset

    from spark_lineage.delivery.encoding import EventEncoder

    secret_url = "jdbc:mysql://etl:hunter22@db:3306/sales"
    shared = InputDataset(namespace="postgres://db:5432", name="db.t")
    planted = {
        "input name": InputDataset(namespace="postgres://db:5432", name=secret_url),
        "input namespace": InputDataset(namespace=secret_url, name="db.t"),
        "second event's input": InputDataset(namespace=secret_url, name="db.u"),
    }

    def event(inputs: list[Any], job: str = "job", sql: str = "SELECT 1", output_note: str = "x") -> RunEvent:
        output = OutputDataset(namespace="file", name="/out", facets={"note": {"_producer": "p", "text": output_note}})
        return RunEvent(
            eventType=RunState.COMPLETE,
            eventTime="2026-12-01T00:00:00.000+00:00",
            run=Run(runId="0195f5b6-0000-7000-8000-000000000001"),
            job=Job(namespace="default", name=job, facets={"sql": sql_job.SQLJobFacet(query=sql)}),
            inputs=inputs,
            outputs=[output],
            producer="https://example.com/producer",
        )

    first = event([shared, planted.get(where, shared)] if where in ("input name", "input namespace") else [shared])
    second = event(
        [shared, planted["second event's input"]] if where == "second event's input" else [shared],
        job=secret_url if where == "job name" else "job",
        sql=f"SELECT * FROM {secret_url}" if where == "sql" else "SELECT 1",
        output_note=secret_url if where == "output facet" else "x",
    )
    redactor = Redactor()
    assert redactor.checks_piecewise
    encoder = EventEncoder()
    payloads = [to_payload(e, redactor, encoder=encoder) for e in (first, second)]
    assert all("hunter22" not in p.json for p in payloads)
    in_first = where in ("input name", "input namespace")
    assert ["hunter22" in to_payload(e).json for e in (first, second)] == [in_first, not in_first]
    # Each event as it would be alone, through an encoder of its own.
    assert [p.json for p in payloads] == [to_payload(e, redactor).json for e in (first, second)]


@pytest.mark.parametrize(
    ("pattern", "secret", "piecewise"),
    [
        (None, "hunter22", True),
        ("internal-[0-9]+", "hunter22", False),
        (None, "hunt, {er22", False),
        (None, 'hunter"22', False),
    ],
)
def test_documents_are_looked_at_piece_by_piece_only_where_no_rule_can_match_across_pieces(
    pattern: str | None, secret: str, piecewise: bool
) -> None:
    redactor = Redactor(pattern)
    assert redactor.checks_piecewise is (pattern is None)  # asked before the secret is known: the answer is kept
    redactor.learn([secret])
    assert redactor.checks_piecewise is piecewise  # until the secrets change


@pytest.mark.parametrize("pattern", [None, "internal-[0-9]+"])
def test_a_known_secret_that_json_escapes_is_found_all_the_same(pattern: str | None) -> None:
    """JSON writes ``ü`` as ``\\u00fc``: a look at the text alone missed such a secret, and it was spooled."""
    redactor = Redactor(pattern)
    redactor.learn(["Grüße-geheim-77"])
    payload = to_payload(_event("SELECT 'Grüße-geheim-77'", "db.t"), redactor)
    assert "Gr\\u00fc\\u00dfe-geheim-77" in to_payload(_event("SELECT 'Grüße-geheim-77'", "db.t")).json
    assert "geheim" not in payload.json
    assert REDACTED in json.loads(payload.json)["job"]["facets"]["sql"]["query"]


def test_a_string_looked_at_before_is_looked_at_again_once_the_redactor_learns_a_secret() -> None:
    """Strings found clean are skipped in later events, but only while the rules stay what they were."""
    redactor = Redactor()
    event = _event("SELECT * FROM vault WHERE k = 'opensesame-42'", "db.t")
    assert "opensesame-42" in to_payload(event, redactor).json
    assert "SELECT * FROM vault WHERE k = 'opensesame-42'" in redactor.clean_strings()
    redactor.learn(["opensesame-42"])
    assert "opensesame-42" not in to_payload(event, redactor).json
    redactor.learn_url_params({"code": "x"})  # url parameters are rules too
    assert redactor.clean_strings() == set()


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


def test_a_record_made_from_a_dict_as_structlog_makes_one_is_made_and_ours_are_still_redacted() -> None:
    """``logging.makeLogRecord`` (structlog's formatter calls it for every line: an Airflow task's logs) asks the
    record factory for a record with no name, then fills it in: the factory must make it."""
    redactor = Redactor()
    redactor.learn(["dict-planted-key"])
    protect_logs(redactor)
    made = logging.makeLogRecord({"name": "spark_lineage", "msg": "a line", "levelno": logging.INFO})
    assert (made.name, made.getMessage()) == ("spark_lineage", "a line")
    logger = logging.getLogger("spark_lineage")
    record = logger.makeRecord("spark_lineage", logging.INFO, __file__, 1, "key dict-planted-key", (), None)
    assert record.getMessage() == f"key {REDACTED}"


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


# --- url parameters and headers: secrets the configuration marks as such -------------------------------------

URL_CONFS = {
    "spark.openlineage.transport.type": "http",
    "spark.openlineage.transport.url": "http://etl:url-pass-9@127.0.0.1:9/base/",
    "spark.openlineage.transport.urlParams.code": "Az-func-key-01",
    "spark.openlineage.transport.urlParams.v": "42",  # short: redacted by name, not searched for
    "spark.openlineage.transport.headers.X-Team": "team-header-02",
    "spark.openlineage.transport.auth.type": "api_key",
    "spark.openlineage.transport.auth.apiKey": "api-key-03",
}
URL_SECRETS = ("Az-func-key-01", "team-header-02", "api-key-03", "url-pass-9")


def _client(confs: dict[str, str], redactor: Redactor) -> Any:
    from spark_lineage import config
    from spark_lineage.delivery.transports import create_client

    return create_client(config.resolve(confs), redactor)


def test_url_parameters_are_secret_whatever_their_length() -> None:
    redactor = Redactor()
    _client(URL_CONFS, redactor)
    assert redactor.secrets == set(URL_SECRETS)
    assert redactor.url_params == {"code", "v"}
    # As urllib3 logs a request, and as an error of requests names it.
    line = '"POST /base/api/v1/lineage?code=Az-func-key-01&v=42 HTTP/1.1" 503'
    assert redactor.text(line) == f'"POST /base/api/v1/lineage?code={REDACTED}&v={REDACTED} HTTP/1.1" 503'
    assert redactor.needs_redaction("with url: /x?v=42")
    # Only in a URL's query: the same name elsewhere in an event is not a url parameter.
    assert redactor.text("SELECT * FROM t WHERE v=42 AND code='x'") == "SELECT * FROM t WHERE v=42 AND code='x'"
    # A url parameter's value long enough to be searched for is found anywhere.
    assert redactor.text("the key Az-func-key-01 leaked") == f"the key {REDACTED} leaked"


@pytest.mark.parametrize(
    ("url", "public"),
    [
        ("http://h/api/v1/lineage?code=abc", f"http://h/api/v1/lineage?code={REDACTED}"),
        ("https://u:p@h:8/x?a=1&flag&b=#frag", f"https://h:8/x?a={REDACTED}&flag&b=#frag"),
        ("http://h/api/v1/lineage", "http://h/api/v1/lineage"),
    ],
)
def test_public_url(url: str, public: str) -> None:
    assert public_url(url) == public


def test_the_destination_and_its_kept_settings_hold_names_never_values() -> None:
    from spark_lineage.transports import describe

    destination, settings = describe(_client(URL_CONFS, Redactor()).transport)
    assert destination == f"http http://127.0.0.1:9/base/api/v1/lineage?code={REDACTED}&v={REDACTED}"
    assert settings == {
        "type": "http",
        "url": "http://127.0.0.1:9/base/",
        "endpoint": "api/v1/lineage",
        "timeout": 5.0,
        "auth": {"type": "api_key"},
        "urlParams": ["code", "v"],
        "headers": ["X-Team"],
    }
    kept = json.dumps(settings)
    assert [secret for secret in (*URL_SECRETS, "42") if secret in destination + kept] == []


def test_repr_of_the_configuration_holds_no_secret() -> None:
    from spark_lineage import config

    text = repr(config.resolve(URL_CONFS))
    assert text.startswith("LineageConfig(") and [s for s in (*URL_SECRETS, "42") if s in text] == []


def test_secrets_are_learned_from_the_clients_own_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """openlineage.yml, OPENLINEAGE__* and OPENLINEAGE_URL: openlineage-python logs each transport's settings at
    DEBUG as it makes it, before this library sees the transport."""
    for name in [name for name in os.environ if name.startswith("OPENLINEAGE")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # no openlineage.yml of the machine's
    yml = tmp_path / "openlineage.yml"
    yml.write_text(
        "transport:\n  type: http\n  url: http://127.0.0.1:9\n  endpoint: api/v1/lineage?code=yml-code-11\n"
        "  custom_headers:\n    X-Team: yml-header-12\n"
    )
    monkeypatch.setenv("OPENLINEAGE_CONFIG", str(yml))
    cases = [({}, ("yml-code-11", "yml-header-12"))]
    env = {
        "OPENLINEAGE__TRANSPORT__TYPE": "http",
        "OPENLINEAGE__TRANSPORT__URL": "http://127.0.0.1:9",
        "OPENLINEAGE__TRANSPORT__ENDPOINT": "api/v1/lineage?code=env-code-13",
        "OPENLINEAGE__TRANSPORT__CUSTOM_HEADERS__X_TEAM": "env-header-14",
    }
    cases.append((env, ("env-code-13", "env-header-14")))
    url = {"OPENLINEAGE_URL": "http://etl:env-pass-15@127.0.0.1:9", "OPENLINEAGE_ENDPOINT": "api/v1/lineage?code=x1"}
    cases.append((url, ("env-pass-15", "x1")))
    for variables, secrets in cases:
        with monkeypatch.context() as patch:
            if variables:
                patch.delenv("OPENLINEAGE_CONFIG")
            for name, value in variables.items():
                patch.setenv(name, value)
            redactor = Redactor()
            protect_logs(redactor)
            caplog.clear()
            with caplog.at_level(logging.DEBUG):
                transport = _client({}, redactor).transport
            assert getattr(transport, "kind", None) == "http"
            assert "Constructing OpenLineage transport" in caplog.text
            assert [secret for secret in secrets if secret in caplog.text] == []
            assert redactor.url_params == {"code"}


def test_replay_puts_back_url_parameters_and_headers_the_spool_never_kept(tmp_path: Path) -> None:
    from spark_lineage.delivery.replay import replay
    from spark_lineage.delivery.spool import Spool
    from spark_lineage.delivery.transports import ReplaySecrets
    from spark_lineage.transports import describe
    from tests.support import LineageReceiver

    receiver = LineageReceiver()
    try:
        confs = {
            "spark.openlineage.transport.type": "http",
            "spark.openlineage.transport.url": receiver.url,
            "spark.openlineage.transport.urlParams.code": "replay-code-21",
            "spark.openlineage.transport.headers.X-Team": "replay-header-22",
        }
        destination, settings = describe(_client(confs, Redactor()).transport)
        spool = Spool(tmp_path)
        spool.remember_destination(destination, json.dumps(settings))
        payload = to_payload(_event("SELECT 1", "db.t"))
        spool.put(destination, payload.run_id, payload.job, payload.application, payload.json)
        given = {"spark.openlineage.transport.urlParams.code": "replay-code-21"}
        result = replay(spool, None, 10, ReplaySecrets.gathered(given))
        assert (result.sent, result.left) == (0, 1)
        assert result.problems == (
            f"http {receiver.url}/api/v1/lineage?code={REDACTED} takes headers, which the spool does not keep: "
            "pass --conf spark.openlineage.transport.headers.X-Team=<value>",
        )
        given["spark.openlineage.transport.headers.x-team"] = "replay-header-22"  # header names: any case
        result = replay(spool, None, 10, ReplaySecrets.gathered(given))
        assert (result.sent, result.left, result.problems) == (1, 0, ())
        assert receiver.paths == ["/api/v1/lineage?code=replay-code-21"]
        assert receiver.headers[0]["X-Team"] == "replay-header-22"
        spool.close()
    finally:
        receiver.close()
    for file in tmp_path.iterdir():
        assert b"replay-code-21" not in file.read_bytes() and b"replay-header-22" not in file.read_bytes()


def test_replay_names_every_secret_a_kept_destination_lacks_in_one_line() -> None:
    from spark_lineage.delivery.transports import ReplaySecrets, rebuilt
    from spark_lineage.errors import CannotRebuildError

    kept = {
        "type": "http",
        "url": "http://127.0.0.1:9",
        "endpoint": "api/v1/lineage",
        "auth": {"type": "api_key"},
        "urlParams": ["code"],
        "headers": ["X-Team"],
    }
    destination = f"http http://127.0.0.1:9/api/v1/lineage?code={REDACTED}"
    prefix = "spark.openlineage.transport."
    with pytest.raises(CannotRebuildError) as lacking:
        rebuilt(destination, kept, ReplaySecrets())
    assert str(lacking.value) == (
        f"{destination} takes an api key, url parameters and headers, which the spool does not keep: pass "
        f"--conf {prefix}auth.apiKey=<value> --conf {prefix}urlParams.code=<value> "
        f"--conf {prefix}headers.X-Team=<value>"
    )
    given = {f"{prefix}auth.apiKey": "k-31", f"{prefix}urlParams.code": "c", f"{prefix}custom_headers.X-Team": "t"}
    secrets = ReplaySecrets.gathered(given)
    assert (secrets.api_key, dict(secrets.url_params), dict(secrets.headers)) == (
        "k-31",
        {"code": "c"},
        {"X-Team": "t"},
    )
    transport = rebuilt(destination, kept, secrets)
    assert (transport.endpoint, transport.config.custom_headers) == ("api/v1/lineage?code=c", {"X-Team": "t"})
    # Only these keys complete a kept destination; the others name a transport of their own.
    assert [ReplaySecrets.is_key(prefix + key) for key in ("urlParams.code", "headers.X", "url", "auth.type")] == [
        True,
        True,
        False,
        False,
    ]
