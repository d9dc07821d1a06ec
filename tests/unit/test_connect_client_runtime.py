"""The pieces of a Spark Connect client's own lineage that need no server: the job each recorded request is
reported as, the datasets of tables from what the server says of them, the tap around the client's calls, and
what a failed action's run says. tests/integration/test_connect_client.py holds them to a real server's
lineage."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from openlineage.client.event_v2 import RunState

from spark_lineage.connect.client.jobs import (
    ADAPTIVE_PLAN,
    CREATE_TABLE_AS_SELECT,
    INSERT_FILES,
    SAVE_INTO_DATA_SOURCE,
    ActionCommand,
    action_command,
)
from spark_lineage.connect.client.requests import ActionKind, ClientAction, WriteTarget
from spark_lineage.connect.client.runtime import identity_confs, server_message
from spark_lineage.connect.client.tables import TableDatasets, TableDetails
from spark_lineage.connect.client.tap import EXECUTE_METHOD, ClientTap
from spark_lineage.facets import PRODUCER
from spark_lineage.lineage import DatasetLineage
from spark_lineage.naming import DatasetIdentifier, TableName
from spark_lineage.plan import SessionInfo
from tests.support import validate_event
from tests.unit.test_connect_client_requests import DATA, VERSIONS, _action

DESCRIBED = [
    ("id", "bigint", None),
    ("bucket", "bigint", None),
    ("", "", ""),
    ("# Detailed Table Information", "", ""),
    ("Catalog", "spark_catalog", ""),
    ("Database", "default", ""),
    ("Table", "t_out", ""),
    ("Type", "MANAGED", ""),
    ("Provider", "parquet", ""),
    ("Location", "file:/wh/t_out", ""),
]
SESSION = SessionInfo(
    app_name="Spark Connect server",
    app_id="local-1",
    spark_version="4.1.1",
    master="local[2]",
    warehouse="file:/wh",
    conf={
        "spark.sql.catalog.ice": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.ice.type": "hadoop",
        "spark.sql.catalog.ice.warehouse": "/lake",
    },
)
TABLE_OUT = DatasetLineage(DatasetIdentifier("file", "/wh/t_out"), symlinks=[TableName("file:/wh", "default.t_out")])


class Server:
    """What a server would say of tables: ``DESCRIBE TABLE EXTENDED``'s rows by name, and how often it was asked."""

    def __init__(self, tables: dict[str, list[Any]] | None = None, failing: bool = False) -> None:
        self.tables = tables or {}
        self.asked: list[str] = []
        self.failing = failing

    def describe(self, name: str) -> TableDetails | None:
        self.asked.append(name)
        if self.failing:
            raise ConnectionError("UNAVAILABLE: the server went away\nmore")
        rows = self.tables.get(name)
        return TableDetails.from_rows(rows) if rows is not None else None


# --- job names ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    ("name", "outputs", "tables", "expected"),
    [
        ("write_path", [], [], (INSERT_FILES, "data_out")),
        ("join_write_json", [], [], (ADAPTIVE_PLAN, "data_joined")),
        ("save_as_table", [TABLE_OUT], ["t_out"], (CREATE_TABLE_AS_SELECT, "default_t_out")),
        ("insert_into", [TABLE_OUT], ["t_out"], (INSERT_FILES, "wh_t_out")),
        ("sql_insert", [TABLE_OUT], ["t_out"], (INSERT_FILES, "wh_t_out")),
        ("sql_ctas", [], ["t_copy"], (CREATE_TABLE_AS_SELECT, "t_copy")),
        ("write_to_v2", [], ["t_v2"], ("atomic_create_table_as_select", "t_v2")),
        ("jdbc_write", [], [], (SAVE_INTO_DATA_SOURCE, "public.buckets")),
        ("collect", [], [], ("query_command", "")),
    ],
)
def test_each_recorded_action_is_named_as_the_server_side_names_its_command(
    version: str, name: str, outputs: list[DatasetLineage], tables: list[str], expected: tuple[str, str]
) -> None:
    action = _action(version, name)
    if name == "write_path":  # its output, as datasets.action_datasets names it
        outputs = [DatasetLineage(DatasetIdentifier("file", "/tmp/spark-lineage-fixtures/connect/data/out"))]
    if name == "join_write_json":
        outputs = [DatasetLineage(DatasetIdentifier("file", "/tmp/spark-lineage-fixtures/connect/data/joined"))]
    assert _named(action_command(action, outputs, tables)) == expected


def _named(found: ActionCommand) -> tuple[str, str]:
    return found.command, found.suffix


def test_without_adaptive_planning_a_shuffling_write_is_named_after_its_command() -> None:
    action = ClientAction(ActionKind.WRITE, write=WriteTarget(format="parquet", path="/d/out"), exchanges=True)
    outputs = [DatasetLineage(DatasetIdentifier("file", "/d/out"))]
    assert _named(action_command(action, outputs, [])) == (ADAPTIVE_PLAN, "d_out")
    assert _named(action_command(action, outputs, [], adaptive=False)) == (INSERT_FILES, "d_out")


def _write(kind: ActionKind = ActionKind.WRITE, **target: Any) -> ClientAction:
    return ClientAction(kind, write=WriteTarget(**target))


