"""The one classifier of the SQL a Spark Connect client sends (``spark_lineage.connect.client.statements``)."""

from __future__ import annotations

import pytest

from spark_lineage.connect.client.statements import StatementKind, classify, exchanges, tokens


@pytest.mark.parametrize(
    ("sql", "kind", "replaces", "query"),
    [
        ("CREATE TABLE t USING parquet AS SELECT 1", StatementKind.CREATE_AS_SELECT, False, "SELECT"),
        (
            "create or replace table c.db.t as with x as (select 1) select * from x",
            StatementKind.CREATE_AS_SELECT,
            True,
            "with",
        ),
        ("REPLACE TABLE c.db.t AS (SELECT 1)", StatementKind.CREATE_AS_SELECT, True, "("),
        (
            "CREATE TABLE t (a INT, b STRING) USING parquet OPTIONS ('as' 'x') AS SELECT 1, 'a'",
            StatementKind.CREATE_AS_SELECT,
            False,
            "SELECT",
        ),
        ("CREATE TABLE t (a INT) USING parquet", StatementKind.CREATE, False, None),
        ("CREATE OR REPLACE TEMP VIEW v AS SELECT 1", StatementKind.CREATE, True, None),
        ("  -- a comment\n INSERT INTO t SELECT 1", StatementKind.INSERT, False, None),
        ("DROP TABLE t", StatementKind.DROP, False, None),
        ("ALTER TABLE t RENAME TO u", StatementKind.ALTER, False, None),
        ("WITH x AS (SELECT 1) SELECT * FROM x", StatementKind.QUERY, False, "WITH"),
        ("MERGE INTO t USING s ON t.id = s.id", StatementKind.OTHER, False, None),
        ("", StatementKind.OTHER, False, None),
    ],
)
def test_statements_are_told_by_their_tokens(sql: str, kind: StatementKind, replaces: bool, query: str | None) -> None:
    statement = classify(sql)
    assert (statement.kind, statement.replaces) == (kind, replaces)
    assert (tokens(sql)[statement.query_at].text if statement.query_at is not None else None) == query
    assert statement.moves_tables == (replaces or kind in (StatementKind.DROP, StatementKind.ALTER))


@pytest.mark.parametrize(
    ("sql", "exchanging"),
    [
        ("SELECT a FROM t JOIN u ON t.id = u.id", True),
        ("SELECT a, count(*) FROM t GROUP BY a", True),
        ("SELECT DISTINCT a FROM t", True),
        ("SELECT a FROM t UNION SELECT a FROM u", True),
        ("SELECT a FROM t UNION ALL SELECT a FROM u", False),
        ("SELECT a, row_number() OVER (ORDER BY a) FROM t", True),
        ("SELECT a FROM t WHERE note = 'join us' -- group by", False),
        ("SELECT `order by` FROM t", False),
    ],
)
def test_sql_that_moves_data_between_partitions(sql: str, exchanging: bool) -> None:
    assert exchanges(sql) is exchanging
