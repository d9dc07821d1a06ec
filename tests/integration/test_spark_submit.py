"""Lineage from ``spark-submit --conf spark.openlineage.*`` alone, for jobs that never import spark_lineage.

Each case is a real ``spark-submit`` of an unmodified job in its own process, with this package installed in the
driver's environment (its ``.pth`` start-up hook is what brings lineage in). Events go over HTTP to a receiver in
this test process, which validates each against the OpenLineage schemas.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.jars import openlineage_spark
from tests.support import LineageReceiver, app_events, datasets, only_run, validate_event

pytestmark = pytest.mark.spark

JAVA_AGENT = "io.openlineage.spark.agent.OpenLineageSparkListener"

# Neither job imports spark_lineage, and neither calls spark.stop(): the last action's events must still arrive.
BUILDER_JOB = """
import json, sys
from pyspark.sql import SparkSession
from pyspark.sql.functions import udf

spark = SparkSession.builder.appName("Orders Rollup").getOrCreate()
orders = spark.read.option("header", True).csv(sys.argv[1])
orders.groupBy("city").count().write.parquet(sys.argv[2])

@udf("string")
def hook_state_in_worker(_):
    import sys
    from pyspark.sql import SparkSession
    watching = any(type(f).__name__ == "SparkLineageStartupHook" for f in sys.meta_path)
    patched = getattr(SparkSession.__init__, "_spark_lineage_patched", False)
    return json.dumps({"watching": watching, "patched": patched})

worker = json.loads(spark.range(1).select(hook_state_in_worker("id")).first()[0])
loaded = sorted(m for m in sys.modules if m.startswith(("spark_lineage", "openlineage")))
print("RESULT " + json.dumps({"worker": worker, "modules": loaded}))
"""

CONTEXT_JOB = """
import sys
from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

sc = SparkContext(conf=SparkConf().setAppName("Context Job"))
spark = SparkSession(sc)
spark.read.option("header", True).csv(sys.argv[1]).write.parquet(sys.argv[2])
"""


def spark_submit(
    tmp_path: Path,
    job: str,
    confs: dict[str, str],
    env: dict[str, str] | None = None,
    packages: str | None = None,
    master: str = "local[1]",
) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    """``spark-submit`` ``job`` (in client mode) to ``master`` over a small CSV directory; returns the process,
    the input and the output. Submitting again in the same ``tmp_path`` reads the same input."""
    import pyspark

    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(job))
    orders = tmp_path / "orders"
    orders.mkdir(exist_ok=True)
    (orders / "part-0.csv").write_text("id,city\n1,paris\n2,oslo\n3,paris\n")
    output = tmp_path / "rollup"
    command = [str(Path(pyspark.__file__).parent / "bin" / "spark-submit"), "--master", master]
    for key, value in {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "1", **confs}.items():
        command += ["--conf", f"{key}={value}"]
    if packages:
        command += ["--packages", packages]
    command += [str(script), str(orders), str(output)]
    clean_env = {k: v for k, v in os.environ.items() if not k.startswith("OPENLINEAGE")}
    clean_env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, **(env or {}))
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=clean_env, check=False)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]  # the driver's Python logs to stdout
    return result, orders, output


def messages(result: subprocess.CompletedProcess[str]) -> list[str]:
    """What spark_lineage logged. spark-submit merges the Python driver's stderr into its stdout."""
    return [line for line in (result.stdout + result.stderr).splitlines() if line.startswith("spark_lineage:")]


