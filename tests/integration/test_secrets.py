"""No planted secret is ever emitted: not in events, not in the spool, not in any log line at DEBUG.

A real job in its own process plants secrets everywhere a user puts them: Spark confs (under Spark's default
pattern and under its own ``spark.redaction.regex``), ``capturedProperties`` naming them, the transport's api
key and headers, a JDBC URL, SQL table options and an HTTP url with credentials; it logs everything at DEBUG,
py4j and openlineage-python included, from ``enable()`` on.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.jars import sqlite_jdbc
from tests.parity.scenarios import write_shop_database
from tests.support import LineageReceiver, app_events, only_run

pytestmark = pytest.mark.spark

PLANTED = {
    "conf": "PLANTED-s3a-secret-1",
    "own_pattern": "PLANTED-pepper-2",
    "api_key": "PLANTED-api-key-3",
    "header": "PLANTED-header-4",
    "jdbc": "PLANTED-jdbc-password-5",
    "table_option": "PLANTED-table-option-6",
    "url_password": "PLANTED-url-password-7",
}

JOB = """
import json, logging, sys
from pyspark.sql import SparkSession
import spark_lineage

url, out, log_file, shop, packages = sys.argv[1:6]
planted = json.loads(sys.argv[6])
captured = [
    "spark.master", "spark.hadoop.fs.s3a.secret.key", "spark.mycorp.pepper",
    "spark.openlineage.transport.auth.apiKey", "spark.openlineage.transport.headers.X-Team",
]
spark = (
    SparkSession.builder.master("local[1]").appName("Secrets Job")
    .config("spark.ui.enabled", "false")
    .config("spark.jars.packages", packages)
    .config("spark.redaction.regex", "(?i)pepper")
    .config("spark.hadoop.fs.s3a.secret.key", planted["conf"])
    .config("spark.mycorp.pepper", planted["own_pattern"])
    .config("spark.openlineage.capturedProperties", ",".join(captured))
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")
logging.basicConfig(level=logging.DEBUG, filename=log_file, format="%(name)s %(levelname)s %(message)s")
# The transport's secrets arrive as runtime confs, as a notebook would set them.
host = url.split("://", 1)[1]
spark.conf.set("spark.openlineage.transport.type", "http")
spark.conf.set("spark.openlineage.transport.url", f"http://etl:{planted['url_password']}@{host}")
spark.conf.set("spark.openlineage.transport.auth.type", "api_key")
spark.conf.set("spark.openlineage.transport.auth.apiKey", planted["api_key"])
spark.conf.set("spark.openlineage.transport.headers.X-Team", planted["header"])
handle = spark_lineage.enable(spark)
jdbc_url = f"jdbc:sqlite:{shop}?password={planted['jdbc']}"
orders = (
    spark.read.format("jdbc").option("url", jdbc_url).option("driver", "org.sqlite.JDBC")
    .option("dbtable", "orders").load()
)
orders.write.parquet(out + "/orders")
# A CTAS: Spark 4.1 keeps its SQL text in the plan, where a plain CREATE TABLE's text is dropped by analysis.
spark.sql(
    f"CREATE TABLE opts USING parquet OPTIONS ('password'='{planted['table_option']}') "
    f"LOCATION '{out}/opts' AS SELECT id FROM range(2)"
)
spark.sql("INSERT INTO opts SELECT id FROM range(3)")
handle.disable()
print("spool:", handle.config.spool_dir)
"""


def test_no_planted_secret_reaches_events_spool_or_debug_logs(tmp_path: Path, receiver: LineageReceiver) -> None:
    import pyspark

    shop = tmp_path / "shop.db"
    write_shop_database(shop)
    log_file = tmp_path / "debug.log"
    spool = tmp_path / "spool"
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(JOB))
    command = [
        sys.executable,
        str(script),
        receiver.url,
        str(tmp_path / "out"),
        str(log_file),
        str(shop),
        sqlite_jdbc(),
        json.dumps(PLANTED),
    ]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LINEAGE_SPOOL_DIR": str(spool)}
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert pyspark.__version__  # the job ran on this PySpark line

    events = json.dumps(receiver.events)
    logs = log_file.read_text()
    with sqlite3.connect(spool / "spool.sqlite") as db:
        spooled = json.dumps(
            db.execute("SELECT * FROM events").fetchall() + db.execute("SELECT * FROM destinations").fetchall()
        )
    for where, text in (("events", events), ("DEBUG logs", logs), ("spool", spooled), ("stderr", result.stderr)):
        leaked = [name for name, secret in PLANTED.items() if secret in text]
        assert leaked == [], f"{leaked} leaked into {where}"
    # The logs did record what the job did (the check above looked at something), with the secrets redacted.
    assert "Command to send" in logs and "*********(redacted)" in logs

    # What stays is exactly what is not secret.
    _, complete = only_run(receiver.events, "orders")
    assert complete["run"]["facets"]["spark_properties"]["properties"] == {
        "spark.master": "local[1]",
        "spark.hadoop.fs.s3a.secret.key": "*********(redacted)",
        "spark.mycorp.pepper": "*********(redacted)",
        "spark.openlineage.transport.auth.apiKey": "*********(redacted)",
        "spark.openlineage.transport.headers.X-Team": "*********(redacted)",
    }
    assert [(d["namespace"], d["name"]) for d in complete["inputs"]] == [(f"sqlite:{shop}", "orders")]
    create = [
        e
        for e in receiver.events
        if "sql" in e["job"]["facets"] and "CREATE TABLE" in e["job"]["facets"]["sql"]["query"]
    ]
    assert create, "the CREATE TABLE statement's events carry its SQL"
    for event in create:
        assert "OPTIONS ('password'='*********(redacted)')" in event["job"]["facets"]["sql"]["query"]
    assert not receiver.invalid


URL_CODE = "PLANTED-url-code-8"
"""An Azure-Functions-style key: ``code`` matches no secret-key pattern; only its place marks it secret."""
URL_HEADER = "PLANTED-url-header-9"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """A ``spark-lineage`` command as users run it, in its own process, without the machine's OPENLINEAGE_*."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("OPENLINEAGE", "SPARK_CONF_DIR"))}
    command = [sys.executable, "-m", "spark_lineage.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=180, check=False)


@pytest.mark.once
def test_url_parameters_and_headers_stay_out_of_debug_logs_the_spool_replay_and_doctor(
    spark: Any, data_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, receiver: LineageReceiver
) -> None:
    import spark_lineage

    spool = tmp_path / "spool"
    prefix = "spark.openlineage.transport."
    confs = {
        f"{prefix}type": "http",
        f"{prefix}url": receiver.url,
        f"{prefix}urlParams.code": URL_CODE,
        f"{prefix}headers.X-Team": URL_HEADER,
    }
    try:
        with caplog.at_level(logging.DEBUG):
            for key, value in confs.items():  # as a notebook sets them: py4j logs each call at DEBUG
                spark.conf.set(key, value)
            # A receiver that is down is not waited for at disable(): the deadline only bounds the analysis.
            handle = spark_lineage.enable(
                spark, appName="url secrets job", python={"spool": {"dir": str(spool)}, "shutdownTimeoutSeconds": 60}
            )
            spark.range(3).write.parquet(str(data_dir / "delivered"))
            assert handle.flush(60)
            receiver.stop()  # down for the rest: what follows stays spooled, and warnings say so
            spark.range(3).write.parquet(str(data_dir / "spooled"))
            shown = repr(handle) + repr(handle.config)
            handle.disable()
    finally:
        for key in confs:
            spark.conf.unset(key)
    destination = f"{receiver.url}/api/v1/lineage?code=*********(redacted)"
    logs = caplog.text
    assert URL_CODE not in logs and URL_HEADER not in logs
    assert shown.startswith("<spark_lineage handle") and URL_CODE not in shown and URL_HEADER not in shown
    # The logs said what happened, with the secrets redacted: the line that says lineage is on, the warnings.
    assert f"events go to {destination} (spooled in {spool})" in logs
    assert f"not delivered to http {destination}" in logs
    assert "Command to send" in logs and 'code=*********(redacted) HTTP/1.1" 200' in logs  # py4j, urllib3
    # The live path sent the url parameter and the header.
    delivered = len(receiver.events)
    assert delivered >= 3 and receiver.paths == [f"/api/v1/lineage?code={URL_CODE}"] * delivered
    assert {headers["X-Team"] for headers in receiver.headers} == {URL_HEADER}

    def spooled_bytes() -> bytes:
        return b"".join(file.read_bytes() for file in sorted(spool.iterdir()) if file.is_file())

    assert (spool / "spool.sqlite").is_file() and URL_CODE.encode() not in spooled_bytes()
    assert URL_HEADER.encode() not in spooled_bytes()
    with sqlite3.connect(spool / "spool.sqlite") as db:
        waiting = db.execute("SELECT COUNT(*) FROM events").fetchone()[0]
        kept = db.execute("SELECT destination, transport FROM destinations").fetchall()
    assert waiting >= 3
    assert kept == [
        (
            f"http {destination}",
            json.dumps(
                {
                    "endpoint": "api/v1/lineage",
                    "headers": ["X-Team"],
                    "timeout": 5.0,
                    "type": "http",
                    "url": receiver.url,
                    "urlParams": ["code"],
                },
                sort_keys=True,
            ),
        )
    ]

    # Replay without the secrets says, in one line, exactly what to pass; it sends nothing.
    receiver.start()
    refused = _cli("replay", "--spool", str(spool), "--timeout", "10")
    assert (refused.returncode, refused.stderr) == (
        1,
        f"spark-lineage replay: http {destination} takes url parameters and headers, which the spool does not "
        f"keep: pass --conf {prefix}urlParams.code=<value> --conf {prefix}headers.X-Team=<value>\n",
    )
    assert len(receiver.events) == delivered
    # With them, every event arrives, sent with the url parameter and the header.
    given = [f"--conf={prefix}urlParams.code={URL_CODE}", f"--conf={prefix}headers.X-Team={URL_HEADER}"]
    replayed = _cli("replay", "--spool", str(spool), "--timeout", "60", *given)
    assert (replayed.returncode, replayed.stderr) == (0, ""), replayed.stdout
    assert replayed.stdout == f"spark-lineage replay: {waiting} of {waiting} events delivered from {spool}\n"
    assert len(receiver.events) == delivered + waiting
    assert receiver.paths == [f"/api/v1/lineage?code={URL_CODE}"] * len(receiver.events)
    assert {headers["X-Team"] for headers in receiver.headers} == {URL_HEADER}
    assert [e["eventType"] for e in app_events(receiver.events)] == ["START", "COMPLETE"]
    assert URL_CODE.encode() not in spooled_bytes() and URL_HEADER.encode() not in spooled_bytes()

    # doctor probes the same backend with the same secrets, and prints neither.
    diagnosed = _cli("doctor", *(f"--conf={key}={value}" for key, value in confs.items()), "--send-test-event")
    assert diagnosed.returncode == 0, diagnosed.stdout + diagnosed.stderr
    assert diagnosed.stdout.splitlines()[-1] == (
        f"[ok]  backend: {destination} accepted a probe event (HTTP 200 OK): job spark_lineage_doctor_test_event "
        "in namespace default"
    )
    assert receiver.paths[-1] == f"/api/v1/lineage?code={URL_CODE}"
    for output in (refused, replayed, diagnosed):
        text = output.stdout + output.stderr
        assert URL_CODE not in text and URL_HEADER not in text and "Traceback" not in text
