"""What a Spark Connect client's requests read and write, from requests a real client sent (recorded by
``tests/fixtures/record_connect_requests.py`` against a real server), read without a server: the actions,
and their datasets named as the driver side names them."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from spark_lineage import naming
from spark_lineage.connect.client.datasets import ActionDatasets, action_datasets, read_datasets
from spark_lineage.connect.client.requests import (
    ActionKind,
    ClientAction,
    ReadSource,
    RequestHeader,
    WriteTarget,
    _naming_options,
    read_plan,
    read_request,
)
from spark_lineage.handlers.datasources import naming_option_keys

proto = pytest.importorskip("pyspark.sql.connect.proto", reason="the requests are PySpark's Connect protos")

REQUESTS = Path(__file__).parent.parent / "fixtures" / "connect_requests"


def _line(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:2])


def _readable_versions() -> list[str]:
    """The recordings this PySpark's protos can read: those of its line and older ones (a newer client's
    requests hold fields an older proto does not know)."""
    import pyspark

    installed = _line(pyspark.__version__)
    return sorted(p.name for p in REQUESTS.iterdir() if p.is_dir() and _line(p.name.split("-")[1]) <= installed)


VERSIONS = _readable_versions()
DATA = "/tmp/spark-lineage-fixtures/connect/data"
SOURCE = ReadSource(format="parquet", paths=(f"{DATA}/src",))
FILE_SOURCE = ("file", f"{DATA}/src")
POSTGRES = "postgres://db.example.com:5432"


def _requests(version: str, name: str) -> list[Any]:
    recorded = json.loads((REQUESTS / version / f"{name}.json").read_text())["requests"]
    return [proto.ExecutePlanRequest.FromString(base64.b64decode(text)) for text in recorded]


def _action(version: str, name: str) -> ClientAction:
    return read_request(_requests(version, name)[-1])


def _named(found: ActionDatasets) -> tuple[list[tuple[str, str]], list[tuple[str, str]], list[str], list[str]]:
    return (
        [(d.namespace, d.name) for d in found.inputs],
        [(d.namespace, d.name) for d in found.outputs],
        found.input_tables,
        found.output_tables,
    )


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    ("name", "write", "named"),
    [
        (
            "write_path",
            WriteTarget(format="parquet", path=f"{DATA}/out", mode="overwrite"),
            ([FILE_SOURCE], [("file", f"{DATA}/out")], [], []),
        ),
        (
            "save_as_table",
            WriteTarget(table="t_out", method="saveAsTable", mode="overwrite"),
            ([FILE_SOURCE], [], [], ["t_out"]),
        ),
        ("insert_into", WriteTarget(table="t_out", method="insertInto"), ([FILE_SOURCE], [], [], ["t_out"])),
        (
            "relative_path",
            WriteTarget(format="parquet", path="relative/out", mode="overwrite"),
            ([FILE_SOURCE], [], [], []),
        ),
    ],
)
def test_a_dataframe_write_names_what_it_reads_and_where_it_writes(
    version: str, name: str, write: WriteTarget, named: Any
) -> None:
    action = _action(version, name)
    assert action.kind == ActionKind.WRITE
    assert action.reads == (SOURCE,) and action.write == write and action.sql == ()
    assert action.session_id and action.operation_id
    assert _named(action_datasets(action)) == named


@pytest.mark.parametrize("version", VERSIONS)
def test_a_relative_path_is_not_named_and_says_why(version: str) -> None:
    assert action_datasets(_action(version, "relative_path")).unnamed == [
        "the relative path 'relative/out': the server resolves it against its own directory"
    ]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_join_of_a_table_and_files_written_as_json(version: str) -> None:
    action = _action(version, "join_write_json")
    assert action.reads == (ReadSource(table="t_out"), SOURCE)
    assert action.write == WriteTarget(format="json", path=f"{DATA}/joined", mode="append")
    assert _named(action_datasets(action)) == ([FILE_SOURCE], [("file", f"{DATA}/joined")], ["t_out"], [])


@pytest.mark.parametrize("version", VERSIONS)
def test_a_v2_write_names_its_table_and_provider(version: str) -> None:
    action = _action(version, "write_to_v2")
    assert action.kind == ActionKind.WRITE_V2
    assert action.write == WriteTarget(format="parquet", table="t_v2", method="writeTo", mode="create")
    assert _named(action_datasets(action)) == ([], [], ["t_out"], ["t_v2"])


@pytest.mark.parametrize("version", VERSIONS)
def test_jdbc_reads_and_writes_keep_only_the_options_naming_needs(version: str) -> None:
    read = _action(version, "jdbc_read_write")
    (source,) = read.reads
    assert source.options == {"url": "jdbc:postgresql://db.example.com:5432/shop", "dbtable": "public.orders"}
    assert "not-a-real-secret" not in repr(read) and "reader" not in repr(read)
    assert _named(action_datasets(read)) == (
        [(POSTGRES, "shop.public.orders")],
        [("file", f"{DATA}/orders")],
        [],
        [],
    )
    written = _action(version, "jdbc_write")
    assert written.write is not None and "not-a-real-secret" not in repr(written)
    assert _named(action_datasets(written)) == ([FILE_SOURCE], [(POSTGRES, "shop.public.buckets")], [], [])


@pytest.mark.parametrize("version", VERSIONS)
def test_a_kafka_read_names_its_topic_on_its_cluster(version: str) -> None:
    action = _action(version, "kafka_read_write")
    assert _named(action_datasets(action)) == (
        [("kafka://broker.example.com:9092", "events")],
        [("file", f"{DATA}/events")],
        [],
        [],
    )


SQL_SERVER = {"url": "jdbc:sqlserver://db.example.com:1433", "databasename": "shop"}


@pytest.mark.parametrize(
    ("action", "named", "unnamed"),
    [
        # SQL Server takes the database from the databaseName option: the driver side's JdbcProvider and
        # JDBCRelation handler name it so, and so does the client now that it asks the same source.
        (
            ClientAction(
                ActionKind.WRITE,
                reads=(ReadSource(format="jdbc", options={**SQL_SERVER, "dbtable": "dbo.orders"}),),
                write=WriteTarget(format="JDBC", options={**SQL_SERVER, "dbtable": " dbo.totals "}),
            ),
            (
                [("sqlserver://db.example.com:1433", "shop.dbo.orders")],
                [("sqlserver://db.example.com:1433", "shop.dbo.totals")],
            ),
            [],
        ),
        # A query (or a dbtable subquery) is parsed with openlineage-sql, as the driver side parses it.
        (
            ClientAction(
                ActionKind.WRITE,
                reads=(
                    ReadSource(
                        format="jdbc",
                        options={
                            "url": "jdbc:postgresql://db.example.com:5432/shop",
                            "query": "SELECT o.id, c.name FROM public.orders o JOIN public.customers c ON o.cid = c.id",
                        },
                    ),
                    ReadSource(
                        format="jdbc",
                        options={
                            "url": "jdbc:postgresql://db.example.com:5432/shop",
                            "dbtable": "(SELECT id FROM public.refunds) r",
                        },
                    ),
                ),
                write=WriteTarget(format="delta", path=f"{DATA}/delta_out", method="save", mode="overwrite"),
            ),
            (
                [
                    (POSTGRES, "shop.public.customers"),
                    (POSTGRES, "shop.public.orders"),
                    (POSTGRES, "shop.public.refunds"),
                ],
                [("file", f"{DATA}/delta_out")],
            ),
            [],
        ),
        (
            ClientAction(
                ActionKind.WRITE,
                reads=(
                    ReadSource(
                        format="kafka", options={"kafka.bootstrap.servers": "b:9092", "subscribepattern": "e.*"}
                    ),
                ),
                write=WriteTarget(format="kafka", options={"kafka.bootstrap.servers": "b:9092"}),
            ),
            ([], []),
            [
                "a Kafka read that names no topic (subscribePattern): its input is not reported",
                "a Kafka save without a topic option: its output is not reported",
            ],
        ),
        (
            ClientAction(ActionKind.WRITE, reads=(ReadSource(format="jdbc", options={"dbtable": "t"}),)),
            ([], []),
            ["a JDBC read without url, or without dbtable or query: its inputs are not reported"],
        ),
    ],
)
def test_data_sources_are_named_by_the_driver_side_s_source_for_their_format(
    action: ClientAction, named: Any, unnamed: list[str]
) -> None:
    found = action_datasets(action)
    assert _named(found)[:2] == named
    assert found.unnamed == unnamed


def test_a_delta_save_s_output_carries_the_facets_the_driver_side_gives_a_delta_table() -> None:
    action = ClientAction(ActionKind.WRITE, write=WriteTarget(format="delta", path=f"{DATA}/d", method="save"))
    found = action_datasets(action)
    (output,) = found.lineage(found.outputs)
    assert (output.identifier.namespace, output.identifier.name) == ("file", f"{DATA}/d")
    storage = output.extra_facets["storage"]
    assert (storage.storageLayer, storage.fileFormat) == ("delta", "parquet")
    (plain,) = found.lineage([naming.from_location(f"{DATA}/p")])
    assert plain.extra_facets == {}


def test_a_request_keeps_every_option_a_source_names_its_datasets_by_and_no_other() -> None:
    options = {"URL": "jdbc:sqlserver://h", "dbTable": "t", "databaseName": "shop", "password": "not-a-real-secret"}
    assert _naming_options(options) == {"url": "jdbc:sqlserver://h", "dbtable": "t", "databasename": "shop"}
    assert {"path", "url", "dbtable", "query", "databasename", "topic", "subscribe", "assign"} <= naming_option_keys()


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    ("name", "sql", "named"),
    [
        (
            "sql_insert",
            f"INSERT INTO t_out SELECT id, b FROM parquet.`{DATA}/src`",
            ([FILE_SOURCE], [], [], ["t_out"]),
        ),
        # openlineage-sql reads Spark's CREATE TABLE once its USING clause is left out
        (
            "sql_ctas",
            "CREATE TABLE t_copy USING parquet AS SELECT id, bucket FROM default.t_out",
            ([], [], ["default.t_out"], ["t_copy"]),
        ),
    ],
)
def test_sql_is_read_with_openlineage_sql(version: str, name: str, sql: str, named: Any) -> None:
    pytest.importorskip("openlineage_sql", reason="reading SQL needs the spark extra")
    action = _action(version, name)
    assert (action.kind, action.sql, action.reads, action.write) == (ActionKind.SQL, (sql,), (), None)
    found = action_datasets(action)
    assert _named(found) == named and found.unnamed == []


@pytest.mark.parametrize("version", VERSIONS)
def test_the_result_of_spark_sql_written_reads_the_sql_s_tables(version: str) -> None:
    """``spark.sql("SELECT …")`` sends its statement at once (an action that writes nothing); the write of its
    result holds the statement as its input."""
    pytest.importorskip("openlineage_sql", reason="reading SQL needs the spark extra")
    statement, write = (read_request(request) for request in _requests(version, "sql_dataframe_write"))
    assert statement.kind == ActionKind.SQL and statement.write is None
    assert write.kind == ActionKind.WRITE and write.sql == ("SELECT id FROM t_out WHERE id > 2",)
    assert _named(action_datasets(write)) == ([], [("file", f"{DATA}/sql_out")], ["t_out"], [])


@pytest.mark.parametrize("version", VERSIONS)
def test_a_collect_is_a_query_of_its_table(version: str) -> None:
    action = _action(version, "collect")
    assert (action.kind, action.reads, action.write) == (ActionKind.QUERY, (ReadSource(table="t_out"),), None)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_compressed_plan_is_read_as_the_plan_it_holds(version: str) -> None:
    """PySpark 4.1+ sends a plan larger than the server's threshold compressed with zstd."""
    zstandard = pytest.importorskip("zstandard")
    if not hasattr(proto.Plan, "CompressedOperation"):
        pytest.skip("this PySpark's client sends no compressed plan")
    (request,) = _requests(version, "write_path")
    compressed = proto.ExecutePlanRequest()
    compressed.CopyFrom(request)
    command = request.plan.command.SerializeToString()
    compressed.plan.compressed_operation.CopyFrom(
        proto.Plan.CompressedOperation(
            data=zstandard.ZstdCompressor().compress(command),
            op_type=proto.Plan.CompressedOperation.OpType.OP_TYPE_COMMAND,
            compression_codec=proto.CompressionCodec.COMPRESSION_CODEC_ZSTD,
        )
    )
    assert compressed.plan.WhichOneof("op_type") == "compressed_operation"
    assert read_request(compressed) == read_request(request)


