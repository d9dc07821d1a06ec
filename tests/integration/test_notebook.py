"""``%load_ext spark_lineage`` and ``%lineage`` in a real IPython kernel, driven the way Jupyter drives it.

The kernel runs in its own process with ``JPY_SESSION_NAME`` set as Jupyter server sets it, and gets its
transport from ``OPENLINEAGE_URL`` (the client's own configuration): only the extension turns lineage on.
"""

from __future__ import annotations

import html
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.jars import ships_spark_connect
from tests.support import LineageReceiver, app_events, datasets, local_connect_server_turn, query_events

pytestmark = pytest.mark.spark

WRITE = "execute_insert_into_hadoop_fs_relation_command"


class Kernel:
    """One IPython kernel and a client that runs cells and collects what they display."""

    def __init__(self, env: dict[str, str]) -> None:
        from jupyter_client.manager import KernelManager

        self.manager = KernelManager(kernel_name="python3")
        self.manager.start_kernel(env=env)
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=120)
        self.closed = False

    def run(self, code: str) -> dict[str, Any]:
        """Runs one cell; returns its ``execute_result`` data, printed text and error, failing on an error."""
        msg_id = self.client.execute(code)
        result: dict[str, Any] = {"data": {}, "stdout": "", "stderr": "", "error": None}
        while True:
            message = self.client.get_iopub_msg(timeout=300)
            if message["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = message["msg_type"], message["content"]
            if kind == "execute_result":
                result["data"] = content["data"]
            elif kind == "stream":
                result[content["name"]] += content["text"]
            elif kind == "error":
                result["error"] = "\n".join(content["traceback"])
            elif kind == "status" and content["execution_state"] == "idle":
                break
        assert result["error"] is None, f"cell failed:\n{code}\n{result['error']}"
        return result

    def close(self) -> None:
        """Ends the kernel (and whatever runs in its process); closing again does nothing."""
        if self.closed:
            return
        self.closed = True
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


@pytest.fixture()
def kernel(receiver: LineageReceiver, tmp_path: Path) -> Iterator[Kernel]:
    pytest.importorskip("ipykernel")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENLINEAGE")}
    env.update(
        OPENLINEAGE_URL=receiver.url,
        JPY_SESSION_NAME=str(tmp_path / "Sales Report.ipynb"),
        PYSPARK_PYTHON=sys.executable,
    )
    started = Kernel(env)
    yield started
    started.close()


def write_cell(name: str, tmp_path: Path) -> str:
    # A given schema and no header spare the read of the first line, which would be a run of its own.
    orders, output = str(tmp_path / "orders"), str(tmp_path / name)
    return f"spark.read.schema('id INT, city STRING').csv({orders!r}).write.parquet({output!r})"


@pytest.mark.once
def test_magics_switch_lineage_and_show_the_runs(kernel: Kernel, receiver: LineageReceiver, tmp_path: Path) -> None:
    orders = tmp_path / "orders"
    orders.mkdir()
    (orders / "part-0.csv").write_text("1,paris\n2,oslo\n")

    loaded = kernel.run("%load_ext spark_lineage")  # before any session: lineage goes on for the next one created
    destination = f"events go to http {receiver.url}/api/v1/lineage"
    assert loaded["stdout"] == f"spark_lineage: lineage on from the next SparkSession; {destination}\n"
    kernel.run(
        "from pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.master('local[1]').appName('pyspark-shell')"
        ".config('spark.ui.enabled', 'false').getOrCreate()"
    )
    kernel.run(write_cell("first", tmp_path))
    shown = kernel.run("%lineage")["data"]
    kernel.run("%lineage off")
    kernel.run(write_cell("while_off", tmp_path))
    kernel.run("%lineage on")
    kernel.run(write_cell("second", tmp_path))
    kernel.run("%unload_ext spark_lineage")
    kernel.run(write_cell("unloaded", tmp_path))
    reloaded = kernel.run("%load_ext spark_lineage")  # a session is active now: lineage goes on for it
    assert reloaded["stdout"] == f"spark_lineage: lineage on; {destination}\n"
    kernel.run(write_cell("third", tmp_path))
    final = kernel.run("%lineage --runs")["data"]
    flow = kernel.run("%lineage")["data"]  # the data flow: datasets, and each job an edge

    job = f"sales_report.{WRITE}.{tmp_path.name}_"
    finished = [e for e in query_events(receiver.events) if e["eventType"] == "COMPLETE"]
    assert [e["job"]["name"] for e in finished] == [job + "first", job + "second", job + "third"]
    for event, name in zip(finished, ("first", "second", "third")):
        assert datasets(event, "inputs") == [("file", str(orders))]
        assert datasets(event, "outputs") == [("file", str(tmp_path / name))]
    # three application runs: on, off, on again, off, on again (the last ends with the kernel)
    assert [e["eventType"] for e in app_events(receiver.events)] == ["START", "COMPLETE", "START", "COMPLETE", "START"]
    assert {e["job"]["name"] for e in app_events(receiver.events)} == {"sales_report"}

    assert shown["text/plain"] == f"{orders} -> [{job}first] -> {tmp_path / 'first'}"
    assert final["text/plain"].splitlines() == [
        f"{orders} -> [{job}{name}] -> {tmp_path / name}" for name in ("first", "second", "third")
    ]
    if "image/svg+xml" in final:  # Graphviz is installed: a drawing, one node per run
        svg = html.unescape(final["image/svg+xml"])  # Graphviz writes "-" as "&#45;"
        assert svg.startswith("<svg")
        assert svg.count('class="node job"') == 3
        assert svg.count('class="node dataset"') == 4  # the input, read three times, is one node
        for name in ("first", "second", "third"):
            assert f"name: {job}{name}" in svg
            assert f"name: {tmp_path / name}" in svg
        flow_svg = html.unescape(flow["image/svg+xml"])
        assert flow_svg.count('class="node job"') == 0
        assert flow_svg.count('class="node dataset"') == 4
        assert flow_svg.count('class="edge"') == 3
    else:  # no Graphviz: Mermaid source, which JupyterLab draws
        assert final["text/vnd.mermaid"].count(" --> ") == 6
        assert flow["text/vnd.mermaid"].count(" -->|") == 3
    assert flow["text/plain"] == final["text/plain"]  # three writes: three steps


@pytest.fixture()
def console_kernel(tmp_path: Path) -> Iterator[Kernel]:
    """A kernel with no transport configured anywhere: events go to the console transport."""
    pytest.importorskip("ipykernel")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENLINEAGE")}
    env.update(
        JPY_SESSION_NAME=str(tmp_path / "Sales Report.ipynb"),
        PYSPARK_PYTHON=sys.executable,
        SPARK_LINEAGE_SPOOL_DIR=str(tmp_path / "spool"),
    )
    started = Kernel(env)
    yield started
    started.close()


@pytest.mark.once
def test_each_cells_lineage_prints_under_that_cell_one_line_per_query(console_kernel: Kernel, tmp_path: Path) -> None:
    """The cell that writes shows its write's line, and only that: its end, what it read and wrote. Its START
    and RUNNING events print nothing, and nothing of it is left for the next cell."""
    orders = tmp_path / "orders"
    orders.mkdir()
    (orders / "part-0.csv").write_text("1,paris\n2,oslo\n")
    console_kernel.run("%load_ext spark_lineage")
    console_kernel.run(
        "from pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.master('local[1]').appName('pyspark-shell')"
        ".config('spark.ui.enabled', 'false').getOrCreate()"
    )
    job = f"default/sales_report.{WRITE}.{tmp_path.name}_"
    for name in ("first", "second"):
        printed = console_kernel.run(write_cell(name, tmp_path))["stdout"].splitlines()
        assert len(printed) == 1, printed
        assert re.fullmatch(
            rf"OpenLineage COMPLETE {re.escape(job + name)} run [0-9a-f-]{{36}}: "
            rf"{re.escape(str(orders))} -> {re.escape(str(tmp_path / name))}",
            printed[0],
        ), printed
    assert console_kernel.run("x = 1")["stdout"] == ""  # nothing left over for a cell without Spark


CONNECT_SESSION = (
    "from pyspark.sql import SparkSession\n"
    "spark = SparkSession.builder.remote('local[2]').getOrCreate()\n"
    "assert type(spark).__module__ == 'pyspark.sql.connect.session'"
)


@pytest.fixture()
def connect_kernel(kernel: Kernel) -> Iterator[Kernel]:
    """A kernel whose ``spark`` is a Spark Connect session of a server PySpark runs in the kernel's process."""
    if not ships_spark_connect(pytest.importorskip("pyspark").__version__):
        pytest.skip("PySpark 3.5 ships no Spark Connect server: remote('local') needs the spark-connect jar from Maven")
    with local_connect_server_turn():
        yield kernel
        kernel.close()  # the server ends with the kernel: the next turn may start its own


@pytest.mark.once
def test_magics_switch_lineage_on_a_connect_session(connect_kernel: Kernel, receiver: LineageReceiver) -> None:
    destination = f"events go to http {receiver.url}/api/v1/lineage"
    loaded = connect_kernel.run("%load_ext spark_lineage")
    assert loaded["stdout"] == f"spark_lineage: lineage on from the next SparkSession; {destination}\n"
    connect_kernel.run(CONNECT_SESSION)  # lineage goes on for the server PySpark starts in the kernel
    shown = connect_kernel.run("%lineage")["data"]
    connect_kernel.run("%lineage off")
    connect_kernel.run("%lineage on")  # the active session is the Connect client's: lineage goes on for its server
    connect_kernel.run("%unload_ext spark_lineage")
    reloaded = connect_kernel.run("%load_ext spark_lineage")
    assert reloaded["stdout"] == f"spark_lineage: lineage on; {destination}\n"

    assert shown["text/plain"] == "no lineage runs yet in this session"
    assert [e["eventType"] for e in app_events(receiver.events)] == ["START", "COMPLETE", "START", "COMPLETE", "START"]
    assert {e["job"]["name"] for e in app_events(receiver.events)} == {"sales_report"}


@pytest.mark.once
def test_lineage_shows_a_connect_clients_writes(
    connect_kernel: Kernel, receiver: LineageReceiver, tmp_path: Path
) -> None:
    orders = tmp_path / "orders"
    orders.mkdir()
    (orders / "part-0.csv").write_text("1,paris\n2,oslo\n")
    connect_kernel.run("%load_ext spark_lineage")
    connect_kernel.run(CONNECT_SESSION)
    connect_kernel.run(write_cell("first", tmp_path))
    shown = connect_kernel.run("%lineage")["data"]

    job = f"sales_report.{WRITE}.{tmp_path.name}_first"
    (end,) = [e for e in query_events(receiver.events) if e["eventType"] == "COMPLETE"]
    assert end["job"]["name"] == job
    assert datasets(end, "inputs") == [("file", str(orders))]
    assert datasets(end, "outputs") == [("file", str(tmp_path / "first"))]
    assert shown["text/plain"] == f"{orders} -> [{job}] -> {tmp_path / 'first'}"
