"""A real Spark standalone cluster for the tests: one master and one worker from the installed PySpark's own
jars (``pyspark/bin/spark-class``), on 127.0.0.1 with free ports, their logs and the worker's work directory
in a directory of the test's; stopped afterwards, also when the test fails.

The worker offers one core and a little memory, so an application takes one small executor. Both daemons
are this process's children and are killed if this process dies (``setpriv --pdeathsig``), so none outlives
a test run. Their web UIs listen on loopback (``SPARK_LOCAL_IP``), on free ports: the master's answers
``/json/``, which says when the worker has registered.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support import child_process, free_port, wait_until

HOST = "127.0.0.1"
START_TIMEOUT_SECONDS = 120.0
WORKER_MEMORY = "1g"
EXECUTOR_MEMORY = "512m"
"""What applications should ask for (``spark.executor.memory``): less than the worker offers."""


@dataclass(frozen=True)
class SparkCluster:
    """A running standalone cluster: the master's URL for ``--master``, and where each daemon logs."""

    port: int
    web_port: int
    master_log: Path
    worker_log: Path

    @property
    def url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    def state(self) -> dict[str, Any]:
        """The master's view of the cluster (workers, applications), from its web UI's JSON."""
        with urllib.request.urlopen(f"http://{HOST}:{self.web_port}/json/", timeout=5) as response:
            state: dict[str, Any] = json.load(response)
        return state


@contextmanager
def spark_cluster(workdir: Path) -> Iterator[SparkCluster]:
    """Start a master and one worker (1 core, :data:`WORKER_MEMORY`) with their files under ``workdir``, yield
    the cluster once the worker has registered with the master, and stop both."""
    import pyspark

    home = Path(pyspark.__file__).parent
    workdir.mkdir(parents=True, exist_ok=True)
    cluster = SparkCluster(free_port(), free_port(), workdir / "master.log", workdir / "worker.log")
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": HOST,
        "SPARK_DAEMON_MEMORY": "256m",
        "SPARK_CONF_DIR": str(workdir),  # no spark-env.sh or spark-defaults.conf of the machine's
        "SPARK_LOG_DIR": str(workdir),
    }
    spark_class = str(home / "bin" / "spark-class")
    master = [
        spark_class, "org.apache.spark.deploy.master.Master",
        "--host", HOST, "--port", str(cluster.port), "--webui-port", str(cluster.web_port),
    ]  # fmt: skip
    worker = [
        spark_class, "org.apache.spark.deploy.worker.Worker",
        "--host", HOST, "--port", str(free_port()), "--webui-port", str(free_port()),
        "--cores", "1", "--memory", WORKER_MEMORY, "--work-dir", str(workdir / "work"), cluster.url,
    ]  # fmt: skip
    with ExitStack() as daemons:
        master_process = daemons.enter_context(child_process(master, cluster.master_log, env))
        wait_until(
            lambda: _answers(cluster),
            master_process,
            cluster.master_log,
            "the master's web UI answers",
            START_TIMEOUT_SECONDS,
        )
        worker_process = daemons.enter_context(child_process(worker, cluster.worker_log, env))
        wait_until(
            lambda: _alive_workers(cluster) > 0,
            worker_process,
            cluster.worker_log,
            "the worker registers",
            START_TIMEOUT_SECONDS,
        )
        yield cluster


def _answers(cluster: SparkCluster) -> bool:
    try:
        cluster.state()
    except OSError:
        return False
    return True


def _alive_workers(cluster: SparkCluster) -> int:
    try:
        workers = cluster.state().get("workers") or []
    except OSError:
        return 0
    return sum(1 for worker in workers if worker.get("state") == "ALIVE")


if __name__ == "__main__":  # python -m tests.spark_cluster: start one, time it, stop it
    import tempfile

    began = time.monotonic()
    with spark_cluster(Path(tempfile.mkdtemp(prefix="spark-cluster-"))) as running:
        print(f"Spark standalone at {running.url} in {time.monotonic() - began:.1f} s: {running.state()['workers']}")
    print(f"stopped after {time.monotonic() - began:.1f} s")
