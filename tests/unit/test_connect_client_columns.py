"""Column lineage a Spark Connect client derives from its requests alone: from the relation trees a real client
sent (recorded by ``tests/fixtures/record_connect_requests.py``), and from SQL texts, without a server. The
same writes run through a real server are held to the server side's lineage in
tests/integration/test_connect_client.py."""

from __future__ import annotations

from typing import Any

import pytest

from spark_lineage.connect.client.columns import ClientColumns, dataframe_columns, sql_columns
from spark_lineage.connect.client.frames import LeafColumns, Walk
from spark_lineage.connect.client.requests import ReadSource, read_request
from spark_lineage.connect.client.sql import declared_columns, written_query
from spark_lineage.connect.client.statements import tokens
from spark_lineage.naming import DatasetIdentifier
from tests.unit.test_connect_client_requests import DATA, VERSIONS, _requests

T_OUT = DatasetIdentifier("file", "/wh/t_out")
PEOPLE = DatasetIdentifier("file", "/wh/people")
SRC = DatasetIdentifier("file", f"{DATA}/src")
TABLES = {
    "t_out": (T_OUT, (("id", "bigint"), ("bucket", "bigint"))),
    "people": (PEOPLE, (("id", "int"), ("name", "string"), ("city", "string"))),
}

ID, T, A = "DIRECT IDENTITY", "DIRECT TRANSFORMATION", "DIRECT AGGREGATION"
MASKED_T, MASKED_A = "DIRECT TRANSFORMATION masking", "DIRECT AGGREGATION masking"
FILTER, JOIN, GROUP_BY, SORT, CONDITIONAL = (
    f"INDIRECT {kind}" for kind in ("FILTER", "JOIN", "GROUP_BY", "SORT", "CONDITIONAL")
)


def _leaves(read: ReadSource, message: Any = None, *, src_columns: Any = None) -> LeafColumns:
    if read.table is not None:
        name = read.table.split(".")[-1]
        if name not in TABLES:
            return LeafColumns((), unclaimed=f"table {read.table} is not followed (its error says why)")
        dataset, columns = TABLES[name]
        return LeafColumns((dataset,), columns, frozenset({name}))
    declared = declared_columns(read.schema) if read.schema else src_columns
    return LeafColumns((DatasetIdentifier("file", read.paths[0]),), declared)


def _shown(columns: ClientColumns) -> tuple[dict[str, list[tuple[str, str, str]]], list[tuple[str, str, str]]]:
    """Fields and the dataset's sources as ``(dataset name, column, transformations)``, transformations as
    ``"TYPE SUBTYPE[ masking]"`` joined by ``, ``."""

    def source(s: Any) -> tuple[str, str, str]:
        kinds = ", ".join(f"{t.type} {t.subtype}" + (" masking" if t.masking else "") for t in s.transformations)
        return (s.column.dataset.name.rsplit("/", 1)[-1], s.column.field, kinds)

    return (
        {name: [source(s) for s in sources] for name, sources in columns.fields.items()},
        [source(s) for s in columns.dataset],
    )


# --- SQL -------------------------------------------------------------------------------------------------------


def test_an_insert_names_its_columns_by_the_tables_and_types_each_select_item() -> None:
    columns = sql_columns(
        "INSERT INTO default.out SELECT id, upper(name) AS n, count(city), sha2(name, 256) h "
        "FROM people WHERE city = 'paris' -- a comment, city\nGROUP BY id, name ORDER BY 1",
        _leaves,
        target=[("id", "bigint"), ("upper_name", "string"), ("cities", "bigint"), ("hashed", "string")],
    )
    fields, dataset = _shown(columns)
    assert fields == {
        "id": [("people", "id", T)],  # written into a bigint column: the server casts it
        "upper_name": [("people", "name", T)],
        "cities": [("people", "city", MASKED_A)],
        "hashed": [("people", "name", MASKED_T)],
    }
    assert dataset == [
        ("people", "city", FILTER),
        ("people", "id", f"{SORT}, {GROUP_BY}"),
        ("people", "name", GROUP_BY),
    ]
    assert columns.unclaimed == []


def test_a_ctas_names_its_columns_by_the_query_and_says_which_it_does_not_claim() -> None:
    columns = sql_columns(
        "CREATE TABLE db.t USING parquet OPTIONS ('a' 'b') AS "
        "SELECT DISTINCT p.id, `name` AS who, CASE WHEN city = 'x' THEN 1 END AS flag, coalesce(name, city) c, "
        "length(name) FROM people p",
        _leaves,
    )
    fields, dataset = _shown(columns)
    assert fields == {"id": [("people", "id", ID)], "who": [("people", "name", ID)]}
    assert dataset == [("people", "id", GROUP_BY), ("people", "name", GROUP_BY)]
    assert columns.unclaimed == [
        "columns without lineage (flag): a CASE expression in SQL is not typed on the client",
        "columns without lineage (c): coalesce() in SQL is not typed on the client",
        "columns without lineage (the 5th): an expression the server names (give it an alias)",
        "the lineage of the output as a whole misses: coalesce() in SQL is not typed on the client",
    ]


