"""Spark Connect clients of a server with lineage on: three analysts at once, each under their own name and
parent, get the lineage a classic session gets for the same pipeline.

The tests' shared Spark session is the server (tests/conftest.py makes it one where PySpark ships Spark
Connect); the clients are real ``pyspark[connect]`` processes. Their writes are held to the same pipeline run
on the classic session: datasets and column lineage equal, once each analyst's names are mapped to the
classic run's.
"""

from __future__ import annotations

import json
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.connect_client import ICEBERG_CATALOG, pipeline, run_client, write_people
from tests.postgres_server import Postgres
from tests.support import LineageReceiver, app_events, client_python, only_run, query_events

pytestmark = pytest.mark.spark

CLASSIC = "classic"


@dataclass(frozen=True)
class Analyst:
    user: str
    app: str
    parent_job: str
    parent_run: str


ANALYSTS = (
    Analyst("ann", "Ann Revenue", "dag_a.task_1", "01890f3e-5c2b-7cc1-9f0e-3d0e2b6f1a01"),
    Analyst("bob", "Bob Churn", "dag_b.task_2", "01890f3e-5c2b-7cc1-9f0e-3d0e2b6f1a02"),
    Analyst("cyd", "Cyd Ops", "dag_c.task_3", "01890f3e-5c2b-7cc1-9f0e-3d0e2b6f1a03"),
)


@dataclass
class Clients:
    """What the clients and the classic run reported: every event the receiver kept, and each analyst's
    Connect session id."""

    events: list[dict[str, Any]]
    sessions: dict[str, str]
    server_run: str
    server_log: list[str]
    iceberg: bool
    closed_session_ends: str
    """How the run of a session its client stopped ends."""


def _has_iceberg(spark: Any) -> bool:
    return bool(spark.conf.get(f"spark.sql.catalog.{ICEBERG_CATALOG}", None))


@pytest.fixture(scope="module")
def clients(spark: Any, tmp_path_factory: pytest.TempPathFactory, postgres: Postgres | None) -> Clients:
    import spark_lineage

    python = client_python()
    data = tmp_path_factory.mktemp("connect_data")
    write_people(str(data))
    out = tmp_path_factory.mktemp("connect_out")
    iceberg = _has_iceberg(spark)
    jdbc = {"url": postgres.jdbc_url} if postgres is not None else None
    receiver = LineageReceiver()
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    keep = Keep(logging.WARNING)
    logging.getLogger("spark_lineage").addHandler(keep)
    handle = spark_lineage.enable(
        spark,
        transport={"type": "http", "url": receiver.url},
        python={"delivery": {"concurrency": 1}},
    )
    try:
        pipeline(spark, CLASSIC, str(data), str(out), iceberg, jdbc)
        port = spark.conf.get("spark.connect.grpc.binding.port")

        def run(analyst: Analyst) -> str:
            settings = {
                "spark.openlineage.parentJobName": analyst.parent_job,
                "spark.openlineage.parentRunId": analyst.parent_run,
            }
            if analyst.user == "cyd":  # not a client's to set: refused and said
                settings["spark.openlineage.transport.url"] = "http://127.0.0.1:9/elsewhere"
            args = {
                "url": f"sc://127.0.0.1:{port}/;user_id={analyst.user}",
                "confs": {"spark.openlineage.appName": analyst.app},
                "settings": settings,
                "tag": f"team_{analyst.user}",
                "user": analyst.user,
                "data": str(data),
                "out": str(out),
                "iceberg": iceberg,
                "jdbc": jdbc,
            }
            return run_client(args, python)

        with ThreadPoolExecutor(len(ANALYSTS)) as pool:
            sessions = dict(zip((a.user for a in ANALYSTS), pool.map(run, ANALYSTS)))
        assert handle.flush(120)
    finally:
        # Lineage off before the tests look: the other tests of the module enable lineage on this session too.
        handle.disable(timeout=60)
        logging.getLogger("spark_lineage").removeHandler(keep)
        receiver.close()
        for analyst in (*ANALYSTS, Analyst(CLASSIC, "", "", "")):
            for table in ("people", "paris"):
                spark.sql(f"DROP TABLE IF EXISTS {analyst.user}_{table}")
            if iceberg:
                spark.sql(f"DROP TABLE IF EXISTS {ICEBERG_CATALOG}.db.{analyst.user}_ice")
    assert not receiver.invalid, "events that fail the OpenLineage schemas:\n" + "\n".join(receiver.invalid)
    return Clients(
        list(receiver.events),
        sessions,
        str(handle.app_run_id),
        [record.getMessage() for record in records],
        iceberg,
        "ABORT" if spark.version.startswith("3.") else "COMPLETE",
    )


