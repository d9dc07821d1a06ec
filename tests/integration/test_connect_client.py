"""A Spark Connect client whose server runs no lineage reports its own, from ``pyspark-client`` alone, and it
names what the server side names.

The server is the tests' shared Spark session, a real Connect server from PySpark's own jars (tests/conftest.py),
with lineage off while the client runs. The pipeline is the server-side tests' (files, a V1 table, CTAS, INSERT,
a join, an Iceberg CTAS, a PostgreSQL table) and more (an ``insertInto``, a ``spark.sql`` DataFrame written, an
Iceberg append and ``saveAsTable``, a PostgreSQL read written, a Kafka topic written and read back). The same
pipeline run on that session with lineage on is the oracle: the server-side lineage of the same scenario (as
``spark-lineage connect-server`` reports it). The client is a process of its own in the ``pyspark-client``
environment (no JVM, no py4j), calling ``spark_lineage.enable()``.

Accepted differences, each asserted as it is:

- a ``saveAsTable`` (and a CTAS) is one action for the client, one run; the server reports the command and,
  beside it, the insert Spark runs inside it (and on 4.1+ a ``SaveAsV1TableCommand`` run without datasets):
  the client's run holds the command's datasets, named as the server names them;
- column lineage: what the client claims equals the server side's; a column it does not claim (a window
  function, an expression it cannot type) is named in ``extractionError`` with the reason.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.connect_client import ICEBERG_CATALOG, more_writes, pipeline, run_client, write_people
from tests.postgres_server import Postgres
from tests.support import (
    LineageReceiver,
    app_events,
    client_python,
    query_events,
    thin_client_python,
    validate_event,
)

pytestmark = [pytest.mark.spark, pytest.mark.iceberg]

CLASSIC = "classic"
USER = "dee"
FAILING_SQL = f"INSERT INTO {USER}_missing SELECT 1"
MISSING_TABLE = f"The table or view `{USER}_missing` cannot be found"


@dataclass
class Runs:
    classic: list[dict[str, Any]]
    """The server side's events of the pipeline (the oracle)."""
    client: list[dict[str, Any]]
    """What the client reported."""
    session_id: str
    warehouse: str
    iceberg: bool
    out: str
    """The directory the pipeline writes its files to."""


@pytest.fixture(scope="module")
def runs(spark: Any, tmp_path_factory: pytest.TempPathFactory, postgres: Postgres | None, kafka: Any) -> Runs:
    import spark_lineage

    python = _client_python(spark)
    data = tmp_path_factory.mktemp("client_data")
    write_people(str(data))
    out = tmp_path_factory.mktemp("client_out")
    iceberg = bool(spark.conf.get(f"spark.sql.catalog.{ICEBERG_CATALOG}", None))
    jdbc = {"url": postgres.jdbc_url} if postgres is not None else None
    servers = str(kafka.bootstrap) if kafka is not None else None
    oracle, receiver = LineageReceiver(), LineageReceiver()
    try:
        handle = spark_lineage.enable(
            spark, transport={"type": "http", "url": oracle.url}, python={"delivery": {"concurrency": 1}}
        )
        try:
            pipeline(spark, CLASSIC, str(data), str(out), iceberg, jdbc)
            more_writes(spark, CLASSIC, str(out), iceberg, jdbc, servers)
            assert handle.flush(120)
        finally:
            handle.disable(timeout=60)
        port = spark.conf.get("spark.connect.grpc.binding.port")
        session_id = run_client(
            {
                "url": f"sc://127.0.0.1:{port}/;user_id={USER}",
                "user": USER,
                "data": str(data),
                "out": str(out),
                "iceberg": iceberg,
                "jdbc": jdbc,
                "kafka": servers,
                "lineage": {
                    "transport": {"type": "http", "url": receiver.url},
                    "python": {"connect": {"resolveSchemas": True}},
                },
                "more_writes": True,
                "failing_sql": FAILING_SQL,
            },
            python,
        )
    finally:
        oracle.close()
        receiver.close()
        for user in (CLASSIC, USER):
            for table in ("people", "paris"):
                spark.sql(f"DROP TABLE IF EXISTS {user}_{table}")
            if iceberg:
                for table in ("ice", "saved"):
                    spark.sql(f"DROP TABLE IF EXISTS {ICEBERG_CATALOG}.db.{user}_{table}")
    assert not oracle.invalid and not receiver.invalid, [*oracle.invalid, *receiver.invalid]
    return Runs(
        list(oracle.events),
        list(receiver.events),
        session_id,
        str(spark.conf.get("spark.sql.warehouse.dir")),
        iceberg,
        str(out),
    )