@pytest.mark.parametrize(
    ("sql", "why"),
    [
        ("INSERT INTO t SELECT a.id FROM people a JOIN t_out b ON a.id = b.id", "SQL with JOIN is not followed"),
        ("INSERT INTO t SELECT id FROM people UNION ALL SELECT id FROM t_out", "SQL with UNION is not followed"),
        ("INSERT INTO t WITH x AS (SELECT 1) SELECT * FROM x", "SQL starting 'WITH' is not followed"),
        ("INSERT INTO t SELECT id FROM (SELECT id FROM people)", "SQL reading anything but one table is not followed"),
        ("INSERT INTO t SELECT id FROM people, t_out", "SQL reading anything but one table is not followed"),
    ],
)
def test_sql_it_does_not_follow_is_said_whole(sql: str, why: str) -> None:
    columns = sql_columns(sql, _leaves, target=[("id", "int")])
    assert columns.fields == {}
    assert columns.unclaimed == [f"columns without lineage (id): {why} on the client"]


def test_statements_it_does_not_follow_say_what_they_are() -> None:
    assert sql_columns("INSERT INTO t PARTITION (p = 1) SELECT id FROM people", _leaves).unclaimed == [
        "no column lineage is derived on the client for an INSERT with a PARTITION clause"
    ]
    assert sql_columns("MERGE INTO t USING s ON t.id = s.id", _leaves).unclaimed == [
        "no column lineage is derived on the client for a MERGE statement"
    ]


def test_an_insert_with_columns_fills_them_by_position_and_a_width_mismatch_is_said() -> None:
    target = [("id", "int"), ("name", "string"), ("city", "string")]
    columns = sql_columns("INSERT INTO t (city, id) SELECT name, id FROM people", _leaves, target=target)
    assert _shown(columns)[0] == {"city": [("people", "name", ID)], "id": [("people", "id", ID)]}
    columns = sql_columns("INSERT INTO t SELECT id FROM people", _leaves, target=target)
    assert columns.unclaimed == ["no column lineage: 1 columns are written into a table of 3"]


def test_a_cast_to_the_type_a_column_has_is_the_column_itself() -> None:
    columns = sql_columns("CREATE TABLE t AS SELECT CAST(id AS INT) AS i, CAST(id AS STRING) AS s FROM people", _leaves)
    assert _shown(columns)[0] == {"i": [("people", "id", ID)], "s": [("people", "id", T)]}


def test_a_cast_to_the_type_a_column_has_stays_a_transformation_where_the_server_writes_the_analyzed_plan() -> None:
    # A save through a data source provider (Kafka, JDBC, Delta) writes its query as analyzed: the cast is in it.
    optimized, analyzed = Walk(_leaves), Walk(_leaves, analyzed=True)
    for walk in (optimized, analyzed):
        walk.types[1] = "int"
    assert (optimized.cast_is_identity(1, "INT"), optimized.cast_is_identity(1, "string")) == (True, False)
    assert analyzed.cast_is_identity(1, "int") is False
    assert optimized.cast_is_identity(2, "int") is False, "a column of unknown type"


def test_a_file_source_in_sql_is_its_path_and_a_star_needs_its_schema() -> None:
    sql = f"INSERT INTO t SELECT * FROM parquet.`{DATA}/src` WHERE b > 1"
    columns = sql_columns(sql, _leaves, target=[("id", "bigint"), ("b", "bigint")])
    assert columns.unclaimed == [
        "columns without lineage (id, b): a * over a source whose schema is not known on the client"
    ]
    known = sql_columns(
        sql,
        lambda read, message: _leaves(read, message, src_columns=(("id", "bigint"), ("b", "bigint"))),
        target=[("id", "bigint"), ("b", "bigint")],
    )
    assert _shown(known) == ({"id": [("src", "id", ID)], "b": [("src", "b", ID)]}, [("src", "b", FILTER)])


