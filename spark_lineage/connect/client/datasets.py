"""The datasets a Spark Connect client's action names, as the driver side names them.

Paths are named by :mod:`spark_lineage.naming`, and what a read or save through a data source provider (JDBC,
Kafka, Delta) names by the driver side's :class:`~spark_lineage.handlers.datasources.DataSourceProvider` for that
format, from the same options, so that what a client reads has the identity the server would give it. Tables
are names as the user wrote them (``t``, ``db.t``, ``cat.db.t``): the server's catalog knows where they live,
and a table's dataset is its location there, so they are left to be resolved (:attr:`ActionDatasets.tables`).
A SQL command's tables come from openlineage-sql. What cannot be named honestly from the client is said, per
read or write, in :attr:`ActionDatasets.unnamed` (it goes into the run's ``extractionError`` facet).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from spark_lineage import naming
from spark_lineage.connect.client.requests import ClientAction, ReadSource, WriteTarget
from spark_lineage.connect.client.statements import StatementKind, classify
from spark_lineage.extras import install_hint
from spark_lineage.handlers.datasources import provider_for_format
from spark_lineage.lineage import DatasetLineage
from spark_lineage.naming import DatasetIdentifier

FILE_FORMATS = frozenset({"parquet", "csv", "json", "orc", "text", "avro", "binaryfile", "xml", "delta"})
"""Formats whose datasets are the paths they read or write."""
FILE_WRITES = FILE_FORMATS - {"delta", "binaryfile"}
"""The formats of :data:`FILE_FORMATS` Spark writes with its own file command (Delta has a command of its own;
``binaryFile`` is read only)."""


@dataclass
class ActionDatasets:
    """What an action reads and writes: named datasets, and tables still to be resolved."""

    inputs: list[DatasetIdentifier] = field(default_factory=list)
    outputs: list[DatasetIdentifier] = field(default_factory=list)
    input_tables: list[str] = field(default_factory=list)
    """Tables read, by the name the user wrote: their datasets are their locations in the server's catalog."""
    output_tables: list[str] = field(default_factory=list)
    unnamed: list[str] = field(default_factory=list)
    """What was read or written but cannot be named from the client, and why."""
    facets: dict[DatasetIdentifier, dict[str, Any]] = field(default_factory=dict)
    """The dataset facets a provider gave a dataset it named, as on the driver side (a Delta table's ``storage``)."""
    by_read: dict[int, tuple[ReadSource, list[DatasetIdentifier]]] = field(default_factory=dict)
    """The datasets each data-source read of the action names, by the read's ``id`` (with the read: ids are
    reused once an object is gone): what the action's column lineage looks up instead of naming them again."""

    def lineage(self, identifiers: list[DatasetIdentifier]) -> list[DatasetLineage]:
        """The datasets ``identifiers`` name (of :attr:`inputs` or :attr:`outputs`), each with its facets."""
        return [DatasetLineage(i, extra_facets=dict(self.facets.get(i, {}))) for i in identifiers]


def action_datasets(action: ClientAction) -> ActionDatasets:
    """The datasets ``action`` names, from its protos alone (no round trip)."""
    found = ActionDatasets()
    for read in action.reads:
        first = len(found.inputs)
        _read(read, found)
        if read.table is None:
            found.by_read[id(read)] = (read, list(dict.fromkeys(found.inputs[first:])))
    if action.write is not None:
        _write(action.write, found)
    for sql in action.sql:
        _sql(sql, found)
    found.inputs = list(dict.fromkeys(found.inputs))
    found.outputs = list(dict.fromkeys(found.outputs))
    found.input_tables = list(dict.fromkeys(found.input_tables))
    found.output_tables = list(dict.fromkeys(found.output_tables))
    return found


def read_datasets(read: ReadSource, named: ActionDatasets | None = None) -> list[DatasetIdentifier]:
    """The datasets one read of a data source names (none for a table, a source with no name); as ``named``
    named them, if that read is one of its action's."""
    known = named.by_read.get(id(read)) if named is not None else None
    if known is not None and known[0] is read:
        return list(known[1])
    found = ActionDatasets()
    if read.table is None:
        _read(read, found)
    return list(dict.fromkeys(found.inputs))


def _read(read: ReadSource, found: ActionDatasets) -> None:
    if read.table is not None:
        found.input_tables.append(read.table)
        return
    source = provider_for_format(read.format) if read.format else None
    named = source.read_datasets(read.options, found.unnamed) if source is not None else None
    if named is not None:
        found.inputs.extend(named)
    else:
        _paths([*read.paths, *filter(None, [read.options.get("path")])], read.format, found.inputs, found)


def _write(write: WriteTarget, found: ActionDatasets) -> None:
    if write.table is not None:
        found.output_tables.append(write.table)
        return
    source = provider_for_format(write.format) if write.format else None
    if source is not None:
        dataset = source.dataset(write.save_options(), None, found.unnamed)
        if dataset is not None:
            found.outputs.append(dataset.identifier)
            if dataset.extra_facets:
                found.facets[dataset.identifier] = dataset.extra_facets
    else:
        _paths([write.path] if write.path else [], write.format, found.outputs, found)


def _paths(paths: list[str], format: str | None, into: list[DatasetIdentifier], found: ActionDatasets) -> None:
    for path in paths:
        if path.startswith("/") or "://" in path or path.startswith("file:"):
            into.append(naming.from_location(path))
        else:
            found.unnamed.append(f"the relative path {path!r}: the server resolves it against its own directory")
    if not paths and (format or "").lower() not in FILE_FORMATS:
        found.unnamed.append(f"a {format or 'default'} source or sink with no path: this library has no name for it")


def _sql(sql: str, found: ActionDatasets) -> None:
    try:
        from openlineage_sql import parse
    except ImportError:
        found.unnamed.append(f"SQL needs openlineage-sql to be read ({install_hint('spark')})")
        return
    try:
        meta = parse([_without_using(sql)], dialect="spark")
    except Exception as error:  # noqa: BLE001 - the parser raises its own error types
        found.unnamed.append(f"SQL that could not be parsed: {error}")
        return
    if meta is None:
        found.unnamed.append("SQL that could not be parsed")
        return
    for table in meta.in_tables:
        _sql_table(table, found.inputs, found.input_tables)
    for table in meta.out_tables:
        _sql_table(table, found.outputs, found.output_tables)
    found.unnamed.extend(f"SQL: {error.message}" for error in meta.errors)


_USING = re.compile(r"\busing\s+[`\w.]+", re.IGNORECASE)


def _without_using(sql: str) -> str:
    """``CREATE TABLE … USING <format> …`` without its ``USING`` clause, which openlineage-sql's Spark dialect
    does not know (it reads every other clause of Spark's ``CREATE TABLE``); other statements as they are."""
    creates = classify(sql).kind in (StatementKind.CREATE, StatementKind.CREATE_AS_SELECT)
    return _USING.sub("", sql, count=1) if creates else sql


def _sql_table(table: Any, datasets: list[DatasetIdentifier], tables: list[str]) -> None:
    """A table of SQL: a file source's path (``parquet.`/data/t```) is that path's dataset; any other, a table
    to resolve."""
    schema, name = table.schema, str(table.name)
    if schema and str(schema).lower() in FILE_FORMATS and table.database is None and name.startswith("/"):
        datasets.append(naming.from_location(name))
    else:
        tables.append(str(table.qualified_name))