@pytest.mark.parametrize(
    ("action", "command", "expected"),
    [
        # InsertIntoHadoopFsRelationCommand: OVERWRITE in mode Overwrite, nothing for an append.
        (_write(format="parquet", path="/d/o", mode="overwrite"), INSERT_FILES, "OVERWRITE"),
        (
            ClientAction(
                ActionKind.WRITE, write=WriteTarget(format="parquet", path="/d/o", mode="overwrite"), exchanges=True
            ),
            ADAPTIVE_PLAN,
            "OVERWRITE",
        ),
        (_write(format="parquet", path="/d/o", mode="append"), INSERT_FILES, None),
        (_write(format="parquet", path="/d/o"), INSERT_FILES, None),
        (_write(table="t", method="insertInto", mode="overwrite"), INSERT_FILES, "OVERWRITE"),
        (ClientAction(ActionKind.SQL, sql=("INSERT OVERWRITE TABLE t SELECT 1",)), INSERT_FILES, "OVERWRITE"),
        (ClientAction(ActionKind.SQL, sql=("insert into t select 1",)), INSERT_FILES, None),
        # SaveIntoDataSourceCommand: the mode, for a source whose mode says what happens to its target.
        (_write(format="jdbc", mode="overwrite"), SAVE_INTO_DATA_SOURCE, "OVERWRITE"),
        (_write(format="jdbc"), SAVE_INTO_DATA_SOURCE, "CREATE"),
        (_write(format="delta", path="/d/e", mode="ignore"), SAVE_INTO_DATA_SOURCE, "CREATE"),
        (_write(format="jdbc", mode="append"), SAVE_INTO_DATA_SOURCE, None),
        (_write(format="kafka", mode="overwrite"), SAVE_INTO_DATA_SOURCE, None),
        (_write(table="t", method="saveAsTable", mode="overwrite"), CREATE_TABLE_AS_SELECT, "CREATE"),
        # V2 writes: their node's handler.
        (_write(ActionKind.WRITE_V2, table="c.d.t", mode="create"), "atomic_create_table_as_select", "CREATE"),
        (_write(ActionKind.WRITE_V2, table="c.d.t", mode="replace"), "atomic_replace_table_as_select", "OVERWRITE"),
        (_write(ActionKind.WRITE_V2, table="c.d.t", mode="overwrite"), "overwrite_by_expression", "OVERWRITE"),
        (_write(ActionKind.WRITE_V2, table="c.d.t", mode="append"), "append_data", None),
        (ClientAction(ActionKind.QUERY), "query_command", None),
    ],
)
def test_what_a_write_does_to_its_output_is_what_the_driver_sides_handler_of_its_command_says(
    action: ClientAction, command: str, expected: str | None
) -> None:
    found = action_command(action, [], [])
    assert (found.command, found.lifecycle.value if found.lifecycle is not None else None) == (command, expected)


def test_a_save_through_a_data_source_provider_is_suffixed_as_the_driver_sides_handler_suffixes_it() -> None:
    servers = {"kafka.bootstrap.servers": "b:9092"}
    kafka = ClientAction(ActionKind.WRITE, write=WriteTarget(format="Kafka", options={**servers, "topic": "t"}))
    assert _named(action_command(kafka, [], [])) == (SAVE_INTO_DATA_SOURCE, ""), (
        "no suffix, as openlineage-spark names it"
    )
    delta = ClientAction(ActionKind.WRITE, write=WriteTarget(format="delta", path="/d/events"))
    assert _named(action_command(delta, [], [])) == (SAVE_INTO_DATA_SOURCE, "d_events")
    jdbc = ClientAction(ActionKind.WRITE, write=WriteTarget(format="jdbc", options={"dbtable": " public.t "}))
    assert _named(action_command(jdbc, [], [])) == (SAVE_INTO_DATA_SOURCE, "public.t")


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("CREATE TABLE ice.db.t USING iceberg AS SELECT * FROM s", ("atomic_create_table_as_select", "db.t")),
        ("CREATE OR REPLACE TABLE ice.db.t AS SELECT * FROM s", ("atomic_replace_table_as_select", "db.t")),
        ("INSERT INTO t SELECT a FROM s JOIN u ON s.id = u.id", (ADAPTIVE_PLAN, "wh_t_out")),
    ],
)
def test_sql_is_named_by_its_statement_and_its_table_s_catalog(sql: str, expected: tuple[str, str]) -> None:
    from spark_lineage.connect.client.statements import exchanges

    action = ClientAction(ActionKind.SQL, sql=(sql,), exchanges=exchanges(sql))
    table = sql.split()[2] if sql.startswith("CREATE TABLE") else "ice.db.t"
    assert _named(action_command(action, [TABLE_OUT], [table])) == expected


# --- tables ---------------------------------------------------------------------------------------------------


def _names(dataset: DatasetLineage | None) -> tuple[str, str, list[tuple[str, str]]] | None:
    if dataset is None:
        return None
    return (
        dataset.identifier.namespace,
        dataset.identifier.name,
        [(link.namespace, link.name) for link in dataset.symlinks],
    )


def test_a_session_table_is_its_location_with_its_symlink_asked_once() -> None:
    server = Server({"t_out": DESCRIBED})
    tables = TableDatasets(SESSION, server.describe, lambda: "default")
    errors: list[str] = []
    first, again = tables.dataset("t_out", errors), tables.dataset("t_out", errors)
    assert _names(first) == _names(again) == ("file", "/wh/t_out", [("file:/wh", "default.t_out")])
    assert server.asked == ["t_out"] and errors == []
    tables.forget("t_out")
    tables.dataset("t_out", errors)
    assert server.asked == ["t_out", "t_out"]


def test_a_table_about_to_be_created_is_placed_in_the_warehouse_of_the_current_database() -> None:
    tables = TableDatasets(SESSION, Server().describe, lambda: "sales")
    errors: list[str] = []
    assert _names(tables.dataset("t_new", errors, created=True)) == (
        "file",
        "/wh/sales.db/t_new",
        [("file:/wh", "sales.t_new")],
    )
    assert tables.dataset("t_new", errors) is None
    assert errors == ["table t_new: the server does not know it"]


def test_an_iceberg_table_is_named_by_its_catalog_even_when_describe_shows_no_catalog_row() -> None:
    rows = [("# Detailed Table Information", "", ""), ("Name", "ice.db.t", ""), ("Location", "/lake/db/t", "")]
    tables = TableDatasets(SESSION, Server({"ice.db.t": rows}).describe, lambda: "default")
    errors: list[str] = []
    dataset = tables.dataset("ice.db.t", errors)
    assert _names(dataset) == ("file", "/lake/db/t", [("file:/lake", "db.t")])
    assert dataset is not None and dataset.extra_facets["catalog"].framework == "iceberg"
    assert _names(tables.dataset("ice.db.fresh", errors, created=True)) == (
        "file",
        "/lake/db/fresh",
        [("file:/lake", "db.fresh")],
    )
    assert errors == []