def test_tokens_skip_strings_comments_and_quotes() -> None:
    found = tokens("SELECT `a``b`, 'it''s -- no', \"x\" /* c, d */ FROM t;")
    assert [(t.kind.value, t.text) for t in found] == [
        ("word", "SELECT"),
        ("quoted", "a`b"),
        ("symbol", ","),
        ("string", "'it'"),
        ("string", "'s -- no'"),
        ("symbol", ","),
        ("string", '"x"'),
        ("word", "FROM"),
        ("word", "t"),
    ]
    assert written_query("INSERT OVERWRITE TABLE db.t SELECT 1").positional
    assert written_query("INSERT INTO t BY NAME SELECT 1").positional is False


def test_declared_schemas_are_read_from_ddl_and_json() -> None:
    assert declared_columns("id BIGINT, `odd name` STRING NOT NULL, d DECIMAL(10,2), a ARRAY<INT>") == (
        ("id", "bigint"),
        ("odd name", "string"),
        ("d", None),
        ("a", None),
    )
    json_schema = '{"type":"struct","fields":[{"name":"id","type":"integer","nullable":true,"metadata":{}},'
    json_schema += '{"name":"s","type":{"type":"array"},"nullable":true,"metadata":{}}]}'
    assert declared_columns(json_schema) == (("id", "int"), ("s", None))
    assert declared_columns("{not json") is None


# --- DataFrame trees, as real clients sent them ----------------------------------------------------------------


def _tree(version: str, name: str) -> Any:
    return read_request(_requests(version, name)[-1]).input


COLUMN_FIXTURES = VERSIONS


@pytest.mark.parametrize("version", COLUMN_FIXTURES)
def test_grouping_and_aggregates(version: str) -> None:
    columns = dataframe_columns(_tree(version, "columns_grouped"), _leaves)
    fields, dataset = _shown(columns)
    assert {k: v for k, v in fields.items() if k != "sum(id)"} == {
        "bucket": [("t_out", "bucket", ID)],
        "n": [("t_out", "id", MASKED_A)],
        "top": [("t_out", "id", A)],
    }
    assert dataset == [("t_out", "bucket", GROUP_BY)]
    assert columns.unclaimed == ["columns without lineage (the 4th): an expression the server names (give it an alias)"]
    named = dataframe_columns(_tree(version, "columns_grouped"), _leaves, names=["bucket", "n", "top", "sum(id)"])
    assert _shown(named)[0]["sum(id)"] == [("t_out", "id", A)] and named.unclaimed == []


@pytest.mark.parametrize("version", COLUMN_FIXTURES)
def test_new_columns_conditions_renames_drops_and_a_sort(version: str) -> None:
    columns = dataframe_columns(_tree(version, "columns_derived"), _leaves)
    fields, dataset = _shown(columns)
    assert fields == {
        "bkt": [("t_out", "bucket", ID)],
        "k": [("t_out", "bucket", T), ("t_out", "id", CONDITIONAL)],
        "h": [("t_out", "id", MASKED_T)],
    }
    assert dataset == [("t_out", "bucket", SORT), ("t_out", "id", f"{SORT}, {FILTER}")]
    assert columns.unclaimed == []


@pytest.mark.parametrize("version", COLUMN_FIXTURES)
def test_a_left_self_join_by_aliases_infers_the_servers_filter_on_its_right_side(version: str) -> None:
    columns = dataframe_columns(_tree(version, "columns_self_joined"), _leaves)
    fields, dataset = _shown(columns)
    assert fields == {"id": [("t_out", "id", ID)], "rb": [("t_out", "bucket", ID)], "s": [("t_out", "id", T)]}
    assert dataset == [("t_out", "id", f"{JOIN}, {FILTER}")]


@pytest.mark.parametrize("version", COLUMN_FIXTURES)
def test_columns_named_by_their_dataframe_and_a_read_whose_schema_is_not_known(version: str) -> None:
    columns = dataframe_columns(_tree(version, "columns_by_frame"), _leaves)
    fields, dataset = _shown(columns)
    assert fields == {"bucket": [("t_out", "bucket", ID)], "sb": [("src", "b", ID)]}
    assert dataset == [("src", "id", f"{JOIN}, {FILTER}"), ("t_out", "id", f"{JOIN}, {FILTER}")]


