"""pyiceberg with a real sqlite catalog on a temporary warehouse, lineage on, events sent over HTTP to a
loopback receiver that validates each against the OpenLineage schemas. No Spark here."""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyiceberg")

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog

import iceberg_facets
from spark_lineage.delivery.spool import Pending, Spool
from tests.support import LineageReceiver

CATALOG = "pycat"
SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string()), pa.field("day", pa.int32())])


def rows(ids: list[int], day: int = 1) -> pa.Table:
    return pa.table(
        {"id": ids, "name": [f"n{i}" for i in ids], "day": [day] * len(ids)},
        schema=SCHEMA,
    )


def sql_catalog(directory: Path, name: str = CATALOG, **properties: str) -> SqlCatalog:
    return SqlCatalog(
        name, uri=f"sqlite:///{directory}/catalog.db", warehouse=f"file://{directory}/warehouse", **properties
    )


@pytest.fixture()
def catalog(tmp_path: Path) -> SqlCatalog:
    cat = sql_catalog(tmp_path)
    cat.create_namespace("db")
    return cat


@pytest.fixture()
def iceberg_lineage(receiver: LineageReceiver) -> Iterator[iceberg_facets.IcebergLineageHandle]:
    handle = iceberg_facets.enable(transport={"type": "http", "url": receiver.url}, job_name="etl", namespace="tests")
    yield handle
    handle.disable(timeout=30)


@pytest.fixture()
def events(receiver: LineageReceiver, iceberg_lineage: iceberg_facets.IcebergLineageHandle) -> Iterator[Any]:
    """A function returning every event sent so far, once the worker has sent them."""

    def sent() -> list[dict[str, Any]]:
        assert iceberg_lineage.flush(30)
        return list(receiver.events)

    yield sent


def runs(events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Events by job name; each job here must have run once (a START and one final event)."""
    by_run: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        by_run.setdefault(event["run"]["runId"], []).append(event)
    by_job: dict[str, list[dict[str, Any]]] = {}
    for run_events in by_run.values():
        name = run_events[0]["job"]["name"]
        assert name not in by_job, f"job {name} ran more than once"
        by_job[name] = run_events
    return by_job


def runs_named(events: list[dict[str, Any]], job: str) -> list[list[dict[str, Any]]]:
    """The runs of ``job`` in the order they started (their first event's time), each as its events in arrival
    order: with several requests in flight (``delivery_concurrency``), different runs arrive in any order."""
    by_run: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        if event["job"]["name"] == job:
            by_run.setdefault(event["run"]["runId"], []).append(event)
    return sorted(
        by_run.values(), key=lambda run: dt.datetime.fromisoformat(run[0]["eventTime"].replace("Z", "+00:00"))
    )


def final_event(events: list[dict[str, Any]], job: str) -> dict[str, Any]:
    """The latest run of ``job``, a run of its own (a commit, scan, create or drop): asserts it is one final
    event, and returns it."""
    job_runs = runs_named(events, job)
    assert job_runs, f"no run of {job}; runs: {sorted({e['job']['name'] for e in events})}"
    (event,) = job_runs[-1]
    assert event["eventType"] in ("COMPLETE", "FAIL"), event["eventType"]
    return event


def location_name(table: Any) -> str:
    """A table location as the dataset name the Spark side gives it: the path of a file: URI."""
    location = str(table.location())
    return location[len("file://") :] if location.startswith("file://") else location


def wait_until(condition: Callable[[], bool], seconds: float = 60.0) -> bool:
    """Whether ``condition`` became true within ``seconds`` (a bound, not a timing: it is checked often)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def process_gone(pid: int) -> bool:
    """Whether process ``pid`` has exited. An orphan that exited stays a zombie until whoever adopted it
    reaps it (some containers' init never does): that counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def spooled(directory: Path) -> Pending:
    """What waits in the spool at ``directory``."""
    spool = Spool(directory)
    try:
        return spool.pending()
    finally:
        spool.close()
