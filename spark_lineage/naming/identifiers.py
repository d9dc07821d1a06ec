"""Dataset identities, as every naming rule returns them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class DatasetIdentifier:
    """An OpenLineage dataset identity: where it lives (namespace) and what it is called there (name)."""

    namespace: str
    name: str


@dataclass(frozen=True)
class TableName:
    """A table's name in a catalog, as it goes into the ``symlinks`` facet."""

    namespace: str
    name: str
    type: str = "TABLE"
