"""What the pyiceberg edge records about a commit, a scan or a table change, as plain Python data.

:mod:`iceberg_facets.instrument` fills these from pyiceberg objects; reports and events are built from them
alone, so everything after the edge is testable without pyiceberg and stable across its versions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from openlineage.client.generated.lifecycle_state_change_dataset import LifecycleStateChange

from spark_lineage.lineage import SchemaField


@dataclass(frozen=True)
class TableInfo:
    """An Iceberg table as pyiceberg knows it: its catalog, its name there, and its current metadata."""

    catalog_name: str
    catalog_class: str
    catalog_properties: dict[str, str]
    identifier: str
    """``db.table`` (namespace levels joined with dots)."""
    location: str
    schema: list[SchemaField] | None = None
    file_format: str | None = None
    current_snapshot_id: int | None = None


@dataclass(frozen=True)
class SnapshotInfo:
    """One snapshot a commit added, with its summary (Iceberg's ``added-data-files`` etc.)."""

    snapshot_id: int
    sequence_number: int | None
    operation: str | None
    summary: dict[str, str]


@dataclass
class CommitRecord:
    """One pyiceberg transaction committed to the catalog, or given up on."""

    table: TableInfo
    snapshots: list[SnapshotInfo]
    """The snapshots the commit added, oldest first."""
    attempts: int
    duration_ms: int
    """From the first commit attempt to success (or to the final failure)."""
    start_ms: int
    end_ms: int
    created: bool = False
    error: str | None = None
    error_stack: str | None = None
    schema_changed: bool = False
    """The commit changed the schema or properties but added no snapshot: an ALTER."""
    attempted_operation: str | None = None
    """The operation the transaction staged, known even when the commit failed."""


@dataclass
class ScanRecord:
    """One materialized pyiceberg scan and how it was planned."""

    table: TableInfo
    snapshot_id: int | None
    schema_id: int | None
    filter: Any
    """The row filter in Iceberg's expression JSON layout (``{"type": "gt", "term": "id", "value": ...}``)."""
    projected_field_names: list[str]
    planning_ns: int
    result_data_files: int
    result_delete_files: int
    total_data_files: int | None
    """Data files in the snapshot scanned, from its summary; the ones not in the result were pruned."""
    total_file_size_bytes: int
    start_ms: int
    end_ms: int


@dataclass
class TableChangeRecord:
    """A table created or dropped through a catalog."""

    table: TableInfo
    lifecycle: LifecycleStateChange
    """``CREATE`` or ``DROP``."""
    time_ms: int


@dataclass
class RunRecord:
    """What one run saw: the scans and commits made inside an ``iceberg_facets.run()`` block."""

    scans: list[ScanRecord] = field(default_factory=list)
    commits: list[CommitRecord] = field(default_factory=list)
    changes: list[TableChangeRecord] = field(default_factory=list)
