"""What kind of SQL statement a Spark Connect client sends, read from its tokens: the one place SQL text is
classified (its job's name, whether it moves tables, whether Spark plans it adaptively, what openlineage-sql is
given).

The scanner skips what SQL skips (strings, quoted names, comments), so a keyword inside a string literal
(``WHERE note = 'join'``) is no keyword.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum


class TokenKind(Enum):
    WORD = "word"
    QUOTED = "quoted"
    """A name in backticks (its text without them)."""
    STRING = "string"
    NUMBER = "number"
    SYMBOL = "symbol"


KEYWORDS = frozenset(
    {
        "all", "and", "as", "asc", "between", "by", "case", "collate", "desc", "distinct", "div", "else", "end",
        "escape", "exists", "false", "first", "from", "group", "having", "ilike", "in", "interval", "is", "last",
        "like", "limit", "not", "null", "nulls", "or", "order", "regexp", "rlike", "select", "then", "true",
        "when", "where",
    }
)  # fmt: skip
"""Words that are no column's name where they stand (``first``/``last`` followed by ``(`` are functions)."""


@dataclass(frozen=True)
class Token:
    kind: TokenKind
    text: str

    @property
    def word(self) -> str:
        """A bare word in lower case (a keyword's spelling); empty for anything else."""
        return self.text.lower() if self.kind is TokenKind.WORD else ""

    @property
    def is_name(self) -> bool:
        return self.kind is TokenKind.QUOTED or (self.kind is TokenKind.WORD and self.word not in KEYWORDS)


_SCANNED = re.compile(
    r"""(?P<space>\s+|--[^\n]*|/\*.*?\*/)
    |(?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
    |(?P<quoted>`(?:[^`]|``)*`)
    |(?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?[a-zA-Z]*)
    |(?P<word>[A-Za-z_][A-Za-z_0-9]*)
    |(?P<symbol>->|<=>|<=|>=|!=|<>|==|\|\||::|.)""",
    re.VERBOSE | re.DOTALL,
)


def tokens(text: str) -> list[Token]:
    """SQL text as tokens, without spaces, comments and the ``;`` that ends it (scanned once: an action's SQL is
    classified, named and analyzed by several modules)."""
    return list(_scanned(text))


@functools.lru_cache(maxsize=64)
def _scanned(text: str) -> tuple[Token, ...]:
    found = []
    for match in _SCANNED.finditer(text):
        kind = match.lastgroup
        value = match.group()
        if kind == "space":
            continue
        if kind == "quoted":
            found.append(Token(TokenKind.QUOTED, value[1:-1].replace("``", "`")))
        else:
            found.append(Token(TokenKind(kind or "symbol"), value))
    while found and found[-1].text == ";":
        found.pop()
    return tuple(found)


class StatementKind(Enum):
    """What a statement does, as far as lineage on the client cares."""

    CREATE_AS_SELECT = "create as select"
    """``CREATE [OR REPLACE] TABLE … AS SELECT`` (and ``REPLACE TABLE … AS SELECT``)."""
    CREATE = "create"
    """Any other ``CREATE`` (a table without a query, a view, a function, a namespace)."""
    INSERT = "insert"
    DROP = "drop"
    ALTER = "alter"
    QUERY = "query"
    """``SELECT``, ``WITH``, ``FROM …``: rows, no write."""
    OTHER = "other"


QUERY_STARTS = frozenset({"select", "with", "from"})


@dataclass(frozen=True)
class Statement:
    """A statement's kind, whether it replaces a table, and where its query starts (a CTAS, an INSERT)."""

    kind: StatementKind
    replaces: bool = False
    """``CREATE OR REPLACE``, ``REPLACE``: the table it names is another one afterwards."""
    query_at: int | None = None
    """The position of the first token of the query it writes (a CTAS's ``SELECT``), if it has one."""
    overwrites: bool = False
    """``INSERT OVERWRITE``: what it writes replaces the table's rows (or its partitions')."""

    @property
    def moves_tables(self) -> bool:
        """Whether the tables it names may be elsewhere afterwards (dropped, altered, replaced)."""
        return self.kind in (StatementKind.DROP, StatementKind.ALTER) or self.replaces


def classify(found: Sequence[Token] | str) -> Statement:
    """What a statement is (its text, or its :func:`tokens`)."""
    found = tokens(found) if isinstance(found, str) else found
    words = [token.word for token in found[:3]]
    first = words[0] if words else ""
    replaces = first == "replace" or words[:3] == ["create", "or", "replace"]
    if first in ("create", "replace"):
        query_at = _query_after_as(found)
        if query_at is not None:
            return Statement(StatementKind.CREATE_AS_SELECT, replaces, query_at)
        return Statement(StatementKind.CREATE, replaces)
    kinds = {"insert": StatementKind.INSERT, "drop": StatementKind.DROP, "alter": StatementKind.ALTER}
    if first in kinds:
        return Statement(kinds[first], overwrites=words[:2] == ["insert", "overwrite"])
    if first in QUERY_STARTS or (found and found[0].text == "("):
        return Statement(StatementKind.QUERY, query_at=0)
    return Statement(StatementKind.OTHER)


def _query_after_as(found: Sequence[Token]) -> int | None:
    """Where the query of a ``CREATE … AS <query>`` starts: after its ``AS`` at the top level (not one inside
    a column list or options), when a query follows."""
    depth = 0
    for at, token in enumerate(found):
        depth += (token.text == "(") - (token.text == ")")
        if depth == 0 and token.word == "view":
            return None
        if depth == 0 and token.word == "as" and at + 1 < len(found):
            following = found[at + 1]
            if following.word in QUERY_STARTS or following.text == "(":
                return at + 1
    return None


_EXCHANGING_WORDS = frozenset({"join", "distinct", "intersect", "except", "minus", "over"})
_EXCHANGING_PAIRS = frozenset(
    {("group", "by"), ("order", "by"), ("sort", "by"), ("cluster", "by"), ("distribute", "by")}
)


def exchanges(text: str) -> bool:
    """Whether SQL needs data moved between partitions (a join, a grouping, a global sort, a distinct, a set
    operation other than ``UNION ALL``, a window): Spark then plans it adaptively."""
    words = [token.word for token in tokens(text)]
    for at, word in enumerate(words):
        following = words[at + 1] if at + 1 < len(words) else ""
        if word in _EXCHANGING_WORDS or (word, following) in _EXCHANGING_PAIRS:
            return True
        if word == "union" and following != "all":
            return True
    return False
