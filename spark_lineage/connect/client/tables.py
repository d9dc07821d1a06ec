"""Where the tables a Spark Connect client names live, asked of the server once per table, and their datasets.

A client knows a table by the name its user wrote (``people``, ``db.t``, ``cat.db.t``); a table's dataset is
its location, as the driver side names it. :class:`TableDatasets` asks the server for the location once per
table per session (``DESCRIBE TABLE EXTENDED``, after the catalog says the table exists: no error in the
client's log for a table that is not there yet), and names it with the driver side's own functions, so that a
session-catalog table gets its location and its ``db.table`` symlink, and an Iceberg table its catalog's name.

A table a write is about to create has no location yet: it is placed where the session catalog would put it
(the warehouse), and asked again once the write ended.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from spark_lineage import naming
from spark_lineage.facets.iceberg import iceberg_table_dataset
from spark_lineage.handlers.base import table_dataset
from spark_lineage.lineage import AnalysisContext, DatasetLineage
from spark_lineage.plan import CapturedNode, SessionInfo

DETAILS_HEADER = "# Detailed Table Information"
"""The row of ``DESCRIBE TABLE EXTENDED`` after which its rows are a table's details, one per row."""
SESSION_CATALOG = "spark_catalog"
TABLES_KEPT = 10_000
"""Tables whose details a session keeps at most."""


@dataclass(frozen=True)
class TableDetails:
    """What ``DESCRIBE TABLE EXTENDED`` says of a table: its ``Catalog``, ``Database``, ``Table``, ``Location``,
    ``Provider``..., and its columns."""

    rows: Mapping[str, str]
    columns: tuple[tuple[str, str], ...] = ()
    """Each column's name and Spark type (``int``, ``string``), in order."""

    @classmethod
    def from_rows(cls, rows: Sequence[Sequence[str | None]]) -> TableDetails:
        """The columns (the rows before the first blank or ``#`` one) and the details section of ``DESCRIBE
        TABLE EXTENDED``'s rows (``col_name``, ``data_type``, ...)."""
        details: dict[str, str] = {}
        columns: list[tuple[str, str]] = []
        in_columns, seen = True, False
        for row in rows:
            name, value = str(row[0] or "").strip(), str(row[1] or "").strip()
            if in_columns and name and not name.startswith("#"):
                columns.append((name, value))
                continue
            in_columns = False
            if name == DETAILS_HEADER:
                seen = True
            elif seen and name.startswith("#"):
                break
            elif seen and name:
                details[name] = value
        return cls(details, tuple(columns))


Describe = Callable[[str], "TableDetails | None"]
"""Asks the server of a table by name: its details, ``None`` when it does not exist (raises when it cannot say)."""