def job_result(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    parsed: dict[str, Any] = json.loads(line.removeprefix("RESULT "))
    return parsed


def assert_one_write_run(
    events: list[dict[str, Any]], app_job: str, orders: Path, output: Path, root_node: str
) -> None:
    """One application run around one write run; ``root_node`` is the executed plan's root as openlineage-spark
    names it (an aggregating write runs under ``AdaptiveSparkPlan``)."""
    start, end = app_events(events)
    assert (start["eventType"], end["eventType"]) == ("START", "COMPLETE")
    assert start["job"]["name"] == app_job
    assert events[-1] is end, "the application run completes last"
    _, query_end = only_run(events, f"{app_job}.{root_node}.")
    assert query_end["eventType"] == "COMPLETE"
    assert query_end["job"]["name"] == f"{app_job}.{root_node}.{output.parent.name}_rollup"
    assert datasets(query_end, "inputs") == [("file", str(orders))]
    assert datasets(query_end, "outputs") == [("file", str(output))]
    assert query_end["run"]["facets"]["parent"]["run"]["runId"] == start["run"]["runId"]


def test_http_transport_confs_turn_lineage_on_for_an_unmodified_job(tmp_path: Path, receiver: LineageReceiver) -> None:
    api_key = "planted-api-key-4242"
    confs = {
        "spark.openlineage.transport.type": "http",
        "spark.openlineage.transport.url": receiver.url,
        "spark.openlineage.transport.auth.type": "api_key",
        "spark.openlineage.transport.auth.apiKey": api_key,
    }
    spool = tmp_path / "spool"
    result, orders, output = spark_submit(tmp_path, BUILDER_JOB, confs, env={"SPARK_LINEAGE_SPOOL_DIR": str(spool)})

    # One line says that lineage is on and where it goes, though the job configured no Python logging,
    assert messages(result) == [
        f"spark_lineage: lineage on for application orders_rollup (namespace default); events go to "
        f"{receiver.url}/api/v1/lineage (spooled in {spool})",
        # and one, at the end, what became of every event
        f"spark_lineage: {len(receiver.events)} lineage events: {len(receiver.events)} delivered, 0 spooled for "
        "replay, 0 lost",
    ]
    assert api_key not in result.stdout + result.stderr

    assert_one_write_run(receiver.events, "orders_rollup", orders, output, "adaptive_spark_plan")
    outcome = job_result(result)
    assert outcome["worker"] == {"watching": False, "patched": False}, "the hook must stay out of Python workers"
    assert "spark_lineage.session" in outcome["modules"]


@pytest.mark.once
def test_enabled_flag_takes_the_transport_from_the_client_configuration(
    tmp_path: Path, receiver: LineageReceiver
) -> None:
    _, orders, output = spark_submit(
        tmp_path, CONTEXT_JOB, {"spark.openlineage.enabled": "true"}, env={"OPENLINEAGE_URL": receiver.url}
    )

    write = "execute_insert_into_hadoop_fs_relation_command"
    assert_one_write_run(receiver.events, "context_job", orders, output, write)


@pytest.mark.once
def test_without_lineage_configuration_nothing_is_sent_or_loaded(tmp_path: Path, receiver: LineageReceiver) -> None:
    # The client's own configuration alone does not turn lineage on: only spark.openlineage.* confs do.
    result, _, output = spark_submit(tmp_path, BUILDER_JOB, {}, env={"OPENLINEAGE_URL": receiver.url})

    assert output.is_dir()
    assert receiver.events == []
    modules = job_result(result)["modules"]
    assert not [m for m in modules if m.startswith("openlineage") or m == "spark_lineage.session"], modules
    assert messages(result) == []


@pytest.mark.once
def test_openlineage_spark_java_listener_configured_too_keeps_us_off(tmp_path: Path) -> None:
    import pyspark

    events_file = tmp_path / "events.jsonl"
    confs = {
        "spark.extraListeners": JAVA_AGENT,
        "spark.openlineage.transport.type": "file",
        "spark.openlineage.transport.location": str(events_file),
    }
    result, _, _ = spark_submit(tmp_path, BUILDER_JOB, confs, packages=openlineage_spark(pyspark.__version__))

    events = [json.loads(line) for line in events_file.read_text().splitlines() if line.strip()]
    producers = {event["producer"] for event in events}
    assert events, "openlineage-spark wrote no events: the guard test would prove nothing"
    assert all("OpenLineage/OpenLineage" in producer for producer in producers), producers
    ours = messages(result)
    assert ours == [
        f"spark_lineage: off: spark.extraListeners loads openlineage-spark ({JAVA_AGENT}), which "
        "already reports this application; spark_lineage stays off so no event is sent twice"
    ], ours
    assert "spark_lineage.session" not in job_result(result)["modules"]


@pytest.mark.once
def test_refused_transport_settings_lose_nothing_that_replay_cannot_deliver(tmp_path: Path) -> None:
    """A typo in the transport's type: the job still runs with lineage captured and spooled, one warning says
    delivery is off, why, and the replay that delivers it; the replay with the settings fixed delivers the job's
    runs as they would have been sent."""
    spool = tmp_path / "spool"
    confs = {"spark.openlineage.transport.type": "htp", "spark.openlineage.transport.url": "http://lineage:5000"}
    result, orders, output = spark_submit(tmp_path, BUILDER_JOB, confs, env={"SPARK_LINEAGE_SPOOL_DIR": str(spool)})

    refused = "spark.openlineage.transport.type='htp' is not a known transport; accepted values: "
    warned = [line for line in messages(result) if "delivery is off" in line]
    assert len(warned) == 1, messages(result)
    assert warned[0].startswith(f"spark_lineage: delivery is off: {refused}")
    assert warned[0].endswith(
        f"(or a dotted Python class path of a custom transport). Lineage is still captured, and spooled in {spool}: "
        "nothing is lost. Once the settings are fixed, deliver it with: spark-lineage replay --spool "
        f"{spool} --conf spark.openlineage.transport.type=htp --conf spark.openlineage.transport.url="
        "http://lineage:5000"
    )
    end = messages(result)[-1]
    assert re.fullmatch(
        r"spark_lineage: (\d+) lineage events: 0 delivered, \1 spooled for replay, 0 lost; the \1 spooled \(jobs "
        r"[^)]*\) were not delivered to spark\.openlineage\.transport\.\* \(refused\) and wait in "
        + re.escape(f"{spool}: deliver them with: spark-lineage replay --spool {spool} --conf ")
        + ".*",
        end,
    ), end

    events_file = tmp_path / "events.jsonl"
    replayed = subprocess.run(
        [
            *(sys.executable, "-m", "spark_lineage.cli", "replay", "--spool", str(spool)),
            *("--conf", "spark.openlineage.transport.type=file"),
            *("--conf", f"spark.openlineage.transport.location={events_file}"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    events = [json.loads(line) for line in events_file.read_text().splitlines()]
    for event in events:
        validate_event(event)  # as spooled by the held delivery, against the OpenLineage schemas
    assert_one_write_run(events, "orders_rollup", orders, output, "adaptive_spark_plan")