def _session_run(clients: Clients, analyst: Analyst) -> list[dict[str, Any]]:
    return [
        e
        for e in app_events(clients.events)
        if (e["run"]["facets"].get("spark_connect") or {}).get("sessionId") == clients.sessions[analyst.user]
    ]


def _queries_of(clients: Clients, run_id: str) -> dict[str, list[dict[str, Any]]]:
    """The query runs whose parent is ``run_id``, each as its events, by run id."""
    runs: dict[str, list[dict[str, Any]]] = {}
    for event in query_events(clients.events):
        if event["run"]["facets"]["parent"]["run"]["runId"] == run_id:
            runs.setdefault(event["run"]["runId"], []).append(event)
    return runs


def _lineage(run: list[dict[str, Any]], app: str, user: str) -> tuple[str, str]:
    """A run's job name without its application part, and its datasets with column lineage, as JSON in which
    ``user``'s names read as the classic run's."""
    final = run[-1]
    datasets = {
        kind: sorted(
            (d["namespace"], d["name"], json.dumps((d.get("facets") or {}).get("columnLineage"), sort_keys=True))
            for d in final[kind]
        )
        for kind in ("inputs", "outputs")
    }
    text = json.dumps(datasets, sort_keys=True).replace(f"/{user}/", f"/{CLASSIC}/").replace(f"{user}_", f"{CLASSIC}_")
    job = final["job"]["name"].removeprefix(app + ".").replace(f"{user}_", f"{CLASSIC}_")
    return job, text


def test_each_analysts_session_is_a_run_under_their_own_parent(clients: Clients) -> None:
    for analyst in ANALYSTS:
        run = _session_run(clients, analyst)
        # A client's stop() closes its session on Spark 4; a 3.5 server keeps it until it expires (an hour), so
        # lineage turned off ends its run as a stopping server does.
        assert [e["eventType"] for e in run] == ["START", clients.closed_session_ends], analyst
        start = run[0]
        app_job = analyst.app.lower().replace(" ", "_")
        assert {e["job"]["name"] for e in run} == {app_job}
        parent = start["run"]["facets"]["parent"]
        assert (parent["job"]["name"], parent["run"]["runId"]) == (analyst.parent_job, analyst.parent_run)
        connect = start["run"]["facets"]["spark_connect"]
        assert (connect["sessionId"], connect["userId"]) == (clients.sessions[analyst.user], analyst.user)
        assert connect["userAgent"].startswith("_SPARK_CONNECT_PYTHON spark/")


def test_each_write_of_a_client_has_the_classic_sessions_lineage_under_the_clients_names(clients: Clients) -> None:
    classic = {_lineage(run, "lineage_tests", CLASSIC) for run in _queries_of(clients, clients.server_run).values()}
    for analyst in ANALYSTS:
        session_run = _session_run(clients, analyst)[0]["run"]["runId"]
        runs = _queries_of(clients, session_run)
        app_job = analyst.app.lower().replace(" ", "_")
        client = set()
        for run in runs.values():
            for event in run:
                assert event["job"]["name"].startswith(app_job + ".")
                parent = event["run"]["facets"]["parent"]
                assert (parent["job"]["name"], parent["root"]["run"]["runId"]) == (app_job, analyst.parent_run)
                connect = event["run"]["facets"]["spark_connect"]
                assert (connect["sessionId"], connect["userId"]) == (clients.sessions[analyst.user], analyst.user)
                assert connect["tags"] == [f"team_{analyst.user}"] and connect["operationId"]
            client.add(_lineage(run, app_job, analyst.user))
        assert client == classic, analyst


def test_the_join_writes_column_lineage_exactly(clients: Clients) -> None:
    ann = ANALYSTS[0]
    session_run = _session_run(clients, ann)[0]["run"]["runId"]
    (join,) = [
        run for run in _queries_of(clients, session_run).values() if run[-1]["job"]["name"].endswith("ann_joined")
    ]
    complete = join[-1]
    assert complete["eventType"] == "COMPLETE"
    (output,) = complete["outputs"]
    assert output["namespace"] == "file" and output["name"].endswith("/ann/joined")
    fields = output["facets"]["columnLineage"]["fields"]
    assert sorted(fields) == ["city", "id", "resident"]
    resident = {(f["name"].rsplit("/", 1)[-1], f["field"]) for f in fields["resident"]["inputFields"]}
    assert resident == {("ann_paris", "name")}
    city = {(f["name"].rsplit("/", 1)[-1], f["field"]) for f in fields["city"]["inputFields"]}
    assert city == {("ann_people", "city")}


