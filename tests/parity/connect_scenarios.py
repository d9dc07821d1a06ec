"""The Spark Connect jobs the parity harness runs under both openlineage-spark and spark_lineage: the driver is
a Spark Connect server (``spark.plugins``) with the reference's jar as its listener, or with spark_lineage
enabled on its classic session, and each scenario is one client, in a process of its own, that runs the
client pipeline of tests/connect_client.py (files, a V1 table, CTAS, INSERT, a join, an Iceberg table where
the line has Iceberg, a PostgreSQL table where a server runs) against it.

One client names itself and its parent, as an Airflow task would; the other sets nothing. openlineage-spark
names every query of either after the server's application; spark_lineage names the first's after its
``spark.openlineage.appName`` (:data:`APPLICATIONS`), and the second's as the reference does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.connect_client import ICEBERG_CATALOG, run_client, write_people
from tests.jars import CONNECT_PLUGIN
from tests.parity.scenarios import Workspace
from tests.support import free_port

Scenario = Callable[[Any, Workspace], None]


@dataclass(frozen=True)
class Client:
    user: str
    confs: dict[str, str] = field(default_factory=dict)
    """Set on the remote builder."""
    settings: dict[str, str] = field(default_factory=dict)
    """Set with ``spark.conf.set`` once connected."""


NAMED_APP = "Ann Revenue"
CLIENTS = {
    "connect_named_client": Client(
        "ann",
        {"spark.openlineage.appName": NAMED_APP},
        {
            "spark.openlineage.parentJobNamespace": "airflow",
            "spark.openlineage.parentJobName": "dag_a.task_1",
            "spark.openlineage.parentRunId": "01890f3e-5c2b-7cc1-9f0e-3d0e2b6f1a01",
        },
    ),
    "connect_plain_client": Client("bob"),
}
APPLICATIONS = {"ann_revenue": "parity"}
"""The application part of spark_lineage's job names for a client (its ``appName``, ``NAMED_APP``, as a job
name), as the reference's (the server's application, ``parity``): the only way the two may name a job
differently (``jobName`` in ``allowed_differences.toml``)."""


def connect_confs(workspace: Workspace) -> dict[str, str]:
    """The driver as a Spark Connect server on a free port, with the Iceberg catalog the client pipeline writes
    to where this line has Iceberg."""
    confs = {"spark.plugins": CONNECT_PLUGIN, "spark.connect.grpc.binding.port": str(free_port())}
    if workspace.iceberg:
        confs |= {
            "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
            f"spark.sql.catalog.{ICEBERG_CATALOG}": "org.apache.iceberg.spark.SparkCatalog",
            f"spark.sql.catalog.{ICEBERG_CATALOG}.type": "hadoop",
            f"spark.sql.catalog.{ICEBERG_CATALOG}.warehouse": str(workspace.base / "ice"),
        }
    return confs


def _client_scenario(client: Client) -> Scenario:
    def run(spark: Any, workspace: Workspace) -> None:
        data = workspace.base / "connect_data"
        data.mkdir(exist_ok=True)
        write_people(str(data))
        port = spark.conf.get("spark.connect.grpc.binding.port")
        run_client(
            {
                "url": f"sc://127.0.0.1:{port}/;user_id={client.user}",
                "confs": client.confs,
                "settings": client.settings,
                "tag": f"team_{client.user}",
                "user": client.user,
                "data": str(data),
                "out": workspace.out("connect"),
                "iceberg": workspace.iceberg,
                "jdbc": {"url": workspace.postgres_url} if workspace.postgres_url else None,
            }
        )

    return run


CONNECT_SCENARIOS: dict[str, Scenario] = {name: _client_scenario(client) for name, client in CLIENTS.items()}