def test_reading_a_clients_requests_imports_neither_py4j_nor_pyspark() -> None:
    """The client side must work with the thin ``pyspark-client`` package, which has no py4j."""
    import subprocess
    import sys

    modules = "spark_lineage.connect.client.requests, spark_lineage.connect.client.datasets"
    probe = f"import sys, {modules}; print(sorted(m for m in ('py4j', 'pyspark') if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout == "[]\n"


@pytest.mark.parametrize(
    ("conf", "reason"),
    [
        (
            {"spark.extraListeners": "com.example.Mine, io.openlineage.spark.agent.OpenLineageSparkListener"},
            "the server runs openlineage-spark (io.openlineage.spark.agent.OpenLineageSparkListener in "
            "spark.extraListeners)",
        ),
        (
            {"spark.openlineage.transport.type": "http", "spark.openlineage.transport.url": "http://ol:5000"},
            "the server runs spark_lineage (spark.openlineage.transport.type is set)",
        ),
        ({"spark.openlineage.transport.type": "http", "spark.openlineage.disabled": "true"}, None),
        ({"spark.app.name": "Spark Connect server"}, None),
    ],
)
def test_a_server_that_reports_its_sessions_itself_is_told_from_its_confs(
    conf: dict[str, str], reason: str | None
) -> None:
    from spark_lineage.connect.client.servers import server_lineage

    assert server_lineage(conf) == reason


