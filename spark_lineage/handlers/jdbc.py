"""Databases read and written over JDBC.

Reads are ``JDBCRelation`` scans: a ``dbtable`` option that is a table name is that table; a ``query`` (or a
``dbtable`` subquery) is parsed with openlineage-sql, the OpenLineage project's SQL parser, and each table it
reads is an input, with the columns each output column comes from. Writes are saves through Spark's JDBC
provider. Tables are named by :func:`spark_lineage.naming.jdbc_dataset`; the URL's credentials and
parameters appear nowhere.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from spark_lineage import naming
from spark_lineage.extras import install_hint
from spark_lineage.handlers.base import NodeHandler, lowercase_options, schema_fields
from spark_lineage.handlers.datasources import DataSourceProvider, data_source_provider
from spark_lineage.handlers.registry import register
from spark_lineage.lineage import AnalysisContext, DatasetLineage, InputColumn, SchemaField
from spark_lineage.naming import DatasetIdentifier
from spark_lineage.plan import CapturedNode, Probe

_OPTIONS = frozenset({"dbtable", "query", "databasename"})
_SUBPROTOCOL = re.compile(r"^jdbc:([^:]+):")
_PLAIN_TABLE = re.compile(r"\S\s+\S")


@register
class JDBCRelationHandler(NodeHandler):
    """The database tables a JDBC scan reads (probed as a ``LogicalRelation``'s relation)."""

    class_names = ("JDBCRelation",)
    probes = {
        "url": Probe(("jdbcOptions", "url")),
        "options": Probe(("jdbcOptions", "parameters"), "map", keys=_OPTIONS),
        "tableOrQuery": Probe(("jdbcOptions", "tableOrQuery")),
        "schema": Probe(("schema", "json")),
    }

    def inputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        read = _read(node)
        if read.error:
            ctx.errors.append(read.error)
        return [DatasetLineage(table, schema=read.schemas.get(table)) for table in read.tables]

    def column_sources(
        self, node: CapturedNode, datasets: list[DatasetLineage]
    ) -> Mapping[str, list[InputColumn]] | None:
        return _read(node).columns


@data_source_provider
class JdbcProvider(DataSourceProvider):
    """``df.write.jdbc(url, table)`` and ``format("jdbc").save()``: the table ``dbtable`` names; and, for a Spark
    Connect client, what a JDBC read's options name."""

    providers = ("JdbcRelationProvider",)
    formats = ("jdbc",)
    option_keys = frozenset({"url", "dbtable", "databasename"})
    read_option_keys = frozenset({"url", *_OPTIONS})

    def dataset(
        self, options: Mapping[str, str], schema: list[SchemaField] | None, errors: list[str]
    ) -> DatasetLineage | None:
        url, table = options.get("url"), options.get("dbtable")
        if not url or not table:
            errors.append("a JDBC save without url or dbtable: its output is not reported")
            return None
        return DatasetLineage(naming.jdbc_dataset(url, table.strip(), _properties(options)), schema=schema)

    def job_suffix(self, options: Mapping[str, str]) -> str | None:
        table = options.get("dbtable")
        return table.strip() if table else None

    def read_datasets(self, options: Mapping[str, str], errors: list[str]) -> list[DatasetIdentifier] | None:
        """As a ``JDBCRelation`` of the same options reads: Spark makes a ``query`` the subquery
        ``(<query>) SPARK_GEN_SUBQ_<n>``, which is parsed as the driver side parses it."""
        url, table, query = options.get("url"), options.get("dbtable"), options.get("query")
        if not url or not (table or query):
            errors.append("a JDBC read without url, or without dbtable or query: its inputs are not reported")
            return []
        read = _jdbc_read(url, table, table or f"({query}) SPARK_GEN_SUBQ_0", options.get("databasename"), None)
        if read.error:
            errors.append(read.error)
        return list(read.tables)


@dataclass
class _JdbcRead:
    tables: list[DatasetIdentifier] = field(default_factory=list)
    schemas: dict[DatasetIdentifier, list[SchemaField]] = field(default_factory=dict)
    columns: dict[str, list[InputColumn]] = field(default_factory=dict)
    error: str | None = None


def _read(node: CapturedNode) -> _JdbcRead:
    options = lowercase_options(node)
    return _jdbc_read(
        node.get("url") or "",
        options.get("dbtable"),
        node.get("tableOrQuery") or "",
        options.get("databasename"),
        node.get("schema"),
    )


@lru_cache(maxsize=256)
def _jdbc_read(
    url: str, dbtable: str | None, table_or_query: str, database_name: str | None, schema_json: str | None
) -> _JdbcRead:
    """What a JDBC scan reads, as openlineage-spark works it out: a plain ``dbtable`` is that table, with
    every column; anything else is SQL to parse (``select * from <dbtable>``, or the ``query``)."""
    properties = {"databaseName": database_name} if database_name else {}
    schema = schema_fields(schema_json) or []
    if dbtable and not _PLAIN_TABLE.search(dbtable.strip()):
        table = naming.jdbc_dataset(url, dbtable.strip(), properties)
        return _JdbcRead(
            [table], {table: schema}, {column.name: [InputColumn(table, column.name)] for column in schema}
        )
    if dbtable and not dbtable.lstrip().startswith("("):
        sql = "select * from " + dbtable
    else:
        sql = table_or_query[table_or_query.find("(") + 1 : table_or_query.rfind(")")]
    return _parsed_read(url, sql, properties, schema)


def _parsed_read(url: str, sql: str, properties: Mapping[str, str], schema: list[SchemaField]) -> _JdbcRead:
    try:
        from openlineage_sql import parse
    except ImportError:
        return _JdbcRead(error=f"reading a JDBC query needs openlineage-sql ({install_hint('spark')})")
    found = _SUBPROTOCOL.match(url)
    try:
        meta = parse([sql], dialect=found.group(1) if found else None)
    except Exception as error:  # noqa: BLE001 - the parser raises its own error types
        return _JdbcRead(error=f"the JDBC query could not be parsed: {error}")
    if meta is None or meta.errors or not meta.in_tables:
        reason = "; ".join(str(e.message) for e in meta.errors) if meta is not None and meta.errors else "no table"
        return _JdbcRead(error=f"the JDBC query could not be read ({reason}): its inputs are not reported")
    tables = {t.qualified_name: naming.jdbc_dataset(url, t.qualified_name, properties) for t in meta.in_tables}
    read = _JdbcRead(list(tables.values()))
    if meta.column_lineage:
        # Each table's schema holds the columns that flow from it, with the type of the column they become.
        read.schemas = {table: [] for table in read.tables}
        by_output: dict[str, list[tuple[DatasetIdentifier, str]]] = {}
        for lineage in meta.column_lineage:
            for origin in lineage.lineage:
                table = tables.get(origin.origin.qualified_name) if origin.origin is not None else None
                if table is not None:
                    by_output.setdefault(_unquoted(lineage.descendant.name), []).append((table, origin.name))
        for column in schema:
            for table, name in by_output.get(column.name, []):
                read.columns.setdefault(column.name, []).append(InputColumn(table, name))
                read.schemas[table].append(SchemaField(name, column.type, column.fields))
    elif len(read.tables) == 1:
        (table,) = read.tables
        read.schemas[table] = schema
        read.columns = {column.name: [InputColumn(table, column.name)] for column in schema}
    return read


def _unquoted(name: str) -> str:
    return name[1:-1] if len(name) > 1 and name[0] == name[-1] and name[0] in '"`' else name


def _properties(options: Mapping[str, str]) -> dict[str, str]:
    database = options.get("databasename")
    return {"databaseName": database} if database else {}
