"""Lineage from a real Spark standalone cluster (a master and a worker started from PySpark's own jars), by
the README's configuration-only ``spark-submit`` in client mode: the driver, in this machine's Python
environment, reports; the executors' Python workers run the job's UDFs and must report nothing.

The same job is also submitted in local mode, and both runs must report the same jobs and datasets.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from spark_lineage.facets import PRODUCER
from tests.integration.test_spark_submit import assert_one_write_run, job_result, spark_submit
from tests.spark_cluster import EXECUTOR_MEMORY, SparkCluster, spark_cluster
from tests.support import LineageReceiver, app_events, datasets, query_events

# A cluster to start and two spark-submits: about two minutes on two idle cores, much more on busy ones.
pytestmark = [pytest.mark.spark, pytest.mark.once, pytest.mark.timeout(900)]

# A Python UDF, run by Python workers the executors start. Besides its work (the city in capitals) it reports
# the JVM that started its process (its nearest java ancestor's main class) and whether spark_lineage came
# into it: the .pth start-up hook, a wrapped SparkSession, or any module.
JOB = """
import json, os, sys
from pyspark.sql import SparkSession
from pyspark.sql.functions import udf

spark = SparkSession.builder.appName("Cluster Rollup").getOrCreate()

@udf("string")
def city_and_worker_state(city):
    import os, sys
    from pyspark.sql import SparkSession
    pid, jvm = os.getppid(), None
    while jvm is None and pid > 1:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = [arg.decode() for arg in f.read().split(b"\\0")]
        if os.path.basename(args[0]) == "java":
            jvm = next(arg for arg in args if arg.startswith("org.apache.spark."))
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
    hooks = ("SparkLineageStartupHook", "_SessionModuleWatcher")
    return json.dumps({
        "city": city.upper(),
        "jvm": jvm,
        "hooks": [type(finder).__name__ for finder in sys.meta_path if type(finder).__name__ in hooks],
        "patched": getattr(SparkSession.__init__, "_spark_lineage_patched", False),
        "modules": sorted(m for m in sys.modules if m.startswith(("spark_lineage", "openlineage"))),
    })

orders = spark.read.option("header", True).csv(sys.argv[1])
orders.select("id", city_and_worker_state("city").alias("state")).write.parquet(sys.argv[2])
loaded = sorted(m for m in sys.modules if m.startswith("spark_lineage"))
print("RESULT " + json.dumps({"driver_pid": os.getpid(), "modules": loaded}))
"""

WRITE = "execute_insert_into_hadoop_fs_relation_command"
EXECUTOR_JVM = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
LOCAL_JVM = "org.apache.spark.deploy.SparkSubmit"  # local mode: the executor is inside the driver's JVM


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    with spark_cluster(tmp_path_factory.mktemp("spark-cluster")) as running:
        yield running


@dataclass
class Submitted:
    events: list[dict[str, Any]]
    senders: list[frozenset[int]]
    """Per event, the pids that sent it."""
    driver_pid: int
    driver_modules: list[str]
    workers: list[dict[str, Any]]
    """What the UDF reported, row by row."""


def submit(tmp_path: Path, receiver: LineageReceiver, master: str) -> Submitted:
    """The README's spark-submit with only ``spark.openlineage.*`` confs for lineage, to ``master``; the events
    and senders of this submission, and what the job printed and wrote. The output is removed afterwards, so
    the next submission writes the same path."""
    import pyarrow.parquet

    confs = {
        "spark.openlineage.transport.type": "http",
        "spark.openlineage.transport.url": receiver.url,
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.executor.memory": EXECUTOR_MEMORY,
    }
    first = len(receiver.events)
    result, orders, output = spark_submit(tmp_path, JOB, confs, master=master)
    events = receiver.events[first:]
    assert_one_write_run(events, "cluster_rollup", orders, output, WRITE)
    states = pyarrow.parquet.read_table(output).column("state").to_pylist()
    shutil.rmtree(output)
    outcome = job_result(result)
    workers = [json.loads(state) for state in states]
    return Submitted(events, receiver.senders[first:], outcome["driver_pid"], outcome["modules"], workers)


def identities(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Each event's type, job, producer and datasets: what must not depend on where the executors are."""
    return sorted(
        (e["eventType"], e["job"]["namespace"], e["job"]["name"], e["producer"], datasets(e, "inputs"),
         datasets(e, "outputs"))
        for e in events
    )  # fmt: skip


def test_a_standalone_cluster_gets_lineage_from_the_driver_only_named_as_in_local_mode(
    tmp_path: Path, receiver: LineageReceiver, cluster: SparkCluster
) -> None:
    receiver.track_senders = True
    local = submit(tmp_path, receiver, "local[1]")
    clustered = submit(tmp_path, receiver, cluster.url)

    for run, jvm in ((local, LOCAL_JVM), (clustered, EXECUTOR_JVM)):
        # The UDF ran where the mode puts executors, and spark_lineage never came into its Python workers.
        assert sorted(worker.pop("city") for worker in run.workers) == ["OSLO", "PARIS", "PARIS"]
        assert run.workers == [{"jvm": jvm, "hooks": [], "patched": False, "modules": []}] * 3
        # Lineage was on in the driver, and every event came from the driver's Python process alone.
        assert "spark_lineage.session" in run.driver_modules
        assert len(run.senders) == len(run.events)
        assert set(run.senders) == {frozenset({run.driver_pid})}
        assert {event["producer"] for event in run.events} == {PRODUCER}
        assert {event["job"]["namespace"] for event in run.events} == {"default"}
        (start, _) = app_events(run.events)
        parents = {event["run"]["facets"]["parent"]["run"]["runId"] for event in query_events(run.events)}
        assert parents == {start["run"]["runId"]}

    (start, _) = app_events(clustered.events)
    assert start["run"]["facets"]["spark_properties"]["properties"]["spark.master"] == cluster.url
    assert identities(clustered.events) == identities(local.events)
