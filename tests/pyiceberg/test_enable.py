"""``iceberg_facets.enable()`` and ``disable()``: which catalogs are covered, configuration, and that lineage
never fails or changes the user's work."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from openlineage.client import OpenLineageClient
from openlineage.client.transport import get_default_factory
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import DataScan, Table, Transaction

import iceberg_facets
from tests.pyiceberg.conftest import CATALOG, final_event, rows, runs_named, sql_catalog
from tests.support import REPO_ROOT, LineageReceiver

PATCHED = [
    (Transaction, "commit_transaction"),
    (Table, "_do_commit"),
    (Table, "scan"),
    (DataScan, "to_arrow"),
    (DataScan, "to_arrow_batch_reader"),
    (DataScan, "plan_files"),
    (SqlCatalog, "create_table"),
    (SqlCatalog, "drop_table"),
]


def http(receiver: LineageReceiver, **options: Any) -> iceberg_facets.IcebergLineageHandle:
    return iceberg_facets.enable(transport={"type": "http", "url": receiver.url}, **options)


def test_catalogs_made_before_and_after_enable_any_way_are_all_covered(tmp_path: Path, receiver: Any) -> None:
    before = sql_catalog(tmp_path)
    before.create_namespace("db")
    handle = http(receiver, job_name="cover")
    try:
        after = load_catalog(
            "loaded", type="sql", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/warehouse"
        )

        class TeamCatalog(SqlCatalog):  # a catalog class defined after enable()
            pass

        team = TeamCatalog("team", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/warehouse")
        for catalog, table in ((before, "db.a"), (after, "db.b"), (team, "db.c")):
            if catalog is not before:
                catalog.create_namespace("db")
            catalog.create_table(table, schema=rows([1]).schema).append(rows([1]))
        assert handle.flush(30)
    finally:
        handle.disable()
    for job in (
        f"cover.create_table.{CATALOG}_db_a",
        f"cover.append.{CATALOG}_db_a",
        "cover.create_table.loaded_db_b",
        "cover.append.loaded_db_b",
        "cover.create_table.team_db_c",
        "cover.append.team_db_c",
    ):
        assert final_event(receiver.events, job)["eventType"] == "COMPLETE"


def test_disable_puts_pyiceberg_back_exactly_and_enable_works_again(catalog: Any, receiver: Any) -> None:
    originals = {(cls, name): cls.__dict__[name] for cls, name in PATCHED}
    handle = http(receiver, job_name="first")
    assert all(cls.__dict__[name] is not originals[(cls, name)] for cls, name in PATCHED)
    assert "__init_subclass__" in Catalog.__dict__
    table = catalog.create_table("db.toggle", schema=rows([1]).schema)
    handle.disable()

    assert all(cls.__dict__[name] is originals[(cls, name)] for cls, name in PATCHED)
    assert "__init_subclass__" not in Catalog.__dict__
    assert not handle.enabled
    table.append(rows([1]))
    table.scan().to_arrow()
    assert [e["job"]["name"] for e in receiver.events] == ["first.create_table.pycat_db_toggle"]

    again = http(receiver, job_name="second")
    try:
        table.append(rows([2]))
        assert again.flush(30)
    finally:
        again.disable()
    assert final_event(receiver.events, "second.append.pycat_db_toggle")["eventType"] == "COMPLETE"


def test_enable_twice_is_one_instrumentation(receiver: Any) -> None:
    first = http(receiver)
    try:
        second = iceberg_facets.enable()
        assert second.config is first.config
        assert Transaction.__dict__["commit_transaction"].__wrapped__.__qualname__ == "Transaction.commit_transaction"
    finally:
        first.disable()


def test_enable_says_in_one_info_line_that_lineage_is_on_and_where_events_go(
    receiver: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="iceberg_facets")
    spool = tmp_path / "spool"
    handle = http(receiver, job_name="nightly", namespace="tests", spool_dir=str(spool))
    try:
        said = [r.getMessage() for r in caplog.records if r.name == "iceberg_facets" and r.levelno >= logging.INFO]
        assert said == [
            f"iceberg_facets: lineage on for pyiceberg in job nightly (namespace tests); events go to "
            f"{receiver.url}/api/v1/lineage (spooled in {spool})"
        ]
    finally:
        handle.disable()


def test_a_passed_client_is_used(catalog: Any, receiver: Any) -> None:
    client = OpenLineageClient(transport=get_default_factory().create({"type": "http", "url": receiver.url}))
    handle = iceberg_facets.enable(client, job_name="own_client")
    try:
        catalog.create_table("db.mine", schema=rows([1]).schema)
        assert handle.flush(30)
    finally:
        handle.disable()
    assert final_event(receiver.events, "own_client.create_table.pycat_db_mine")


def test_disabled_by_option_or_environment_instruments_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    original = Transaction.__dict__["commit_transaction"]
    assert not iceberg_facets.enable(disabled=True).enabled
    monkeypatch.setenv("OPENLINEAGE_DISABLED", "true")
    assert not iceberg_facets.enable().enabled
    assert Transaction.__dict__["commit_transaction"] is original


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"queue_sise": 10}, "iceberg_facets.enable() got unknown option(s) queue_sise; accepted: "),
        ({"queue_size": 0}, "iceberg_facets.enable() option queue_size=0 is not valid; accepted values: integers >= 1"),
        ({"transport": {"type": "carrier-pigeon"}}, "iceberg_facets.enable() option transport.type='carrier-pigeon'"),
        ({"transport": {"type": "http"}}, "iceberg_facets.enable() option transport.url is required"),
        ({"parent_run_id": "x", "parent_job_name": "dag"}, "option parent_run_id='x' is not a UUID"),
        ({"spool_max_bytes": 0}, "option spool_max_bytes=0 is not valid; accepted values: integers >= 1."),
        ({"delivery_concurrency": 0}, "option delivery_concurrency=0 is not valid; accepted values: integers >= 1."),
        ({"spool_disabled": "maybe"}, "option spool_disabled='maybe' is not a boolean; accepted values: true, false."),
    ],
)
def test_bad_options_are_refused_with_the_option_named(options: dict[str, Any], message: str) -> None:
    with pytest.raises(iceberg_facets.ConfigError) as raised:
        iceberg_facets.enable(**options)
    assert message in str(raised.value)
    assert "spark.openlineage" not in str(raised.value)


def test_a_script_with_only_environment_configuration_names_its_job_after_itself(
    tmp_path: Path, receiver: LineageReceiver
) -> None:
    script = tmp_path / "nightly_etl.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import pyarrow as pa
            from pyiceberg.catalog.sql import SqlCatalog
            import iceberg_facets

            iceberg_facets.enable()
            catalog = SqlCatalog("{CATALOG}", uri="sqlite:///{tmp_path}/catalog.db", warehouse="file://{tmp_path}/wh")
            catalog.create_namespace("db")
            table = catalog.create_table("db.t", schema=pa.schema([pa.field("id", pa.int64())]))
            table.append(pa.table({{"id": [1, 2, 3]}}))
            # no disable(): what was captured is delivered at exit
            """
        )
    )
    environment = {
        **os.environ,
        "OPENLINEAGE_URL": receiver.url,
        "OPENLINEAGE_NAMESPACE": "prod",
        "PYTHONPATH": str(REPO_ROOT),
    }
    environment.pop("OPENLINEAGE_CONFIG", None)
    subprocess.run([sys.executable, str(script)], check=True, env=environment, cwd=tmp_path, timeout=120)

    complete = final_event(receiver.events, f"nightly_etl.append.{CATALOG}_db_t")
    assert complete["job"]["namespace"] == "prod"
    assert complete["outputs"][0]["outputFacets"]["icebergCommitReport"]["commitMetrics"]["addedRecords"] == 3
    assert runs_named(receiver.events, f"nightly_etl.create_table.{CATALOG}_db_t")