@pytest.mark.parametrize("version", COLUMN_FIXTURES)
def test_a_full_join_using_a_column_and_a_name_either_side_may_hold(version: str) -> None:
    tree = _tree(version, "columns_using")
    assert dataframe_columns(tree, _leaves).unclaimed == [
        "no column lineage: which columns are written is not known on the client (a * over a source whose schema "
        "is not known on the client); python.connect.resolveSchemas=true asks the server"
    ]
    columns = dataframe_columns(tree, _leaves, names=["id", "bucket", "b"])
    fields, dataset = _shown(columns)
    assert fields == {
        "id": [("src", "id", f"{T}, {CONDITIONAL}"), ("t_out", "id", f"{T}, {CONDITIONAL}")],
        "b": [("src", "b", ID)],
    }
    assert dataset == [("src", "id", JOIN), ("t_out", "id", JOIN)]  # a full join: no filter is inferred
    assert columns.unclaimed == [
        "columns without lineage (bucket): which side of a join bucket comes from is not known on the client (a "
        "side's schema is not known)"
    ]
    # No column followed: nothing is claimed, the output's dependencies as a whole neither (no columnLineage facet
    # would carry them), and why each column has none is said.
    unfollowed = dataframe_columns(tree, _leaves, names=["bucket"])
    assert _shown(unfollowed) == ({}, [])
    assert unfollowed.unclaimed == columns.unclaimed
    known = dataframe_columns(
        tree, lambda read, message: _leaves(read, message, src_columns=(("id", "bigint"), ("b", "bigint")))
    )
    assert sorted(_shown(known)[0]) == ["b", "bucket", "id"] and known.unclaimed == []


@pytest.mark.parametrize("version", COLUMN_FIXTURES)
def test_sql_expressions_of_a_dataframe(version: str) -> None:
    columns = dataframe_columns(_tree(version, "columns_expressed"), _leaves)
    assert _shown(columns) == (
        {"id": [("t_out", "id", ID)], "twice": [("t_out", "id", T)], "bucket": [("t_out", "bucket", ID)]},
        [("t_out", "bucket", FILTER)],
    )


@pytest.mark.parametrize("version", COLUMN_FIXTURES)
def test_a_window_function_is_not_claimed_and_the_rest_is(version: str) -> None:
    columns = dataframe_columns(_tree(version, "columns_windowed"), _leaves)
    assert _shown(columns)[0] == {"id": [("t_out", "id", ID)]}
    assert columns.unclaimed == ["columns without lineage (rank): a window function is not followed on the client"]


@pytest.mark.parametrize("version", COLUMN_FIXTURES)
def test_a_union_and_distinct(version: str) -> None:
    columns = dataframe_columns(_tree(version, "columns_unioned"), _leaves)
    assert _shown(columns) == (
        {"id": [("t_out", "id", ID)], "bucket": [("t_out", "bucket", ID)]},
        [("t_out", "bucket", GROUP_BY), ("t_out", "id", GROUP_BY)],
    )


@pytest.mark.parametrize("version", COLUMN_FIXTURES)
def test_a_read_with_a_declared_schema_and_one_without(version: str) -> None:
    assert _shown(dataframe_columns(_tree(version, "columns_declared"), _leaves))[0] == {"b": [("src", "b", ID)]}
    # write_path: read parquet (no schema), where, withColumnRenamed(b -> bucket): by name once the server
    # said what is written.
    tree = _tree(version, "write_path")
    assert "python.connect.resolveSchemas=true" in dataframe_columns(tree, _leaves).unclaimed[0]
    columns = dataframe_columns(tree, _leaves, names=["id", "bucket"])
    assert _shown(columns) == ({"id": [("src", "id", ID)], "bucket": [("src", "b", ID)]}, [("src", "id", FILTER)])


@pytest.mark.parametrize("version", COLUMN_FIXTURES)
def test_an_insert_into_fills_the_tables_columns_by_position(version: str) -> None:
    tree = _tree(version, "insert_into")
    columns = dataframe_columns(
        tree, _leaves, names=["id", "bucket"], target=[("key", "bigint"), ("value", "int")], positional=True
    )
    assert _shown(columns)[0] == {"key": [("src", "id", ID)], "value": [("src", "b", ID)]}


def test_a_view_or_a_table_not_named_leaves_its_columns_unclaimed() -> None:
    columns = sql_columns("INSERT INTO t SELECT id, 1 AS one FROM v", _leaves, target=[("id", "int"), ("one", "int")])
    assert columns.fields == {}
    assert columns.unclaimed == ["columns without lineage (id): table v is not followed (its error says why)"]


@pytest.mark.parametrize(
    ("identifier", "parts"),
    [
        ("id", ["id"]),
        ("a.id", ["a", "id"]),
        ("cat.db.t.id", ["cat", "db", "t", "id"]),
        ("`odd.name`", ["odd.name"]),
        ("a.`b``c`.d", ["a", "b`c", "d"]),
        ("", [""]),
    ],
)
def test_a_column_name_in_its_parts(identifier: str, parts: list[str]) -> None:
    from spark_lineage.connect.client.columns import identifier_parts

    assert identifier_parts(identifier) == parts