def test_a_key_a_client_may_not_set_is_refused_and_said_once(clients: Clients) -> None:
    said = [line for line in clients.server_log if "spark.openlineage.transport.url" in line]
    assert said == [
        f"spark_lineage: Spark Connect session {clients.sessions['cyd']} of user 'cyd': it set "
        "spark.openlineage.transport.url, which a client may not set: ignored (a client may set appName, "
        "job.tags, namespace, overriddenAppName, parentJobName, parentJobNamespace, parentRunId, "
        "rootParentJobName, rootParentJobNamespace, rootParentRunId, run.tags and job.owners.<type>)"
    ]
    assert "elsewhere" not in json.dumps(clients.events)


@pytest.mark.iceberg
def test_an_iceberg_table_a_client_creates_is_named_as_the_classic_sessions(clients: Clients) -> None:
    if not clients.iceberg:
        pytest.skip("Iceberg has no Spark runtime for this PySpark line")
    for analyst in ANALYSTS:
        session_run = _session_run(clients, analyst)[0]["run"]["runId"]
        app_job = analyst.app.lower().replace(" ", "_")
        (ice,) = [
            run
            for run in _queries_of(clients, session_run).values()
            if run[-1]["job"]["name"] == f"{app_job}.append_data.{ICEBERG_CATALOG}_db_{analyst.user}_ice"
        ]
        (output,) = ice[-1]["outputs"]
        assert output["name"].endswith(f"/hadoop_warehouse/db/{analyst.user}_ice")
        assert output["facets"]["symlinks"]["identifiers"][0]["name"] == f"db.{analyst.user}_ice"
        # Iceberg's own report of the commit, from the reporter added to the catalogs of the client's session.
        report = output["outputFacets"]["icebergCommitReport"]
        assert report["operation"] == "append" and report["commitMetrics"]["addedRecords"] == 3


def test_every_session_of_the_driver_is_reported_once(
    spark: Any, lineage: Any, receiver: LineageReceiver, tmp_path: Path
) -> None:
    import spark_lineage

    spark.newSession().range(3).write.parquet(str(tmp_path / "from_new_session"))
    thread = threading.Thread(target=lambda: spark.newSession().range(2).write.parquet(str(tmp_path / "on_a_thread")))
    thread.start()
    thread.join()
    enabled = spark.newSession()
    own = spark_lineage.enable(
        enabled, transport={"type": "http", "url": receiver.url}, python={"delivery": {"concurrency": 1}}
    )
    try:
        enabled.range(4).write.parquet(str(tmp_path / "own_listener"))
        assert own.flush(60) and lineage.flush(60)
    finally:
        own.disable(timeout=30)
    # Lineage turned off for a session stays off: the other sessions' listener does not take it over.
    enabled.range(5).write.parquet(str(tmp_path / "after_disable"))
    assert lineage.flush(60)
    assert not [e for e in receiver.events if "after_disable" in e["job"]["name"]]
    assert own.app_run_id != lineage.app_run_id
    for output, parent in (
        ("from_new_session", lineage.app_run_id),
        ("on_a_thread", lineage.app_run_id),
        ("own_listener", own.app_run_id),  # its own listener's, never the bus's too
    ):
        start, complete = only_run(receiver.events, f"_{output}")
        assert complete["eventType"] == "COMPLETE"
        assert [d["name"] for d in complete["outputs"]] == [str(tmp_path / output)]
        assert {e["run"]["facets"]["parent"]["run"]["runId"] for e in (start, complete)} == {parent}
        assert "spark_connect" not in complete["run"]["facets"]


def test_all_sessions_off_reports_the_enabled_session_alone(
    spark: Any, receiver: LineageReceiver, tmp_path: Path
) -> None:
    import spark_lineage

    handle = spark_lineage.enable(
        spark,
        transport={"type": "http", "url": receiver.url},
        python={"allSessions": False, "delivery": {"concurrency": 1}},
    )
    try:
        spark.newSession().range(3).write.parquet(str(tmp_path / "elsewhere"))
        spark.range(3).write.parquet(str(tmp_path / "here"))
        assert handle.flush(60)
    finally:
        handle.disable(timeout=30)
    assert sorted(e["job"]["name"] for e in query_events(receiver.events) if e["eventType"] == "COMPLETE") == [
        f"lineage_tests.execute_insert_into_hadoop_fs_relation_command.{tmp_path.name}_here"
    ]