def test_events_are_built_and_sent_by_a_helper_process_by_default(catalog: Any, receiver: Any) -> None:
    from iceberg_facets.delivery import ProcessDelivery, ThreadDelivery

    default = http(receiver, job_name="helper")
    try:
        delivery = default._runtime.delivery  # type: ignore[union-attr]
        assert isinstance(delivery, ProcessDelivery) and delivery.alive
        catalog.create_table("db.helped", schema=rows([1]).schema)
        assert default.flush(30)
    finally:
        default.disable()
    assert delivery.process.returncode == 0, "disable() lets the helper finish and exit"
    assert final_event(receiver.events, "helper.create_table.pycat_db_helped")

    threaded = http(receiver, job_name="threaded", delivery="thread")
    try:
        assert isinstance(threaded._runtime.delivery, ThreadDelivery)  # type: ignore[union-attr]
        catalog.create_table("db.threaded", schema=rows([1]).schema)
        assert threaded.flush(30)
    finally:
        threaded.disable()
    assert final_event(receiver.events, "threaded.create_table.pycat_db_threaded")
    with pytest.raises(iceberg_facets.ConfigError, match="option delivery='carrier' is not valid"):
        iceberg_facets.enable(delivery="carrier")


def test_when_the_helper_process_dies_events_go_on_from_a_thread(
    catalog: Any, receiver: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from iceberg_facets.delivery import ThreadDelivery

    handle = http(receiver, job_name="orphan")
    try:
        handle._runtime.delivery.process.kill()  # type: ignore[union-attr]
        handle._runtime.delivery.process.wait()  # type: ignore[union-attr]
        table = catalog.create_table("db.orphan", schema=rows([1]).schema)
        table.append(rows([1, 2]))
        assert handle.flush(30)
        assert isinstance(handle._runtime.delivery, ThreadDelivery)  # type: ignore[union-attr]
    finally:
        handle.disable()
    assert "the delivery process stopped" in caplog.text
    assert final_event(receiver.events, "orphan.append.pycat_db_orphan")["eventType"] == "COMPLETE"