def _listed_fields_visit(message: Any) -> list[Any]:
    """Every message inside ``message``, depth first, as protobuf's ``ListFields`` lists each one's fields (the
    order the visitor keeps), without the relations' and expressions' ``common`` parts."""
    visited = [message]
    for descriptor, value in message.ListFields():
        kind = descriptor.message_type
        if kind is None or kind.full_name in ("spark.connect.RelationCommon", "spark.connect.ExpressionCommon"):
            continue
        repeated = getattr(descriptor, "is_repeated", None)
        if repeated if repeated is not None else descriptor.label == 3:
            if not kind.GetOptions().map_entry:
                for item in value:
                    visited += _listed_fields_visit(item)
        else:
            visited += _listed_fields_visit(value)
    return visited


@pytest.mark.parametrize("version", VERSIONS)
def test_the_visitor_meets_every_message_of_a_request_in_its_fields_order(version: str) -> None:
    from spark_lineage.connect.client.requests import messages

    requests = [r for path in sorted((REQUESTS / version).glob("*.json")) for r in _requests(version, path.stem)]
    assert len(requests) > 10
    for request in requests:
        expected = _listed_fields_visit(request.plan)
        visited = list(messages(request.plan))
        assert [m.DESCRIPTOR.full_name for m in visited] == [m.DESCRIPTOR.full_name for m in expected]
        assert [m.SerializeToString() for m in visited] == [m.SerializeToString() for m in expected]


