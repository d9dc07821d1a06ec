"""What the analysis finds in a query: datasets read and written, and what happened to them.

These are the handlers' output and the event builder's input; they hold no JVM objects and no OpenLineage
classes, so they stay easy to assert on in tests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from spark_lineage.naming import DatasetIdentifier, TableName
from spark_lineage.plan import CapturedPlan, SessionInfo


@dataclass(frozen=True)
class SchemaField:
    """A column: its name, its Spark type name, and its nested fields for structs, arrays and maps."""

    name: str
    type: str
    fields: tuple[SchemaField, ...] = ()


@dataclass
class DatasetLineage:
    """One dataset a query touched."""

    identifier: DatasetIdentifier
    symlinks: list[TableName] = field(default_factory=list)
    schema: list[SchemaField] | None = None
    lifecycle: str | None = None
    """OpenLineage lifecycle state change: CREATE, DROP, OVERWRITE, TRUNCATE, RENAME, ALTER."""
    previous: DatasetIdentifier | None = None
    """The identity before a RENAME."""
    extra_facets: dict[str, Any] = field(default_factory=dict)
    """Facets a handler attaches beyond the standard ones, by facet name."""

    def merge(self, other: DatasetLineage) -> None:
        """Fold a second sighting of the same dataset into this one, keeping what each knew."""
        for symlink in other.symlinks:
            if symlink not in self.symlinks:
                self.symlinks.append(symlink)
        self.schema = self.schema or other.schema
        self.lifecycle = self.lifecycle or other.lifecycle
        self.previous = self.previous or other.previous
        self.extra_facets = {**other.extra_facets, **self.extra_facets}


@dataclass
class QueryLineage:
    """The analysis of one query."""

    inputs: list[DatasetLineage] = field(default_factory=list)
    outputs: list[DatasetLineage] = field(default_factory=list)
    job_suffix: str | None = None
    errors: list[str] = field(default_factory=list)
    """Why some of the query's lineage may be missing; reported in the extraction-error facet."""


@dataclass
class AnalysisContext:
    """What handlers may know beyond the node in front of them."""

    session: SessionInfo
    table_locations: dict[str, str] = field(default_factory=dict)
    """``db.table`` -> location, learned from earlier queries, for tables that are gone when we look (DROP)."""
    inputs_of: Callable[[CapturedPlan, AnalysisContext], list[DatasetLineage]] = field(default=lambda plan, ctx: [])
    """Analyzes a nested plan (a cached relation's plan, a CTAS query) into its input datasets."""
    errors: list[str] = field(default_factory=list)
