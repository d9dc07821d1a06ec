"""No planted secret is ever emitted: not in events, not in the spool, not in any log line at DEBUG.

A real job in its own process plants secrets everywhere a user puts them: Spark confs (under Spark's default
pattern and under its own ``spark.redaction.regex``), ``capturedProperties`` naming them, the transport's api
key and headers, a JDBC URL, SQL table options and an HTTP url with credentials; it logs everything at DEBUG,
py4j and openlineage-python included, from ``enable()`` on.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.jars import sqlite_jdbc
from tests.parity.scenarios import write_shop_database
from tests.support import LineageReceiver, only_run

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
