"""Column lineage of the SQL a Spark Connect client sends, where the statement is simple enough to be sure of.

openlineage-sql names a statement's tables (:mod:`~spark_lineage.connect.client.datasets`) but does not type
the column lineage it finds (no ``IDENTITY`` / ``TRANSFORMATION`` / ``AGGREGATION``, no ``FILTER`` or
``GROUP_BY`` of the whole output), which the server side reports. This module reads the one shape it can type
for certain: ``SELECT [DISTINCT] items FROM one_table [alias] [WHERE …] [GROUP BY …] [ORDER BY …] [LIMIT …]``,
alone, or inserted (``INSERT INTO|OVERWRITE t [(columns)] SELECT …``) or created from
(``CREATE [OR REPLACE] TABLE t … AS SELECT …``). Each select item is a column (``IDENTITY``), an aggregate of
columns (``AGGREGATION``, masked for ``count``), a hash of columns (masked ``TRANSFORMATION``), or any other
expression of columns (``TRANSFORMATION``); ``WHERE``, ``GROUP BY`` and ``ORDER BY`` columns are dependencies of
the whole output. Anything else (joins, subqueries, ``WITH``, set operations, ``CASE``, windows, lambdas) is
not claimed, and the reason is said.

The tokens are read by a small scanner (strings, quoted names and comments are skipped as SQL does); the
columns are resolved in the frames of :mod:`~spark_lineage.connect.client.frames`, like a DataFrame's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from spark_lineage.columns.transformations import (
    FILTER,
    GROUP_BY,
    IDENTITY,
    INDIRECT,
    MASKED_TRANSFORMATION,
    SORT,
    TRANSFORMATION,
    compose,
)
from spark_lineage.connect.client.datasets import FILE_FORMATS
from spark_lineage.connect.client.frames import (
    AGGREGATES,
    CONDITIONALS,
    MASKING,
    Column,
    Frame,
    Listed,
    Qualified,
    Walk,
    function_steps,
    spark_type,
)
from spark_lineage.connect.client.requests import ReadSource
from spark_lineage.connect.client.statements import StatementKind, Token, TokenKind, classify, tokens
from spark_lineage.errors import UnclaimedColumnError
from spark_lineage.lineage import Transformation

UNFOLLOWED_CLAUSES = frozenset(
    {
        "join", "inner", "left", "right", "full", "cross", "natural", "semi", "anti", "union", "intersect",
        "except", "minus", "window", "lateral", "qualify", "pivot", "unpivot", "tablesample", "cluster",
        "distribute", "sort", "having", "offset",
    }
)  # fmt: skip
"""Clauses of a query this module does not follow (their query's columns are not claimed)."""
_CLAUSES = frozenset({"from", "where", "group", "order", "limit"}) | UNFOLLOWED_CLAUSES
_UNTYPED = {"case": "a CASE expression", "over": "a window function", "interval": "an interval", "select": "a subquery"}


# --- statements --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WrittenQuery:
    """What a SQL command writes: its query, and how its columns meet the table's."""

    query: list[Token] | None
    """The query whose rows are written; ``None`` when the statement is not followed (see ``unfollowed``)."""
    unfollowed: str = ""
    columns: list[str] = field(default_factory=list)
    """``INSERT INTO t (a, b)``: the table's columns the query's fill, in order."""
    positional: bool = False
    """The query's columns fill the table's by position (``INSERT``), not by name."""


def written_query(text: str) -> WrittenQuery:
    """The query a SQL command writes, as far as this module follows it."""
    found = tokens(text)
    classified = classify(found)
    if classified.kind is StatementKind.INSERT:
        return _insert(found)
    if classified.query_at is not None:
        return WrittenQuery(found[classified.query_at :])
    if classified.kind is StatementKind.CREATE:
        return WrittenQuery(None, "a CREATE that writes no query's rows (a view, a table without AS SELECT)")
    first = found[0].word if found else ""
    return WrittenQuery(None, f"a {first.upper() or 'blank'} statement")


def _insert(found: list[Token]) -> WrittenQuery:
    words = [token.word for token in found[:4]]
    if "directory" in words or "local" in words:
        return WrittenQuery(None, "an INSERT OVERWRITE DIRECTORY")
    at = 2 + (words[2:3] == ["table"])
    at = _after_name(found, at)
    if at < len(found) and found[at].word == "partition":
        return WrittenQuery(None, "an INSERT with a PARTITION clause")
    if at + 1 < len(found) and found[at].word == "by" and found[at + 1].word == "name":
        return WrittenQuery(found[at + 2 :])
    columns: list[str] = []
    if at < len(found) and found[at].text == "(" and at + 1 < len(found) and found[at + 1].word != "select":
        close = _closing(found, at)
        columns = [token.text for token in found[at + 1 : close] if token.is_name]
        at = close + 1
    return WrittenQuery(found[at:], columns=columns, positional=True)


def _after_name(found: list[Token], at: int) -> int:
    """The position after a (dotted) table name starting at ``at``."""
    at += 1
    while at + 1 < len(found) and found[at].text == ".":
        at += 2
    return at


def _closing(found: Sequence[Token], at: int) -> int:
    """The position of the ``)`` closing the ``(`` at ``at`` (the end, if none does)."""
    depth = 0
    for position in range(at, len(found)):
        depth += (found[position].text == "(") - (found[position].text == ")")
        if depth == 0:
            return position
    return len(found)


# --- queries -----------------------------------------------------------------------------------------------------


def query_frame(query: str | list[Token], walk: Walk) -> Frame:
    """The columns a simple query makes (raises :class:`UnclaimedColumnError` for any other query)."""
    found = tokens(query) if isinstance(query, str) else query
    clauses = _clauses(found)
    select = clauses.pop("select", None)
    if select is None:
        raise UnclaimedColumnError("SQL that is no SELECT is not followed on the client")
    frame = _source(clauses.pop("from", []), walk)
    distinct = bool(select) and select[0].word in ("distinct", "all")
    if distinct:
        distinct = select[0].word == "distinct"
        select = select[1:]
    items = [_item(part, frame, walk) for part in _split(select)]
    columns = [column for item in items for column in item]
    _whole(clauses.pop("where", []), frame, walk, FILTER, "WHERE", ())
    _whole(_by(clauses.pop("group", [])), frame, walk, GROUP_BY, "GROUP BY", columns)
    _whole(_by(clauses.pop("order", [])), frame, walk, SORT, "ORDER BY", columns)
    clauses.pop("limit", None)
    if distinct:
        pseudo = walk.graph.new_dataset_node()
        for column in columns:
            walk.graph.add_edge(pseudo, column.node, GROUP_BY)
    return Listed(columns)


def _clauses(found: list[Token]) -> dict[str, list[Token]]:
    """A query's clauses at its top level, by their first word; raises for a clause this module does not
    follow."""
    if not found or found[0].word != "select":
        raise UnclaimedColumnError(f"SQL starting {found[0].text if found else ''!r} is not followed on the client")
    clauses: dict[str, list[Token]] = {}
    current = "select"
    clauses[current] = []
    depth = 0
    for token in found[1:]:
        if depth == 0 and token.word in _CLAUSES:
            if token.word in UNFOLLOWED_CLAUSES:
                raise UnclaimedColumnError(f"SQL with {token.word.upper()} is not followed on the client")
            if token.word in clauses:
                raise UnclaimedColumnError(f"SQL with two {token.word.upper()} clauses is not followed on the client")
            current = token.word
            clauses[current] = []
            continue
        depth += (token.text == "(") - (token.text == ")")
        clauses[current].append(token)
    return clauses


def _source(found: list[Token], walk: Walk) -> Frame:
    """The one table a query reads (``t``, ``db.t``, ``parquet.`/path```), under its alias if it has one."""
    if not found:
        return Listed([])
    names = [found[0]]
    at = 1
    while at + 1 < len(found) and found[at].text == "." and found[at + 1].kind in (TokenKind.WORD, TokenKind.QUOTED):
        names.append(found[at + 1])
        at += 2
    rest = found[at:]
    if rest and rest[0].word == "as":
        rest = rest[1:]
    if len(rest) > 1 or (rest and not rest[0].is_name) or any(t.kind is TokenKind.STRING for t in names):
        raise UnclaimedColumnError("SQL reading anything but one table is not followed on the client")
    if len(names) == 2 and names[0].word in FILE_FORMATS and names[1].kind is TokenKind.QUOTED:
        frame = walk.leaf(ReadSource(format=names[0].word, paths=(names[1].text,)))
    else:
        frame = walk.leaf(ReadSource(table=".".join(t.text for t in names)))
    return Qualified(frame, rest[0].text) if rest else frame


def _split(found: list[Token]) -> list[list[Token]]:
    """Tokens split at the commas of their top level."""
    parts: list[list[Token]] = [[]]
    depth = 0
    for token in found:
        depth += (token.text == "(") - (token.text == ")")
        if depth == 0 and token.text == ",":
            parts.append([])
        else:
            parts[-1].append(token)
    return [part for part in parts if part]


def _by(found: list[Token]) -> list[list[Token]]:
    """``GROUP BY`` / ``ORDER BY``'s expressions (after ``BY``), without ``ASC``/``DESC``/``NULLS …``."""
    if found and found[0].word == "by":
        found = found[1:]
    return [
        [t for t in part if t.word not in ("asc", "desc", "nulls", "first", "last") or t.kind is TokenKind.QUOTED]
        for part in _split(found)
    ]


def _item(found: list[Token], frame: Frame, walk: Walk) -> list[Column]:
    """The columns one select item makes."""
    expression, alias = split_alias(found)
    if expression and expression[-1].text == "*":
        qualifier = expression[-3].text.lower() if len(expression) >= 3 else None
        columns = frame.all_columns("a *")
        return [c for c in columns if qualifier is None or qualifier in c.qualifiers]
    name = alias or (expression[-1].text if _is_column(expression) else None)
    if _is_column(expression) and alias is None:
        node = walk.node()
        try:
            node = frame.resolve(_column_parts(expression))
        except UnclaimedColumnError as error:
            walk.unclaim(node, error)
        return [Column(name, node)]
    node = walk.node()
    try:
        trace_tokens(expression, node, frame, walk, IDENTITY)
    except UnclaimedColumnError as error:
        walk.unclaim(node, error)
    return [Column(name, node)]


def _whole(
    parts: list[Token] | list[list[Token]],
    frame: Frame,
    walk: Walk,
    kind: Transformation,
    clause: str,
    items: Sequence[Column],
) -> None:
    """A clause whose columns decide the whole output; a ``GROUP BY``/``ORDER BY`` may name a select item by
    its alias or its position."""
    expressions = [parts] if parts and isinstance(parts[0], Token) else parts
    if not expressions:
        return
    pseudo = walk.graph.new_dataset_node()
    for expression in expressions:
        assert isinstance(expression, list)
        try:
            item = _select_item(expression, items)
            if item is not None:
                walk.graph.add_edge(pseudo, item.node, kind)
            else:
                trace_tokens(expression, pseudo, frame, walk, kind)
        except UnclaimedColumnError as error:
            walk.unclaimed_dataset.append(f"{clause}: {error}")


def _select_item(expression: list[Token], items: Sequence[Column]) -> Column | None:
    if len(expression) == 1 and expression[0].kind is TokenKind.NUMBER and expression[0].text.isdigit():
        position = int(expression[0].text)
        if not 0 < position <= len(items):
            raise UnclaimedColumnError(f"position {position} is no select item")
        return items[position - 1]
    if len(expression) == 1 and expression[0].is_name:
        named = [c for c in items if c.named(expression[0].text)]
        return named[0] if len(named) == 1 else None
    return None


def split_alias(found: list[Token]) -> tuple[list[Token], str | None]:
    """A select item's expression and its alias (``expr AS name`` or ``expr name``), if it has one."""
    if len(found) >= 3 and found[-2].word == "as" and found[-1].is_name:
        return found[:-2], found[-1].text
    if (
        len(found) >= 2
        and found[-1].is_name
        and found[-2].text != "."
        and (
            found[-2].text == ")"
            or found[-2].kind in (TokenKind.STRING, TokenKind.NUMBER, TokenKind.QUOTED)
            or found[-2].is_name
        )
    ):
        return found[:-1], found[-1].text
    return found, None


def expression_name(text: str) -> str | None:
    """The name of the column a SQL expression (``selectExpr``'s) makes, where the client knows it."""
    expression, alias = split_alias(tokens(text))
    if alias is not None:
        return alias
    return expression[-1].text if _is_column(expression) else None


def _is_column(found: list[Token]) -> bool:
    """Whether tokens are one column's (dotted) name."""
    return (
        len(found) % 2 == 1
        and all(token.is_name for token in found[::2])
        and all(token.text == "." for token in found[1::2])
        and bool(found)
    )


def _column_parts(found: list[Token]) -> list[str]:
    return [token.text for token in found[::2]]


# --- expressions -------------------------------------------------------------------------------------------------


@dataclass
class _Scan:
    """What an expression's tokens read and call."""

    columns: list[list[str]] = field(default_factory=list)
    functions: list[str] = field(default_factory=list)
    untyped: str | None = None
    """Why its transformation cannot be typed (a CASE, a window, a subquery, ...), if it cannot."""


def _scan(found: list[Token]) -> _Scan:
    scan = _Scan()
    at = 0
    while at < len(found):
        token = found[at]
        if token.text == "->":
            scan.untyped = scan.untyped or "a lambda function"
        if token.word in _UNTYPED:
            scan.untyped = scan.untyped or _UNTYPED[token.word]
        if token.kind not in (TokenKind.WORD, TokenKind.QUOTED):
            at += 1
            continue
        parts, end = [token.text], at
        while (
            end + 2 < len(found)
            and found[end + 1].text == "."
            and found[end + 2].kind
            in (
                TokenKind.WORD,
                TokenKind.QUOTED,
            )
        ):
            parts.append(found[end + 2].text)
            end += 2
        following = found[end + 1] if end + 1 < len(found) else None
        previous = found[at - 1] if at > 0 else None
        if following is not None and following.text == "(" and token.kind is TokenKind.WORD and len(parts) == 1:
            scan.functions.append(token.word)
        elif previous is not None and previous.word == "as":
            pass  # a type (CAST(x AS INT))
        elif following is not None and following.kind is TokenKind.STRING and len(parts) == 1:
            pass  # a typed literal (DATE '2024-01-01')
        elif token.is_name or len(parts) > 1:
            scan.columns.append(parts)
        at = end + 1
    return scan


def trace_tokens(found: list[Token], target: int, frame: Frame, walk: Walk, path: Transformation) -> None:
    """Add the edges from ``target`` to what an expression reads, typed as the server's column lineage types
    it; raises :class:`UnclaimedColumnError` where that type is not certain."""
    scan = _scan(found)
    if path.type == INDIRECT:  # the whole output's dependency: every column it reads, whatever the expression
        if scan.untyped in ("a subquery", "a lambda function"):
            raise UnclaimedColumnError(f"{scan.untyped} in SQL is not followed on the client")
        step = path
    else:
        step = compose(path, _step(found, scan, frame, walk))
    for parts in scan.columns:
        node = frame.resolve(parts)
        walk.graph.add_edge(target, node, step)
        if step == IDENTITY and node in walk.types:
            walk.types.setdefault(target, walk.types[node])


def _step(found: list[Token], scan: _Scan, frame: Frame, walk: Walk) -> Transformation:
    if scan.untyped is not None:
        raise UnclaimedColumnError(f"{scan.untyped} in SQL is not typed on the client")
    functions = set(scan.functions)
    if functions & CONDITIONALS:
        raise UnclaimedColumnError(f"{sorted(functions & CONDITIONALS)[0]}() in SQL is not typed on the client")
    single = len(scan.functions) == 1 and _is_call(found)
    if functions & (AGGREGATES | MASKING):
        if not single:
            raise UnclaimedColumnError("an aggregate or hash within other functions in SQL is not typed on the client")
        name = scan.functions[0]
        if name in AGGREGATES:
            return function_steps(name, 1, IDENTITY)[0][0]
        return MASKED_TRANSFORMATION
    if not scan.functions and _is_column(found):
        return IDENTITY
    if single and scan.functions[0] == "cast" and len(scan.columns) == 1:
        to = found[-2].text.lower() if len(found) >= 2 else ""
        if walk.cast_is_identity(frame.resolve(scan.columns[0]), to):
            return IDENTITY
    return TRANSFORMATION


def _is_call(found: list[Token]) -> bool:
    """Whether tokens are one function call, ``f(…)``, and nothing else."""
    return (
        len(found) >= 3
        and found[0].kind is TokenKind.WORD
        and found[1].text == "("
        and _closing(found, 1) == len(found) - 1
    )


def trace_expression(text: str, target: int, frame: Frame, walk: Walk, path: Transformation) -> None:
    """A DataFrame's SQL expression (``F.expr``, ``selectExpr``, ``filter("…")``): as a select item's."""
    expression, _ = split_alias(tokens(text))
    trace_tokens(expression, target, frame, walk, path)


def declared_columns(schema: str) -> tuple[tuple[str, str | None], ...] | None:
    """The columns (name, type) of a schema a read declares: a ``StructType``'s JSON, or DDL (``id INT, name
    STRING``); ``None`` for one this module cannot read."""
    text = schema.strip()
    if text.startswith("{"):
        try:
            fields = json.loads(text).get("fields")
        except (ValueError, AttributeError):
            return None
        if not isinstance(fields, list):
            return None
        return tuple(
            (str(f.get("name")), spark_type(f["type"]) if isinstance(f.get("type"), str) else None)
            for f in fields
            if isinstance(f, dict)
        )
    columns = []
    for part in _split(tokens(text.removeprefix("struct<").removesuffix(">") if text.startswith("struct<") else text)):
        if not part or part[0].kind not in (TokenKind.WORD, TokenKind.QUOTED):
            return None
        at = 1 + (len(part) > 1 and part[1].text == ":")
        following = part[at + 1].text if at + 1 < len(part) else ""
        simple = at < len(part) and part[at].kind is TokenKind.WORD and following not in ("(", "<")
        columns.append((part[0].text, spark_type(part[at].text) if simple else None))
    return tuple(columns) or None