@pytest.mark.parametrize("version", VERSIONS)
def test_the_same_read_is_read_once_and_named_once_for_its_action(version: str) -> None:
    """A read met again (by the column lineage's walk of the action, or in the next action) is the same object;
    the column lineage takes its datasets as the action named them."""
    first, again = _action(version, "join_write_json"), _action(version, "join_write_json")
    assert [id(read) for read in first.reads] == [id(read) for read in again.reads]
    found = action_datasets(first)
    table, source = first.reads
    assert list(found.by_read) == [id(source)]  # a table's dataset is the catalog's to say
    named = found.by_read[id(source)][1]
    assert named == [naming.DatasetIdentifier(*FILE_SOURCE)]
    assert read_datasets(source, found) == named and read_datasets(source, found) is not named
    other = ReadSource(format="parquet", paths=(f"{DATA}/other",))
    assert read_datasets(other, found) == [naming.DatasetIdentifier("file", f"{DATA}/other")]
    assert read_datasets(table, found) == []


@pytest.mark.parametrize("windowed", [True, False], ids=["a-window-in-a-projection", "no-window"])
def test_a_window_inside_an_expression_moves_data_between_partitions(windowed: bool) -> None:
    """A write of ``df.withColumn("rank", rank().over(...))`` exchanges: its window is an expression, inside the
    projection's, so the walk for exchanges goes into expressions (the server then wraps the write in an adaptive
    plan, which names its job)."""
    e = proto.Expression
    source = proto.Relation(read=proto.Read(data_source=proto.Read.DataSource(format="parquet", paths=["/data/t"])))
    ranked = e(unresolved_function=e.UnresolvedFunction(function_name="rank"))
    column = e(window=e.Window(window_function=ranked)) if windowed else ranked
    named = e(alias=e.Alias(expr=column, name=["rank"]))
    relation = proto.Relation(project=proto.Project(input=source, expressions=[named]))
    write = proto.WriteOperation(input=relation, path="/out/ranked", source="parquet")
    plan = proto.Plan(command=proto.Command(write_operation=write))
    action = read_plan(plan, RequestHeader())
    assert action.exchanges is windowed
    assert [read.paths for read in action.reads] == [("/data/t",)]
