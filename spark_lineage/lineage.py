"""What the analysis finds in a query: datasets read and written, and what happened to them.

These are the handlers' output and the event builder's input; they hold no JVM objects and no OpenLineage
classes, so they stay easy to assert on in tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from openlineage.client.generated.lifecycle_state_change_dataset import LifecycleStateChange

from spark_lineage.naming import DatasetIdentifier, TableName
from spark_lineage.plan import Attribute, SessionInfo


@dataclass(frozen=True)
class SchemaField:
    """A column: its name, its Spark type name, and its nested fields for structs, arrays and maps."""

    name: str
    type: str
    fields: tuple[SchemaField, ...] = ()


@dataclass(frozen=True)
class Statistics:
    """Rows, bytes and files a query read from or wrote to a dataset, as far as known."""

    rows: int | None = None
    bytes: int | None = None
    files: int | None = None


OutputStatistics = Statistics
InputStatistics = Statistics


@dataclass(frozen=True, order=True)
class InputColumn:
    """A column of an input dataset, as column lineage names it."""

    dataset: DatasetIdentifier
    field: str


@dataclass(frozen=True)
class Transformation:
    """How an output column (or the whole output dataset) depends on an input column: ``DIRECT`` (the value
    is computed from it: ``IDENTITY``, ``TRANSFORMATION``, ``AGGREGATION``) or ``INDIRECT`` (it decides which
    rows or values there are: ``JOIN``, ``FILTER``, ``GROUP_BY``, ``SORT``, ``WINDOW``, ``CONDITIONAL``)."""

    type: str
    subtype: str
    masking: bool = False
    description: str = ""


@dataclass(frozen=True)
class ColumnSource:
    """One input column an output column (or the dataset) depends on, and every way it does."""

    column: InputColumn
    transformations: tuple[Transformation, ...]


@dataclass
class ColumnLineage:
    """Column-level lineage of one output dataset: per output column, the input columns it comes from; and
    the input columns the whole dataset depends on (joins, filters, grouping, sorting)."""

    fields: dict[str, list[ColumnSource]] = field(default_factory=dict)
    dataset: list[ColumnSource] = field(default_factory=list)


@dataclass
class DatasetLineage:
    """One dataset a query touched."""

    identifier: DatasetIdentifier
    symlinks: list[TableName] = field(default_factory=list)
    schema: list[SchemaField] | None = None
    lifecycle: LifecycleStateChange | None = None
    """What the query did to the dataset as a whole (CREATE, DROP, OVERWRITE, TRUNCATE, RENAME, ALTER), as
    openlineage-python's ``lifecycleStateChange`` facet names it."""
    previous: DatasetIdentifier | None = None
    """The identity before a RENAME."""
    extra_facets: dict[str, Any] = field(default_factory=dict)
    """Dataset facets a handler attaches beyond the standard ones, by facet name."""
    input_facets: dict[str, Any] = field(default_factory=dict)
    output_facets: dict[str, Any] = field(default_factory=dict)
    statistics: OutputStatistics | None = None
    """Rows, bytes and files written, when the dataset itself says (an Iceberg commit report); otherwise the
    query's SQL metrics are used."""
    input_statistics: InputStatistics | None = None
    """Bytes and files a scan of it covers (a file relation's size and files), for ``inputStatistics``."""
    column_lineage: ColumnLineage | None = None
    """For an output: which input columns each of its columns comes from."""

    def merge(self, other: DatasetLineage) -> None:
        """Fold a second sighting of the same dataset into this one, keeping what each knew."""
        for symlink in other.symlinks:
            if symlink not in self.symlinks:
                self.symlinks.append(symlink)
        self.schema = self.schema or other.schema
        self.lifecycle = self.lifecycle or other.lifecycle
        self.previous = self.previous or other.previous
        self.extra_facets = {**other.extra_facets, **self.extra_facets}
        self.input_facets = {**other.input_facets, **self.input_facets}
        self.output_facets = {**other.output_facets, **self.output_facets}
        self.statistics = self.statistics or other.statistics
        self.input_statistics = self.input_statistics or other.input_statistics
        self.column_lineage = self.column_lineage or other.column_lineage


@dataclass(frozen=True)
class UnknownNode:
    """A plan node no handler knows: what openlineage-spark's ``spark_unknown`` run facet lists of it."""

    description: Mapping[str, Any]
    """The node as Spark's ``toJSON`` writes it (its class, ``num-children`` and fields), or its class only."""
    inputs: tuple[Attribute, ...]
    """The columns it reads (its children's output), with their types where read."""
    outputs: tuple[Attribute, ...]


@dataclass(frozen=True)
class UnknownNodes:
    """The plan's root, if no handler knows it, and each of its leaves no handler knows."""

    output: UnknownNode | None
    inputs: tuple[UnknownNode, ...]


@dataclass
class QueryLineage:
    """The analysis of one query."""

    inputs: list[DatasetLineage] = field(default_factory=list)
    outputs: list[DatasetLineage] = field(default_factory=list)
    job_suffix: str | None = None
    errors: list[str] = field(default_factory=list)
    """Why some of the query's lineage may be missing; reported in the extraction-error facet."""
    wraps_reported_queries: bool = False
    """The query only ran others that are reported themselves: reported without datasets."""
    unknown: UnknownNodes | None = None
    """The plan nodes no handler knows, when the ``spark_unknown`` facet is on and there are any."""


@dataclass
class AnalysisContext:
    """What handlers may know beyond the node in front of them."""

    session: SessionInfo
    table_locations: dict[str, str] = field(default_factory=dict)
    """``db.table`` -> location, learned from earlier queries, for tables that are gone when we look (DROP)."""
    errors: list[str] = field(default_factory=list)
    """Why some of the current query's lineage may be missing."""
    datasets_read: dict[int, list[DatasetLineage]] = field(default_factory=dict)
    """What each leaf of the current query's plan reads, by ``id()`` of its tree node: column lineage names
    input columns after these datasets."""
    iceberg_commits: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Iceberg commit reports by table name, waiting for the query that made them."""
    iceberg_scans: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Iceberg scan reports by table name, waiting for the query that planned them."""
    stream_sources: list[DatasetLineage] | None = None
    """For a query a ``foreachBatch`` function ran: what its streaming query reads, which its batch DataFrame
    (a ``LogicalRDD`` of the micro-batch's plan) stands for."""
