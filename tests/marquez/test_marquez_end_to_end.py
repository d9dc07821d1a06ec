"""End to end against a real Marquez: a local Spark job's lineage, sent over HTTP, shows up in Marquez's lineage
graph. Needs a running Marquez given by $MARQUEZ_URL (e.g. the docker/compose.yml stack); skipped otherwise.

The response shape of ``GET /api/v1/lineage`` is Marquez's ``marquez.service.models.Lineage`` (api/src/main/java/
marquez/service/models/Lineage.java, Node.java, Edge.java, NodeId.java): ``{"graph": [{"id", "type", "data",
"inEdges": [{"origin", "destination"}], "outEdges": [...]}]}``, node ids ``dataset:<namespace>:<name>`` and
``job:<namespace>:<name>``.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support import LineageReceiver, datasets, only_run

MARQUEZ_URL = os.environ.get("MARQUEZ_URL", "").rstrip("/")
REQUEST_TIMEOUT = 5.0
POLL_SECONDS = 20.0

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(
        not MARQUEZ_URL,
        reason="needs a running Marquez: `docker compose -f docker/compose.yml up -d`, then "
        "`MARQUEZ_URL=http://localhost:5000 ./scripts/test tests/marquez`",
    ),
]

Edge = tuple[str, str]


def marquez_get(path: str, **params: object) -> Any:
    """GET a Marquez API path as JSON; None when Marquez answers 404 (e.g. a node it does not know yet). Fails
    the test, naming the URL, when Marquez cannot be reached or answers another error."""
    url = f"{MARQUEZ_URL}{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
    try:
        with urllib.request.urlopen(url, timeout=REQUEST_TIMEOUT) as response:
            return json.load(response)
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return None
        pytest.fail(f"Marquez answered {error.code} to GET {url}: {error.read()[:1000]!r}")
    except OSError as error:
        pytest.fail(f"Marquez is not reachable at MARQUEZ_URL={MARQUEZ_URL} (GET {url}): {error}")


def lineage_edges(lineage: dict[str, Any]) -> set[Edge]:
    """Every (origin, destination) edge of a Marquez lineage graph, from the in- and out-edges of its nodes."""
    return {
        (edge["origin"], edge["destination"])
        for node in lineage["graph"]
        for edge in [*node["inEdges"], *node["outEdges"]]
    }


def wait_for_edges(node_id: str, expected: set[Edge]) -> set[Edge]:
    """Marquez's lineage edges around ``node_id`` (depth 2), polled until they include ``expected`` or
    POLL_SECONDS pass. Marquez stores an event before answering its POST, so the first answer should do."""
    deadline = time.monotonic() + POLL_SECONDS
    while True:
        lineage = marquez_get("/api/v1/lineage", nodeId=node_id, depth=2)
        edges = lineage_edges(lineage) if lineage is not None else set()
        if expected <= edges or time.monotonic() >= deadline:
            return edges
        time.sleep(1)


def test_spark_job_lineage_reaches_marquez(
    request: pytest.FixtureRequest, receiver: LineageReceiver, tmp_path: Path
) -> None:
    import spark_lineage

    # Fail fast, before starting Spark (the session fixture is requested only now), when there is no Marquez.
    assert marquez_get("/api/v1/namespaces") is not None, f"no Marquez API at MARQUEZ_URL={MARQUEZ_URL}"
    spark = request.getfixturevalue("spark")

    sales = tmp_path / "sales.csv"
    sales.write_text("city,amount\nparis,10\noslo,5\nparis,7\n")
    revenue = tmp_path / "e2e" / "revenue_by_city"
    namespace = f"spark_lineage_e2e_{uuid.uuid4().hex[:12]}"
    transport = {
        "type": "composite",
        "transports": {
            "marquez": {"type": "http", "url": MARQUEZ_URL, "timeoutInMillis": int(REQUEST_TIMEOUT * 1000)},
            "receiver": {"type": "http", "url": receiver.url},
        },
    }
    handle = spark_lineage.enable(spark, namespace=namespace, transport=transport)
    try:
        orders = spark.read.option("header", True).schema("city STRING, amount INT").csv(str(sales))
        orders.groupBy("city").sum("amount").write.parquet(str(revenue))
        assert handle.flush(60)
    finally:
        handle.disable(timeout=30)

    start, complete = only_run(receiver.events, "revenue_by_city")
    job = start["job"]
    assert (job["namespace"], job["name"]) == (
        namespace,
        "lineage_tests.adaptive_spark_plan.e2e_revenue_by_city",  # an aggregating write runs under AQE
    )
    assert complete["eventType"] == "COMPLETE"
    assert datasets(complete, "inputs") == [("file", str(sales))]
    assert datasets(complete, "outputs") == [("file", str(revenue))]

    input_node, output_node = f"dataset:file:{sales}", f"dataset:file:{revenue}"
    job_node = f"job:{namespace}:{job['name']}"
    expected = {(input_node, job_node), (job_node, output_node)}
    edges = wait_for_edges(output_node, expected)
    assert expected <= edges, (
        f"Marquez's lineage of {output_node} (depth 2) lacks {sorted(expected - edges)}; "
        f"it has {len(edges)} edges: {sorted(edges)}"
    )