def test_a_server_that_cannot_answer_leaves_the_table_unnamed_and_says_why() -> None:
    tables = TableDatasets(SESSION, Server(failing=True).describe, lambda: "default")
    errors: list[str] = []
    assert tables.dataset("t_out", errors) is None
    assert errors == ["table t_out: its location could not be asked of the server: UNAVAILABLE: the server went away"]


# --- the tap --------------------------------------------------------------------------------------------------


@dataclass
class Request:
    """An ``ExecutePlanRequest``'s operation id as protobuf gives it: empty until set."""

    operation_id: str = ""


class Client:
    """A client's execute method as PySpark's is shaped: a generator of responses that may raise."""

    def __init__(self, responses: list[Any], error: BaseException | None = None) -> None:
        self.responses, self.error = responses, error
        self.requests: list[Any] = []

    def _execute_and_fetch_as_iterator(self, request: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        self.requests.append(request)
        yield from self.responses
        if self.error is not None:
            raise self.error


class Observer:
    def __init__(self, failing: bool = False) -> None:
        self.told: list[tuple[Any, ...]] = []
        self.failing = failing

    def sent(self, request: Any, time_ms: int) -> object:
        if self.failing:
            raise RuntimeError("observer broke")
        self.told.append(("sent", request))
        return len(self.told)

    def ended(self, token: object, time_ms: int, error: BaseException | None) -> None:
        self.told.append(("ended", token, None if error is None else str(error)))


def _tapped(client: Client, observer: Observer) -> tuple[ClientTap, list[tuple[str, BaseException]]]:
    failures: list[tuple[str, BaseException]] = []
    tap = ClientTap(client, observer, lambda kind, error: failures.append((kind, error)))
    assert tap.install()
    return tap, failures


def test_the_tap_passes_the_stream_through_and_tells_its_start_and_end() -> None:
    client, observer, request = Client([1, 2, 3]), Observer(), Request("5b6f2d0e-8a7c-4c53-9e0f-3f1b2a4c5d6e")
    tap, _ = _tapped(client, observer)
    assert list(client._execute_and_fetch_as_iterator(request, {}, progress=None)) == [1, 2, 3]
    assert observer.told == [("sent", request), ("ended", 1, None)]
    assert request.operation_id == "5b6f2d0e-8a7c-4c53-9e0f-3f1b2a4c5d6e", "an operation id given is kept"
    assert not tap.install(), "a second tap on the same client"
    tap.uninstall()
    assert EXECUTE_METHOD not in client.__dict__
    assert list(client._execute_and_fetch_as_iterator(Request())) == [1, 2, 3]
    assert len(observer.told) == 2


def test_a_request_without_an_operation_id_gets_one_before_it_is_observed_and_sent() -> None:
    client, observer, request = Client([1]), Observer(), Request()
    seen: list[str] = []
    observer.sent = lambda sent, time_ms: seen.append(sent.operation_id)  # type: ignore[method-assign]
    _tapped(client, observer)
    assert list(client._execute_and_fetch_as_iterator(request)) == [1]
    assert uuid.UUID(request.operation_id).version == 4
    assert seen == [request.operation_id], "the observer is told the id the client sends"
    assert client.requests == [request]


def test_an_error_of_the_stream_reaches_the_caller_unchanged_and_ends_the_action_with_it() -> None:
    error = ValueError("[TABLE_OR_VIEW_NOT_FOUND] no such table")
    client, observer, request = Client([1], error), Observer(), Request()
    _tapped(client, observer)
    with pytest.raises(ValueError) as raised:
        list(client._execute_and_fetch_as_iterator(request))
    assert raised.value is error
    assert observer.told == [("sent", request), ("ended", 1, "[TABLE_OR_VIEW_NOT_FOUND] no such table")]


def test_a_stream_the_caller_stops_reading_ends_without_error() -> None:
    client, observer, request = Client([1, 2, 3]), Observer(), Request()
    _tapped(client, observer)
    stream = client._execute_and_fetch_as_iterator(request)
    assert next(stream) == 1
    stream.close()
    assert observer.told == [("sent", request), ("ended", 1, None)]


def test_an_observer_that_fails_never_fails_the_clients_call() -> None:
    client = Client([1, 2])
    _, failures = _tapped(client, Observer(failing=True))
    assert list(client._execute_and_fetch_as_iterator(Request())) == [1, 2]
    assert [(kind, str(error)) for kind, error in failures] == [("observing a Spark Connect request", "observer broke")]


def test_a_request_that_takes_no_operation_id_is_sent_as_it_is_and_said() -> None:
    client, observer = Client([1]), Observer()
    _, failures = _tapped(client, observer)
    assert list(client._execute_and_fetch_as_iterator("not a request")) == [1]
    assert client.requests == ["not a request"]
    assert [kind for kind, _ in failures] == ["naming a Spark Connect operation"]
    assert observer.told == [("sent", "not a request"), ("ended", 1, None)]


def test_requests_lineage_sends_itself_are_not_observed() -> None:
    client, observer, request = Client([1]), Observer(), Request()
    tap, _ = _tapped(client, observer)
    with tap.unobserved():
        assert list(client._execute_and_fetch_as_iterator(request)) == [1]
    assert observer.told == []
    assert request.operation_id == "", "lineage's own requests are left to the client"


# --- what a run says ------------------------------------------------------------------------------------------


def test_a_failed_actions_message_is_the_servers_without_the_jvm_stack() -> None:
    error = RuntimeError(
        "[DIVIDE_BY_ZERO] Division by zero.\n\nJVM stacktrace:\norg.apache.spark.SparkException\n\tat x"
    )
    assert server_message(error) == "[DIVIDE_BY_ZERO] Division by zero."


def test_a_client_sets_only_its_identity_on_a_server_with_lineage() -> None:
    confs, others = identity_confs(
        {"app_name": "Ann", "parent_job_name": "dag.task", "job": {"tags": "a:b"}, "transport": {"type": "console"}}
    )
    assert confs == {
        "spark.openlineage.appName": "Ann",
        "spark.openlineage.parentJobName": "dag.task",
        "spark.openlineage.job.tags": "a:b",
    }
    assert others == ["transport.type"]


def test_an_actions_later_events_are_made_from_its_start_as_openlineage_python_would_make_them() -> None:
    from openlineage.client.event_v2 import RunState
    from openlineage.client.serde import Serde

    from spark_lineage.config import LineageConfig
    from spark_lineage.events import EventBuilder, new_run_id
    from spark_lineage.lineage import QueryLineage

    builder = EventBuilder(LineageConfig(), SESSION, new_run_id(1_000))
    unclaimed = "column lineage: columns without lineage (rank): a window function is not followed on the client"
    lineage = QueryLineage(
        inputs=[DatasetLineage(DatasetIdentifier("file", "/d/src"))], outputs=[TABLE_OUT], errors=[unclaimed]
    )
    run_id, sql = new_run_id(2_000), "INSERT INTO t_out SELECT * FROM parquet.`/d/src`"
    start = builder.action_event(RunState.START, 2_000, run_id, "app.job", lineage, sql=sql)
    assert "spark_applicationDetails" in (start.run.facets or {})
    for state, error in ((RunState.COMPLETE, None), (RunState.FAIL, "[DIVIDE_BY_ZERO] Division by zero.")):
        later = builder.action_event(state, 3_000, run_id, "app.job", lineage, sql=sql, error=error, start=start)
        fresh = builder.action_event(state, 3_000, run_id, "app.job", lineage, sql=sql, error=error)
        assert Serde.to_json(later) == Serde.to_json(fresh)
        assert later.run is not start.run and later.outputs is not start.outputs


def test_a_client_whose_calls_cannot_be_observed_reports_nothing(tmp_path: Any) -> None:
    import types

    from openlineage.client import OpenLineageClient
    from openlineage.client.transport.noop import NoopConfig, NoopTransport

    from spark_lineage.config import LineageConfig
    from spark_lineage.connect.client.runtime import ClientRuntime
    from spark_lineage.errors import ConnectClientError
    from spark_lineage.redaction import Redactor

    spark = types.SimpleNamespace(client=types.SimpleNamespace(_session_id="s-1"))
    config = LineageConfig(spool_dir=str(tmp_path))
    runtime = ClientRuntime(
        spark, config, OpenLineageClient(transport=NoopTransport(NoopConfig())), SESSION, Redactor(None)
    )
    with pytest.raises(ConnectClientError, match=r"its client \(SimpleNamespace\) has no _execute_and_fetch_as_it"):
        runtime.start()
    assert not runtime.active
    assert runtime.delivery.spool.fates().total == 0


@pytest.mark.parametrize(
    ("name", "asked"),
    [("people", "`people`"), ("hcat.db.t", "`hcat`.`db`.`t`"), ("`my-db`.t", "`my-db`.t")],
)
def test_a_table_is_asked_about_by_its_name_quoted_as_the_request_named_it(name: str, asked: str) -> None:
    from spark_lineage.connect.client.tables import quoted

    assert quoted(name) == asked


# --- the runtime, over recorded requests --------------------------------------------------------------------------


class FakeConnectSession:
    """A Connect client session as the runtime uses it (its client's execute method, its catalog, ``sql``), over
    a server that knows ``tables`` (``DESCRIBE TABLE EXTENDED`` rows by name); a request's ``effects`` (by its
    operation id) runs when its stream is read (a CTAS creates its table), ``failures`` raise instead."""

    def __init__(self, tables: dict[str, list[Any]]) -> None:
        self.tables = tables
        self.effects: dict[str, Any] = {}
        self.failures: dict[str, BaseException] = {}
        self.asked: list[str] = []
        self.stopped = False
        session = self

        class Client:
            _session_id, _user_id = "s-1", "ann"
            _builder = type("Builder", (), {"userAgent": "_SPARK_CONNECT_PYTHON spark/4.2.0"})()

            def _execute_and_fetch_as_iterator(self, request: Any, *args: Any) -> Iterator[Any]:
                yield "schema"
                if request.operation_id in session.failures:
                    raise session.failures[request.operation_id]
                session.effects.pop(request.operation_id, lambda: None)()

        self.client = Client()
        self.catalog = type(
            "Catalog",
            (),
            {
                "tableExists": staticmethod(lambda name: self._ask(name) in self.tables),
                "currentDatabase": staticmethod(lambda: "default"),
            },
        )()

    def _ask(self, name: str) -> str:
        self.asked.append(name)
        return name.replace("`", "").removeprefix("default.")

    def sql(self, text: str) -> Any:
        rows = self.tables[text.removeprefix("DESCRIBE TABLE EXTENDED ").replace("`", "").removeprefix("default.")]
        return type("Frame", (), {"collect": staticmethod(lambda: rows)})()

    def stop(self) -> None:
        """The session's own stop."""
        self.stopped = True


def _described(table: str) -> list[Any]:
    return [
        row if row[0] not in ("Table", "Location") else (row[0], {"Table": table}.get(row[0], f"file:/wh/{table}"), "")
        for row in DESCRIBED
    ]


def _make_runtime(tmp_path: Any, **settings: Any) -> tuple[Any, FakeConnectSession, Any, Any]:
    """A client runtime on a fake session, events to a file, with these ``LineageConfig`` settings: it, the
    session, the events' reader and the handle."""
    import json as json_module

    from spark_lineage.config import LineageConfig
    from spark_lineage.connect.client.runtime import ClientRuntime, start
    from spark_lineage.delivery import create_client
    from spark_lineage.redaction import Redactor

    if "spark-4.3" not in VERSIONS:
        pytest.skip("the recorded requests of PySpark 4.3 need its protos")
    spark = FakeConnectSession({"t_out": _described("t_out")})
    events_file = tmp_path / "events.jsonl"
    config = LineageConfig(
        spool_dir=str(tmp_path / "spool"),
        transport={"type": "file", "log_file_path": str(events_file), "append": True},
        **settings,
    )
    redactor = Redactor(None)
    runtime = ClientRuntime(spark, config, create_client(config, redactor), SESSION, redactor)
    handle = start("connect-client:s-1", runtime)

    def events() -> list[dict[str, Any]]:
        assert handle.flush(30)
        return [json_module.loads(line) for line in events_file.read_text().splitlines()]

    return runtime, spark, events, handle


@pytest.fixture()
def recorded_runtime(tmp_path: Any) -> Iterator[tuple[Any, FakeConnectSession, Any]]:
    runtime, spark, events, handle = _make_runtime(tmp_path)
    yield runtime, spark, events
    handle.disable(timeout=10)


def _send(spark: FakeConnectSession, name: str) -> Any:
    from tests.unit.test_connect_client_requests import _requests

    request = _requests("spark-4.3", name)[-1]
    return request, spark.client._execute_and_fetch_as_iterator(request)


def test_each_action_that_writes_is_a_run_from_start_to_its_end(recorded_runtime: Any) -> None:
    runtime, spark, events = recorded_runtime
    _, stream = _send(spark, "collect")
    assert list(stream) == ["schema"]  # read-only: no run
    _, stream = _send(spark, "insert_into")
    assert list(stream) == ["schema"]
    ctas, stream = _send(spark, "sql_ctas")
    spark.effects[ctas.operation_id] = lambda: spark.tables.update(t_copy=_described("t_copy"))
    assert next(stream) == "schema"
    runtime.worker.flush(10)  # its START is built before the server creates the table
    assert list(stream) == []
    failed, stream = _send(spark, "write_path")
    spark.failures[failed.operation_id] = RuntimeError("[PATH_NOT_FOUND] nope\n\nJVM stacktrace:\nat x")
    with pytest.raises(RuntimeError, match="PATH_NOT_FOUND"):
        list(stream)
    sent = events()
    runs: dict[str, list[dict[str, Any]]] = {}
    for event in sent:
        runs.setdefault(event["job"]["name"], []).append(event)
    assert [(name, [e["eventType"] for e in run]) for name, run in runs.items()] == [
        ("spark_connect_server.connect_session", ["START"]),
        ("spark_connect_server.execute_insert_into_hadoop_fs_relation_command.wh_t_out", ["START", "COMPLETE"]),
        (
            "spark_connect_server.execute_create_data_source_table_as_select_command.default_t_copy",
            ["START", "COMPLETE"],
        ),
        ("spark_connect_server.execute_insert_into_hadoop_fs_relation_command.data_out", ["START", "FAIL"]),
    ]
    ctas_run = runs["spark_connect_server.execute_create_data_source_table_as_select_command.default_t_copy"]
    assert [(d["namespace"], d["name"]) for d in ctas_run[1]["inputs"]] == [("file", "/wh/t_out")]
    assert [(d["namespace"], d["name"]) for e in ctas_run for d in e["outputs"]] == [("file", "/wh/t_copy")] * 2
    assert ctas_run[0]["run"]["facets"]["spark_connect"]["operationId"] == ctas.operation_id
    # Each action's facet: the session's, with the action's own operation id, in each of its run's events.
    facet = ctas_run[0]["run"]["facets"]["spark_connect"]
    assert (facet["derivedOnClient"], facet["_producer"]) == (True, PRODUCER)
    assert facet["_schemaURL"].endswith("SparkConnectRunFacet.json#/$defs/SparkConnectRunFacet")
    assert ctas_run[1]["run"]["facets"]["spark_connect"] == facet
    insert_run = runs["spark_connect_server.execute_insert_into_hadoop_fs_relation_command.wh_t_out"]
    insert_facet = insert_run[0]["run"]["facets"]["spark_connect"]
    assert insert_facet["operationId"] != facet["operationId"]
    assert {k: v for k, v in insert_facet.items() if k != "operationId"} == {
        k: v for k, v in facet.items() if k != "operationId"
    }
    assert ctas_run[1]["job"]["facets"]["sql"]["query"].startswith("CREATE TABLE t_copy")
    # Its columns come from t_out's, which the server's catalog described.
    fields = ctas_run[1]["outputs"][0]["facets"]["columnLineage"]["fields"]
    assert {
        name: [(f["name"], f["field"], f["transformations"]) for f in v["inputFields"]] for name, v in fields.items()
    } == {
        column: [
            ("/wh/t_out", column, [{"type": "DIRECT", "subtype": "IDENTITY", "description": "", "masking": False}])
        ]
        for column in ("id", "bucket")
    }
    assert "extractionError" not in ctas_run[1]["run"]["facets"]
    fail = runs["spark_connect_server.execute_insert_into_hadoop_fs_relation_command.data_out"][1]
    assert fail["run"]["facets"]["errorMessage"]["message"] == "[PATH_NOT_FOUND] nope"
    # Each name asked once (the CTAS names t_out as default.t_out), but t_copy: before its CTAS and after it.
    assert spark.asked == ["`t_out`", "`default`.`t_out`", "`t_copy`", "`t_copy`"]
    for event in sent:
        validate_event(event)


def test_an_action_whose_end_never_comes_is_aborted_when_lineage_ends(recorded_runtime: Any) -> None:
    runtime, spark, events = recorded_runtime
    _, stream = _send(spark, "insert_into")
    assert next(stream) == "schema"  # sent, and left unread
    runtime.worker.flush(10)
    runtime.shutdown(RunState.COMPLETE)
    sent = [(e["job"]["name"].split(".", 1)[1], e["eventType"]) for e in events()]
    assert sent == [
        ("connect_session", "START"),
        ("execute_insert_into_hadoop_fs_relation_command.wh_t_out", "START"),
        ("execute_insert_into_hadoop_fs_relation_command.wh_t_out", "ABORT"),
        ("connect_session", "COMPLETE"),
    ]


def _spooled_batches(runtime: Any) -> list[list[str]]:
    """Each transaction the runtime's spool will be given: the event types it holds (the spool's own ``put_all``,
    counted as it is called)."""
    batches: list[list[str]] = []
    put_all = runtime.delivery.spool.put_all

    def counted(destination: str, payloads: Any, handoff: Any = None) -> Any:
        batches.append([json.loads(payload.json)["eventType"] for payload in payloads])
        return put_all(destination, payloads, handoff)

    runtime.delivery.spool.put_all = counted
    return batches


def test_an_action_that_ends_within_the_start_delay_spools_its_start_with_its_end(recorded_runtime: Any) -> None:
    """``python.connect.startDelayMillis`` (1 s by default): the START of an action that ends sooner is spooled
    with its end, in one transaction, and keeps the time its request was sent."""
    runtime, spark, events = recorded_runtime
    batches = _spooled_batches(runtime)
    before_ms = int(time.time() * 1000)
    _, stream = _send(spark, "insert_into")
    assert next(stream) == "schema"
    runtime.worker.flush(10)
    sent_ms = int(time.time() * 1000)
    time.sleep(0.05)
    assert list(stream) == []
    sent = events()
    for event in sent:
        validate_event(event)
    start, complete = sent[1:]
    assert batches == [["START", "COMPLETE"]]
    assert (start["eventType"], complete["eventType"]) == ("START", "COMPLETE")
    assert before_ms <= _epoch_ms(start["eventTime"]) <= sent_ms < _epoch_ms(complete["eventTime"])
    assert start["run"]["runId"] == complete["run"]["runId"]


@pytest.mark.parametrize("delay", [50.0, 0.0], ids=["start-after-the-delay", "no-delay"])
def test_an_action_still_running_has_its_start_spooled_before_its_end(tmp_path: Any, delay: float) -> None:
    """An action still running when the delay is up has its START spooled then (the worker's timer, with no
    flush); with no delay, when the action is sent."""
    runtime, spark, events, handle = _make_runtime(
        tmp_path, connect_start_delay_millis=delay, connect_spool_delay_millis=0.0
    )
    try:
        batches = _spooled_batches(runtime)
        _, stream = _send(spark, "insert_into")
        assert next(stream) == "schema"  # sent, and left unread
        deadline = time.monotonic() + 10
        while not batches and time.monotonic() < deadline:
            time.sleep(0.01)
        assert batches == [["START"]]
        assert list(stream) == []
        sent = events()
        assert [e["eventType"] for e in sent[1:]] == ["START", "COMPLETE"]
        assert batches == [["START"], ["COMPLETE"]]
        for event in sent:
            validate_event(event)
    finally:
        handle.disable(timeout=10)


def _ended_actions(spark: FakeConnectSession, count: int) -> None:
    """Send ``count`` writes, each read to its end."""
    for _ in range(count):
        _, stream = _send(spark, "insert_into")
        assert list(stream) == ["schema"]


_ACTION = ["START", "COMPLETE"]


@pytest.mark.parametrize(
    ("delay", "kept", "before", "after"),
    [
        (600_000.0, 64, [], [_ACTION * 3]),
        (600_000.0, 4, [_ACTION * 2], [_ACTION * 2, _ACTION]),
        (0.0, 64, [_ACTION] * 3, [_ACTION] * 3),
    ],
    ids=["held-until-the-flush", "at-most-kept", "no-delay"],
)
def test_actions_that_end_within_the_spool_delay_are_spooled_in_one_transaction(
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
    delay: float,
    kept: int,
    before: list[list[str]],
    after: list[list[str]],
) -> None:
    """``python.connect.spoolDelayMillis``: the events of the actions that end within it wait in memory and go in
    one spool transaction, once the delay is up, :data:`KEPT_AT_MOST` batches are kept, or a flush comes; with no
    delay, each action's as it ends. Each run's START comes before its end, and every event arrives."""
    from spark_lineage.connect.client import runtime as runtime_module

    monkeypatch.setattr(runtime_module, "KEPT_AT_MOST", kept)
    runtime, spark, events, handle = _make_runtime(tmp_path, connect_spool_delay_millis=delay)
    try:
        batches = _spooled_batches(runtime)
        _ended_actions(spark, 3)
        assert runtime.worker.flush(10)
        assert batches == before
        sent = events()
        assert batches == after
        assert [e["eventType"] for e in sent[1:]] == _ACTION * 3
        runs = [e["run"]["runId"] for e in sent[1:]]
        assert runs[0::2] == runs[1::2] and len(set(runs)) == 3
        for event in sent:
            validate_event(event)
    finally:
        handle.disable(timeout=10)


def test_an_actions_start_is_kept_in_the_journal_from_when_it_is_sent_until_it_is_spooled(tmp_path: Any) -> None:
    """With the spool delay, an action's START is made when its request is sent and kept, journaled (a kill
    loses it not), and spooled with its end in one transaction; the journal is emptied then."""
    runtime, spark, events, handle = _make_runtime(tmp_path, connect_spool_delay_millis=600_000.0)
    try:
        batches = _spooled_batches(runtime)
        _, stream = _send(spark, "insert_into")
        assert next(stream) == "schema"  # sent, still running
        assert runtime.worker.flush(10)
        (journal,) = (tmp_path / "spool").glob("kept-*.journal")
        kept = [json.loads(line.split("\t", 1)[1]) for line in journal.read_text().splitlines()]
        assert [(e["eventType"], e["job"]["name"].rsplit(".", 1)[-1]) for e in kept] == [("START", "wh_t_out")]
        validate_event(kept[0])
        assert batches == []
        assert list(stream) == []
        sent = events()
        assert [e["eventType"] for e in sent[1:]] == _ACTION
        assert sent[1] == kept[0]
        assert batches == [_ACTION]
        assert journal.stat().st_size == 0
    finally:
        handle.disable(timeout=10)


def test_ended_actions_events_are_spooled_when_the_spool_delay_is_up_with_no_flush(tmp_path: Any) -> None:
    """The worker's timer spools the events held once the delay is up, nothing else coming."""
    runtime, spark, _, handle = _make_runtime(tmp_path, connect_spool_delay_millis=50.0)
    try:
        batches = _spooled_batches(runtime)
        _ended_actions(spark, 2)
        deadline = time.monotonic() + 10
        while not batches and time.monotonic() < deadline:
            time.sleep(0.01)
        assert batches == [_ACTION * 2]
    finally:
        handle.disable(timeout=10)


def _written(directory: Any) -> list[dict[str, Any]]:
    """The events the file transport of :func:`_make_runtime` wrote in ``directory``, each validated."""
    sent = [json.loads(line) for line in (directory / "events.jsonl").read_text().splitlines()]
    for event in sent:
        validate_event(event)
    return sent


def _epoch_ms(event_time: str) -> int:
    from datetime import datetime

    return round(datetime.fromisoformat(event_time.replace("Z", "+00:00")).timestamp() * 1000)


@pytest.mark.parametrize("closed_by", ["disable", "stop"])
def test_a_ctrl_c_while_shutdown_analyzes_what_was_left_reaches_the_user_once_lineage_has_closed(
    tmp_path: Any, closed_by: str
) -> None:
    """``disable()`` or ``spark.stop()`` analyzes what still waits on the user's thread; a Ctrl-C there ends that
    (what is left is counted), the session's run still ends and is delivered, the session's own ``stop()`` still
    runs, and then the interrupt is the user's again, once."""
    runtime, spark, _, handle = _make_runtime(tmp_path)
    _interrupted_on_the_users_thread(runtime)
    with pytest.raises(KeyboardInterrupt):
        if closed_by == "disable":
            handle.disable()
        else:
            spark.stop()
    assert spark.stopped == (closed_by == "stop")
    assert [(e["job"]["name"], e["eventType"]) for e in _written(tmp_path)] == [
        ("spark_connect_server.connect_session", "START"),
        ("spark_connect_server.connect_session", "COMPLETE"),
    ]
    assert runtime.wait_ended(0)
    assert runtime.worker.interrupted is None and handle.disable() is True, "raised once"


def _interrupted_on_the_users_thread(runtime: Any) -> None:
    """Hold the runtime's worker on its own thread until lineage closes, with an action sent after: the thread
    that closes lineage (the user's, the main one) takes that action over, and a Ctrl-C comes while it analyzes
    it."""
    from spark_lineage.connect.client.runtime import _Sent
    from tests.unit.test_worker import hold_until_closed

    hold_until_closed(runtime.worker, lambda item: isinstance(item, _Sent))
    _, stream = _send(runtime.spark, "insert_into")
    assert next(stream) == "schema"  # sent: its _Sent waits behind the hold


AT_EXIT = """
import sys
from pathlib import Path
from tests.unit.test_connect_client_runtime import _interrupted_on_the_users_thread, _make_runtime

runtime, _, _, _ = _make_runtime(Path(sys.argv[1]))
_interrupted_on_the_users_thread(runtime)
print("exiting", flush=True)
"""


def test_a_ctrl_c_while_the_exit_analyzes_what_was_left_is_counted_and_not_raised_again(tmp_path: Any) -> None:
    """At the process's exit (lineage's exit hook), a Ctrl-C only cuts the exit's analysis short: the action it
    left is counted in the closing line, the session's run still ends, and the exit goes on with no traceback."""
    from tests.unit.test_worker import run_to_exit

    if "spark-4.3" not in VERSIONS:
        pytest.skip("the recorded requests of PySpark 4.3 need its protos")
    result = run_to_exit(AT_EXIT, str(tmp_path))
    assert (result.returncode, result.stdout) == (0, "exiting\n"), result.stderr
    (closing_line,) = result.stderr.splitlines()  # nothing else: no traceback
    lost = "1 lost (jobs (a Spark Connect action)): not analyzed: shutdown was interrupted (KeyboardInterrupt)"
    assert lost in closing_line
    assert [(e["job"]["name"], e["eventType"]) for e in _written(tmp_path)] == [
        ("spark_connect_server.connect_session", "START"),
        ("spark_connect_server.connect_session", "COMPLETE"),
    ]


def test_a_flush_waits_for_room_in_a_full_queue_and_returns_once_the_starts_held_are_delivered(
    tmp_path: Any,
) -> None:
    """``flush()``'s own request to spool the STARTs held waits for room in lineage's full queue, within its
    timeout: it is no lineage dropped (no "queue full" warning, nothing counted), and flush is True only once
    those STARTs are delivered."""
    import threading

    runtime, spark, _, handle = _make_runtime(
        tmp_path, queue_size=2, connect_start_delay_millis=600_000.0, connect_spool_delay_millis=0.0
    )
    try:
        _, stream = _send(spark, "insert_into")
        assert next(stream) == "schema"  # sent, and left unread: its START is held
        assert runtime.worker.flush(10)
        gate = threading.Event()
        analyze = runtime.worker._process

        def process(item: Any) -> None:
            if item == "hold":
                gate.wait(10)
            elif item != "filler":
                analyze(item)

        runtime.worker._process = process
        runtime.worker.submit("hold")
        while runtime.worker.backlog:  # the worker's thread holds it
            time.sleep(0.01)
        assert runtime.worker.submit("filler") and runtime.worker.submit("filler")  # the queue is full
        assert not handle.flush(0.1), "no room came within the flush's time"
        threading.Timer(0.2, gate.set).start()
        assert handle.flush(30)
        assert [e["eventType"] for e in _written(tmp_path)] == ["START", "START"]
        assert (runtime.worker.dropped, runtime.errors.counts) == (0, {})
    finally:
        handle.disable(timeout=10)


@pytest.mark.skipif(not hasattr(os, "getpriority"), reason="per-thread priorities are Linux's")
def test_a_clients_lineage_threads_keep_the_processs_priority(recorded_runtime: Any) -> None:
    """The job runs on the server: lineage's threads on a client yield to nothing, and at a lowered priority one
    holding the GIL would make the user's thread wait for it while other processes keep the cores busy."""
    runtime, _, events = recorded_runtime
    assert events()  # the worker and the sender have run
    threads = [runtime.worker._thread, *(lane.thread for lane in runtime.delivery.sender._lanes)]
    process = os.getpriority(os.PRIO_PROCESS, 0)
    assert [(t.name, os.getpriority(os.PRIO_PROCESS, t.native_id)) for t in threads] == [
        ("spark_lineage-connect-client", process),
        ("spark_lineage-sender", process),
    ]


def test_an_action_whose_end_lineages_queue_dropped_is_aborted_saying_so(recorded_runtime: Any) -> None:
    """The worker's queue refused the action's end (full): the run is not left open nor ended silently; it ends
    ABORT with the session, and its errorMessage says why."""
    from spark_lineage.connect.client.runtime import _Ended

    runtime, spark, events = recorded_runtime
    _, stream = _send(spark, "insert_into")
    assert next(stream) == "schema"
    runtime.worker.flush(10)
    (token,) = runtime._runs
    runtime._dropped(_Ended(token, 0, None), "lineage's queue was full (python.queueSize=1)")  # the worker's on_drop
    runtime.shutdown(RunState.COMPLETE)
    abort = [e for e in events() if e["eventType"] == "ABORT"]
    assert [e["run"]["facets"]["errorMessage"]["message"] for e in abort] == [
        "the action's end was not reported: lineage's queue was full (python.queueSize=1)"
    ]


def test_column_lineage_that_fails_costs_the_run_nothing_but_its_column_lineage(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spark_lineage.connect.client import runtime as runtime_module

    def failing(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a plan no rule foresaw")

    monkeypatch.setattr(runtime_module, "dataframe_columns", failing)
    _, spark, events, handle = _make_runtime(tmp_path)
    try:
        _, stream = _send(spark, "write_path")
        assert list(stream) == ["schema"]
        complete = events()[-1]
    finally:
        handle.disable(timeout=10)
    assert complete["eventType"] == "COMPLETE" and [d["name"] for d in complete["outputs"]] == [f"{DATA}/out"]
    assert [e["errorMessage"] for e in complete["run"]["facets"]["extractionError"]["errors"]] == [
        "column lineage failed (RuntimeError: a plan no rule foresaw); the datasets are reported without it"
    ]
    validate_event(complete)


def test_beyond_the_actions_kept_the_oldest_waiting_one_is_aborted(
    recorded_runtime: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spark_lineage.connect.client import runtime as runtime_module

    monkeypatch.setattr(runtime_module, "RUNS_KEPT", 1)
    runtime, spark, events = recorded_runtime
    streams = [_send(spark, name)[1] for name in ("insert_into", "write_path")]
    for stream in streams:
        assert next(stream) == "schema"  # sent, and left unread
    runtime.worker.flush(10)
    # Each START was kept when its action was sent (python.connect.spoolDelayMillis): the ABORT of the evicted run
    # is spooled after both.
    sent = events()
    assert [(e["job"]["name"].rsplit(".", 1)[1], e["eventType"]) for e in sent[1:]] == [
        ("wh_t_out", "START"),
        ("data_out", "START"),
        ("wh_t_out", "ABORT"),
    ]
    for event in sent:
        validate_event(event)


def test_with_resolve_schemas_a_write_asks_the_server_for_the_schema_it_writes(tmp_path: Any) -> None:
    """``python.connect.resolveSchemas``: the server says what a write writes (its outputs' schema) and what
    each file it reads holds (once per read), so its column lineage is whole."""
    _, spark, events, handle = _make_runtime(tmp_path, connect_resolve_schemas=True)
    fields = {
        "read": [("id", "bigint"), ("b", "bigint")],
        "with_columns_renamed": [("id", "bigint"), ("bucket", "bigint")],
    }
    asked: list[str] = []

    def schema(plan: Any) -> Any:
        kind = plan.root.WhichOneof("rel_type")
        asked.append(kind)
        struct = [
            type("Field", (), {"name": name, "dataType": type("Type", (), {"simpleString": lambda self, t=t: t})()})()
            for name, t in fields[kind]
        ]
        json_fields = [{"name": name, "type": "long", "nullable": True, "metadata": {}} for name, _ in fields[kind]]
        document = json.dumps({"type": "struct", "fields": json_fields})
        return type("StructType", (), {"json": staticmethod(lambda: document), "fields": struct})()

    spark.client.schema = schema  # type: ignore[attr-defined]
    try:
        for _ in range(2):
            _, stream = _send(spark, "write_path")
            assert list(stream) == ["schema"]
        complete = events()[-1]
    finally:
        handle.disable(timeout=10)
    assert asked == ["with_columns_renamed", "read", "with_columns_renamed"]  # the read's schema is kept
    (output,) = complete["outputs"]
    assert output["facets"]["schema"]["fields"] == [{"name": "id", "type": "long"}, {"name": "bucket", "type": "long"}]
    lineage = output["facets"]["columnLineage"]
    assert {name: [(f["name"], f["field"]) for f in v["inputFields"]] for name, v in lineage["fields"].items()} == {
        "id": [(f"{DATA}/src", "id")],
        "bucket": [(f"{DATA}/src", "b")],
    }
    assert [(d["field"], d["transformations"][0]["subtype"]) for d in lineage["dataset"]] == [("id", "FILTER")]
    assert "extractionError" not in complete["run"]["facets"]


@pytest.mark.parametrize(
    "rows",
    [
        [("id", "bigint", None)],  # a temporary view: no details
        [("# Detailed Table Information", "", ""), ("Table", "v", ""), ("Type", "VIEW", "")],
    ],
)
def test_a_view_is_not_taken_for_a_table_in_the_warehouse(rows: list[Any]) -> None:
    tables = TableDatasets(SESSION, Server({"v": rows}).describe, lambda: "default")
    errors: list[str] = []
    assert tables.dataset("v", errors) is None
    assert errors == ["table v: a view, or a table the server shows no location for: not followed"]


@pytest.mark.parametrize(
    ("method", "mode", "expected"),
    [
        ("saveAsTable", "error_if_exists", ("atomic_create_table_as_select", "db.t")),
        ("saveAsTable", "overwrite", ("atomic_replace_table_as_select", "db.t")),
        ("saveAsTable", "append", ("append_data", "ice.db.t")),
        ("insertInto", None, ("append_data", "ice.db.t")),
        ("insertInto", "overwrite", ("overwrite_by_expression", "ice.db.t")),
    ],
)
def test_a_dataframe_write_to_a_v2_catalogs_table_is_named_as_its_v2_command(
    method: str, mode: str | None, expected: tuple[str, str]
) -> None:
    action = ClientAction(ActionKind.WRITE, write=WriteTarget(table="ice.db.t", method=method, mode=mode))
    assert _named(action_command(action, [], ["ice.db.t"])) == expected