def _client_python(spark: Any) -> str:
    """The client a user installs: the thin ``pyspark-client`` (4.x) for a 4.x server; for a 3.5 server, which a
    4.x client cannot talk to, PySpark 3.5's own client (``pyspark[connect]``, as 3.5 has no thin package)."""
    return thin_client_python() if int(spark.version.split(".")[0]) >= 4 else client_python()


def _runs(events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    by_run: dict[str, list[dict[str, Any]]] = {}
    for event in query_events(events):
        by_run.setdefault(event["run"]["runId"], []).append(event)
    return by_run


def _as_classic(text: str) -> str:
    return text.replace(f"/{USER}/", f"/{CLASSIC}/").replace(f"{USER}_", f"{CLASSIC}_")


def _datasets(event: dict[str, Any], kind: str) -> set[tuple[str, str, str, str | None]]:
    """``(namespace, name, symlinks, lifecycle state change)`` of an event's inputs or outputs, the client's user
    read as the classic run's."""
    return {
        (
            d["namespace"],
            _as_classic(d["name"]),
            _as_classic(json.dumps(((d.get("facets") or {}).get("symlinks") or {}).get("identifiers"))),
            ((d.get("facets") or {}).get("lifecycleStateChange") or {}).get("lifecycleStateChange"),
        )
        for d in event[kind]
    }


def _lineage(events: list[dict[str, Any]]) -> dict[str, tuple[set[Any], set[Any]]]:
    """Each write's job (the client's user read as the classic run's) and its datasets: the runs that completed
    with outputs (the server side also reports the reads Spark runs to infer a CSV file's schema, which are no
    action of the client's)."""
    found: dict[str, tuple[set[Any], set[Any]]] = {}
    for run in _runs(events).values():
        final = run[-1]
        if final["eventType"] != "COMPLETE" or not final["outputs"]:
            continue
        found[_as_classic(final["job"]["name"])] = (_datasets(final, "inputs"), _datasets(final, "outputs"))
    return found


def test_every_write_is_reported_with_the_server_sides_job_name_and_datasets(runs: Runs) -> None:
    classic, client = _lineage(runs.classic), _lineage(runs.client)
    assert client, "the client reported no write"
    for job, datasets in client.items():
        assert job in classic, f"{job}: no such job on the server side ({sorted(classic)})"
        assert datasets == classic[job], job
    # Every dataset the server side writes is some client run's output (the insert inside a CTAS names the
    # table's location without its symlink: compared by name).
    written = {d[:2] for _, outputs in classic.values() for d in outputs}
    assert written == {d[:2] for _, outputs in client.values() for d in outputs}


def test_each_run_is_start_then_complete_under_the_clients_session_run(runs: Runs) -> None:
    session = app_events(runs.client)
    assert [e["eventType"] for e in session] == ["START", "COMPLETE"]
    session_run = session[0]["run"]["runId"]
    assert session[0]["job"]["name"] == "lineage_tests.connect_session"
    connect = session[0]["run"]["facets"]["spark_connect"]
    assert (connect["sessionId"], connect["userId"], connect["derivedOnClient"]) == (runs.session_id, USER, True)
    assert connect["userAgent"].startswith("_SPARK_CONNECT_PYTHON spark/")
    operations = []
    for run in _runs(runs.client).values():
        assert [e["eventType"] for e in run] in (["START", "COMPLETE"], ["START", "FAIL"])
        assert len({e["run"]["runId"] for e in run}) == 1
        for event in run:
            assert event["run"]["facets"]["parent"]["run"]["runId"] == session_run
            facet = event["run"]["facets"]["spark_connect"]
            assert (facet["sessionId"], facet["userId"], facet["derivedOnClient"]) == (runs.session_id, USER, True)
        # The operation id the request was sent with, known from the START on (a UUID, as PySpark makes them).
        (operation,) = {event["run"]["facets"]["spark_connect"].get("operationId") for event in run}
        assert uuid.UUID(operation).version == 4, run[0]["job"]["name"]
        operations.append(operation)
    assert len(set(operations)) == len(operations), "one operation per run"
    for event in runs.client:
        validate_event(event)


def test_a_failed_command_ends_its_run_fail_with_the_servers_message(runs: Runs) -> None:
    failed = [run for run in _runs(runs.client).values() if run[-1]["eventType"] == "FAIL"]
    assert len(failed) == 1
    start, fail = failed[0]
    assert start["job"]["facets"]["sql"]["query"] == fail["job"]["facets"]["sql"]["query"] == FAILING_SQL
    assert MISSING_TABLE in fail["run"]["facets"]["errorMessage"]["message"]
    assert "JVM stacktrace" not in fail["run"]["facets"]["errorMessage"]["message"]


def _column_lineage(events: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The ``columnLineage`` facets of each job's completed runs' outputs (the user read as the classic run's), by
    job and output name, in the order the runs started (two writes may share a job's name: a SQL ``INSERT``, an
    ``insertInto``, and on the server side the insert inside a CTAS); ``{}`` for an output without one."""
    found: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for run in _runs(events).values():
        final = run[-1]
        if final["eventType"] != "COMPLETE":
            continue
        for output in final["outputs"]:
            facet = (output.get("facets") or {}).get("columnLineage") or {}
            key = (_as_classic(final["job"]["name"]), _as_classic(output["name"]))
            shown = json.dumps({k: facet.get(k) for k in ("fields", "dataset")})
            found.setdefault(key, []).append(json.loads(_as_classic(shown)))
    return found


def _matched(
    classic: dict[tuple[str, str], list[dict[str, Any]]],
    client: dict[tuple[str, str], list[dict[str, Any]]],
    errors: dict[str, str],
) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """Each client write's facet with the server side's run of the same job and output whose lineage holds what
    the client claims (its fields with the same sources, and the same dependencies of the whole output unless
    the client said they miss something): ``(job, client facet, server facet)``; there must be one."""

    def whole_misses(job: str) -> bool:
        return "the lineage of the output as a whole misses" in errors[job]

    matched = []
    for (job, output), facets in client.items():
        for facet in facets:
            fields = facet["fields"] or {}
            candidates = [
                server
                for server in classic[(job, output)]
                if all((server["fields"] or {}).get(name) == sources for name, sources in fields.items())
                and (not fields or whole_misses(job) or server["dataset"] == facet["dataset"])
            ]
            assert candidates, (job, output, facet, classic[(job, output)])
            matched.append((job, facet, candidates[0]))
    return matched


def _extraction_errors(events: list[dict[str, Any]]) -> dict[str, str]:
    """Each completed write's extractionError messages, joined, by job (the user read as the classic run's)."""
    found = {}
    for run in _runs(events).values():
        final = run[-1]
        if final["eventType"] == "COMPLETE" and final["outputs"]:
            facet = final["run"]["facets"].get("extractionError") or {"errors": []}
            found[_as_classic(final["job"]["name"])] = "\n".join(e["errorMessage"] for e in facet["errors"])
    return found


def test_the_column_lineage_the_client_claims_is_the_server_sides(runs: Runs) -> None:
    errors = _extraction_errors(runs.client)
    claimed = set()
    for job, facet, _ in _matched(_column_lineage(runs.classic), _column_lineage(runs.client), errors):
        claimed |= {(job.rsplit(".", 1)[-1], name) for name in facet["fields"] or {}}
    # What the client follows: files read by name (the server asked for what is written), tables, SQL,
    # aggregates, conditions, joins by alias and by DataFrame, hashes, casts, SQL expressions, a union.
    assert {
        ("classic_people", "city"),
        ("default_classic_paris", "name"),
        ("warehouse0_classic_paris", "name"),
        ("classic_oslo", "id"),
        ("classic_joined", "resident"),
        ("classic_from_postgres", "name"),
        ("db_classic_saved", "city"),
        ("classic_grouped", "n"),
        ("classic_grouped", "last"),
        ("classic_derived", "k"),
        ("classic_derived", "up"),
        ("classic_self_joined", "c2"),
        ("classic_self_joined", "nn"),
        ("classic_by_frame", "pn"),
        ("classic_hashed", "h"),
        ("classic_hashed", "i"),
        ("classic_expressed", "u"),
        ("classic_unioned", "name"),
        ("classic_ranked", "id"),
    } <= claimed, sorted(claimed)


def test_every_column_it_does_not_claim_is_named_in_extraction_error(runs: Runs) -> None:
    errors = _extraction_errors(runs.client)
    for job, facet, server in _matched(_column_lineage(runs.classic), _column_lineage(runs.client), errors):
        for column in set(server["fields"] or {}) - set(facet["fields"] or {}):
            named = re.search(rf"columns without lineage \([^)]*\b{re.escape(column)}\b[^)]*\): ", errors[job])
            assert named or "column lineage: no column lineage: " in errors[job], (job, column, errors[job])
    ranked = [job for job in errors if job.endswith(".classic_ranked")]
    assert (
        "column lineage: columns without lineage (rank): a window function is not followed on the client"
        in (errors[ranked[0]])
    )


def _schemas(events: list[dict[str, Any]]) -> dict[tuple[str, str], Any]:
    """Each completed write's outputs' schema fields, by job and output name (the user read as the classic
    run's)."""
    found = {}
    for run in _runs(events).values():
        final = run[-1]
        if final["eventType"] != "COMPLETE":
            continue
        for output in final["outputs"]:
            schema = (output.get("facets") or {}).get("schema")
            if schema is not None:
                found[(_as_classic(final["job"]["name"]), _as_classic(output["name"]))] = schema["fields"]
    return found


def test_with_resolve_schemas_what_a_write_writes_has_the_server_sides_schema(runs: Runs) -> None:
    """``python.connect.resolveSchemas``: the server is asked for the schema of each DataFrame write (a SQL
    command has none to ask for)."""
    classic, client = _schemas(runs.classic), _schemas(runs.client)
    assert len(client) >= 4, sorted(client)
    for key, fields in client.items():
        assert fields == classic[key], key


def test_a_kafka_topic_written_and_read_back_is_named_as_the_server_side_names_it(runs: Runs, kafka: Any) -> None:
    if kafka is None:
        pytest.skip("no Kafka broker here (scripts/test fetches and starts one)")
    client = _lineage(runs.client)
    # A topic's save appends whatever its mode: no lifecycle change, as the server side says.
    topic = ("kafka://" + str(kafka.bootstrap), f"{CLASSIC}_people_topic", "null", None)
    writes = [job for job, (_, outputs) in client.items() if topic in outputs]
    reads = [job for job, (inputs, _) in client.items() if topic in inputs]
    assert (len(writes), len(reads)) == (1, 1), sorted(client)
    assert client[reads[0]][1] == {("file", f"{runs.out}/{CLASSIC}/from_kafka", "null", "OVERWRITE")}


KILLED = "kay"
"""The user of the client that is killed outright."""


def test_a_client_killed_outright_after_its_writes_loses_none_of_their_lineage(
    spark: Any, runs: Runs, tmp_path: Path
) -> None:
    """The client's process is killed (SIGKILL) right after the pipeline's writes, their events kept for the spool
    delay (``python.connect.spoolDelayMillis``) and nothing sent yet (``sendDelayMillis``): ``spark-lineage
    replay`` of its spool finds them in the dead process's journal and delivers each write's START and COMPLETE,
    with the outputs and job names the client that lived reported for the same writes."""
    data = tmp_path / "data"
    data.mkdir()
    write_people(str(data))
    spool = tmp_path / "spool"
    receiver = LineageReceiver()
    try:
        port = spark.conf.get("spark.connect.grpc.binding.port")
        run_client(
            {
                "url": f"sc://127.0.0.1:{port}/;user_id={KILLED}",
                "user": KILLED,
                "data": str(data),
                "out": runs.out,
                "iceberg": False,
                "jdbc": None,
                "lineage": {
                    "transport": {"type": "http", "url": receiver.url},
                    "python": {
                        "spool": {"dir": str(spool)},
                        "connect": {"spoolDelayMillis": 600_000, "sendDelayMillis": 600_000},
                    },
                },
                "kill": True,
            },
            _client_python(spark),
        )
        assert receiver.events == []
        assert len(list(spool.glob("kept-*.journal"))) == 1
        replayed = subprocess.run(
            [sys.executable, "-m", "spark_lineage.cli", "replay", "--spool", str(spool), "--timeout", "60"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert replayed.returncode == 0, replayed.stderr[-3000:]
    finally:
        receiver.close()
        for table in ("people", "paris"):
            spark.sql(f"DROP TABLE IF EXISTS {KILLED}_{table}")
    assert not receiver.invalid, receiver.invalid
    for event in receiver.events:
        validate_event(event)
    assert list(spool.glob("kept-*.journal")) == []
    assert [e["eventType"] for e in app_events(receiver.events)] == ["START"]  # its end died with the process
    text = json.dumps(receiver.events)
    as_user = json.loads(text.replace(f"/{KILLED}/", f"/{USER}/").replace(f"{KILLED}_", f"{USER}_"))
    assert [[e["eventType"] for e in run] for run in _runs(as_user).values()] == [["START", "COMPLETE"]] * 5
    killed = {job: outputs for job, (_, outputs) in _lineage(as_user).items()}
    lived = {job: outputs for job, (_, outputs) in _lineage(runs.client).items()}
    assert len(killed) == 5
    assert killed == {job: lived[job] for job in killed}