class TableDatasets:
    """The datasets of the tables one Connect session names, their locations asked once (thread-safe)."""

    def __init__(self, session: SessionInfo, describe: Describe, current_database: Callable[[], str | None]) -> None:
        self._session = session
        self._describe = describe
        self._current_database = current_database
        self._known: dict[str, TableDetails] = {}
        self._database: str | None = None
        self._lock = threading.Lock()

    def dataset(self, name: str, errors: list[str], *, created: bool = False) -> DatasetLineage | None:
        """The dataset of table ``name``. ``created``: a table a write may be about to create, placed where the
        session catalog would put it when it does not exist yet. Why a table cannot be named goes to
        ``errors``."""
        try:
            details = self._details(name)
        except Exception as error:  # noqa: BLE001 - the server could not say: the table goes unnamed
            errors.append(f"table {name}: its location could not be asked of the server: {_first_line(error)}")
            return None
        if details is None:
            if created:
                return self._default_placed(name, errors)
            errors.append(f"table {name}: the server does not know it")
            return None
        return self._named(name, details, errors)

    def columns(self, name: str) -> tuple[tuple[str, str], ...] | None:
        """Table ``name``'s columns (name, type), if the server said where it is; ``None`` otherwise."""
        with self._lock:
            known = self._known.get(name)
        return known.columns if known is not None and known.columns else None

    def known(self, name: str) -> bool:
        """Whether the server said where table ``name`` is (it existed when asked)."""
        with self._lock:
            return name in self._known

    def forget(self, name: str) -> None:
        """Ask again next time (a write created or replaced the table)."""
        with self._lock:
            self._known.pop(name, None)

    def _details(self, name: str) -> TableDetails | None:
        with self._lock:
            known = self._known.get(name)
        if known is not None:
            return known
        details = self._describe(name)
        if details is not None:
            with self._lock:
                self._known[name] = details
                while len(self._known) > TABLES_KEPT:
                    self._known.pop(next(iter(self._known)))
        return details

    def _named(self, name: str, details: TableDetails, errors: list[str]) -> DatasetLineage | None:
        rows = details.rows
        parts = _parts(name)
        # A V2 catalog's table (Iceberg's) may show no Catalog or Database row: its name says them.
        catalog_name = rows.get("Catalog") or (parts[0] if len(parts) > 2 else SESSION_CATALOG)
        database = rows.get("Database") or (parts[-2] if len(parts) > 1 else None)
        table, location = rows.get("Table") or parts[-1], rows.get("Location")
        context = AnalysisContext(session=self._session)
        if catalog_name != SESSION_CATALOG:
            catalog = naming.IcebergCatalog.from_spark_conf(catalog_name, dict(self._session.conf))
            if catalog is None or not location or not table:
                errors.append(f"table {name}: catalog {catalog_name} is no Iceberg catalog this library can name")
                return None
            identifier = f"{database}.{table}" if database else table
            return iceberg_table_dataset(catalog, identifier, location, source="spark")
        if not location or rows.get("Type", "").upper() == "VIEW":
            errors.append(f"table {name}: a view, or a table the server shows no location for: not followed")
            return None
        info = {"Database": database or "", "Table": table or name, "Location": location}
        dataset = table_dataset(CapturedNode("CatalogTable", {"info": info}), context)
        errors.extend(f"table {name}: {error}" for error in context.errors)
        return dataset

    def _default_placed(self, name: str, errors: list[str]) -> DatasetLineage | None:
        parts = _parts(name)
        if len(parts) > 2 and parts[0] != SESSION_CATALOG:
            catalog = naming.IcebergCatalog.from_spark_conf(parts[0], dict(self._session.conf))
            location = catalog.default_table_location(".".join(parts[1:])) if catalog else None
            if catalog is None or location is None:
                errors.append(f"table {name}: not created yet, and catalog {parts[0]} places it where it chooses")
                return None
            return iceberg_table_dataset(catalog, ".".join(parts[1:]), location, source="spark")
        table = parts[-1]
        database = parts[-2] if len(parts) >= 2 else self._database_now()
        if not self._session.warehouse:
            errors.append(f"table {name}: not created yet, and the server shows no warehouse to place it in")
            return None
        location = naming.default_table_location(self._session.warehouse, database, table)
        return self._named(
            name, TableDetails({"Database": database or "", "Table": table, "Location": location}), errors
        )

    def _database_now(self) -> str | None:
        if self._database is None:
            try:
                self._database = self._current_database()
            except Exception:  # noqa: BLE001 - the default database then
                self._database = "default"
        return self._database


def quoted(name: str) -> str:
    """A table name as SQL quotes it (each part in backticks), so that asking the server about it parses as the
    user's request did; a name the user quoted already stays as written."""
    if "`" in name:
        return name
    return ".".join(f"`{part}`" for part in name.split("."))


def qualifiers(name: str) -> frozenset[str]:
    """The names a column of table ``name`` may be qualified by in a query (its table name)."""
    return frozenset({_parts(name)[-1].lower()})


def _parts(name: str) -> list[str]:
    """A table name's parts, without their quotes."""
    return [part.strip("`") for part in name.split(".")]


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0][:300] if lines else type(error).__name__
