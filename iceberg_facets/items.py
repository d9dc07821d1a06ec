"""What the worker thread hands the delivery, in order: small picklable records of what happened, which the
delivery turns into events (:class:`~iceberg_facets.delivery.RunAssembler`), and the two requests that
control a delivery process (:class:`Flush`, :class:`Close`).

They travel down the pipe to the helper process (:mod:`iceberg_facets.pipe`), so they hold plain data only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from iceberg_facets.events import RunIdentity
from iceberg_facets.records import CommitRecord, ScanRecord, TableChangeRecord


@dataclass(frozen=True)
class RunStarted:
    """An ``iceberg_facets.run()`` block was entered: its START event."""

    identity: RunIdentity
    epoch_ms: int


@dataclass(frozen=True)
class RunEnded:
    """A block was left: COMPLETE, or FAIL with the error it raised (as text: exceptions need not pickle)."""

    identity: RunIdentity
    epoch_ms: int
    error: str | None = None
    stack: str | None = None


@dataclass(frozen=True)
class Committed:
    """A transaction committed (or given up on); part of the block whose run id is given, else a run of its
    own."""

    record: CommitRecord
    block_run_id: str | None = None


@dataclass(frozen=True)
class Scanned:
    """A scan materialized, in a block or a run of its own."""

    record: ScanRecord
    block_run_id: str | None = None


@dataclass(frozen=True)
class TableChanged:
    """A table created or dropped, in a block or a run of its own."""

    record: TableChangeRecord
    block_run_id: str | None = None


Item = Union[RunStarted, RunEnded, Committed, Scanned, TableChanged]
"""What becomes events."""


@dataclass(frozen=True)
class Flush:
    """Answer ``number`` once everything sent before it has reached the backend, or ``timeout`` seconds have
    passed (the answer says which)."""

    number: int
    timeout: float | None


@dataclass(frozen=True)
class Close:
    """Nothing follows: send what can be sent within ``timeout`` seconds, leave the rest in the spool, exit."""

    timeout: float | None


Message = Union[Item, Flush, Close]
"""What the helper process reads after its settings."""
