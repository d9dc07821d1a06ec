"""One Iceberg table, written by Spark (Iceberg's JDBC catalog on sqlite) and by pyiceberg (``SqlCatalog`` on the
same sqlite file): both engines give it the same dataset identity, so their lineage joins into one graph."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support import LineageReceiver, only_run

pytest.importorskip("pyiceberg")

pytestmark = [pytest.mark.spark, pytest.mark.iceberg]


def identity(dataset: dict[str, Any]) -> dict[str, Any]:
    """Everything that names a dataset and describes it, without who produced the facets."""
    facets = dataset["facets"]
    catalog = {k: v for k, v in facets["catalog"].items() if not k.startswith("_") and k != "source"}
    return {
        "namespace": dataset["namespace"],
        "name": dataset["name"],
        "symlinks": facets["symlinks"]["identifiers"],
        "catalog": catalog,
        "schema": [(f["name"], f["type"]) for f in facets["schema"]["fields"]],
        "storage": {k: v for k, v in facets["storage"].items() if not k.startswith("_")},
    }


def test_spark_and_pyiceberg_name_one_table_identically(
    spark: Any, lineage: Any, receiver: LineageReceiver, iceberg_dir: Path
) -> None:
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog

    import iceberg_facets

    spark.sql("CREATE NAMESPACE IF NOT EXISTS jcat.shared")
    spark.sql("CREATE TABLE jcat.shared.orders (id BIGINT, item STRING, qty INT) USING iceberg")
    try:
        spark.sql("INSERT INTO jcat.shared.orders VALUES (1, 'pen', 2)")
        assert lineage.flush(60)
        _, from_spark = only_run(receiver.events, "append_data")

        handle = iceberg_facets.enable(transport={"type": "http", "url": receiver.url}, job_name="orders_sync")
        try:
            catalog = SqlCatalog(
                "jcat", uri=f"sqlite:///{iceberg_dir / 'catalog.db'}", warehouse=str(iceberg_dir / "jdbc_warehouse")
            )
            table = catalog.load_table("shared.orders")
            schema = table.schema().as_arrow()
            table.append(pa.table({"id": [2], "item": ["ink"], "qty": [5]}, schema=schema))
            assert table.scan().to_arrow().num_rows == 2
            assert handle.flush(30)
        finally:
            handle.disable()
    finally:
        spark.sql("DROP TABLE IF EXISTS jcat.shared.orders")

    pyiceberg_events = [
        e for e in receiver.events if e["job"]["name"].startswith("orders_sync.") and e["eventType"] == "COMPLETE"
    ]
    from_pyiceberg = next(e for e in pyiceberg_events if e["job"]["name"] == "orders_sync.append.jcat_shared_orders")
    scanned = next(e for e in pyiceberg_events if e["job"]["name"] == "orders_sync.scan.jcat_shared_orders")
    (spark_output,) = from_spark["outputs"]
    (pyiceberg_output,) = from_pyiceberg["outputs"]
    (pyiceberg_input,) = scanned["inputs"]

    expected = identity(spark_output)
    assert expected["namespace"] == "file"
    assert expected["name"] == str(iceberg_dir / "jdbc_warehouse" / "shared" / "orders")
    assert expected["symlinks"] == [
        {"namespace": f"jdbc:sqlite:{iceberg_dir / 'catalog.db'}", "name": "shared.orders", "type": "TABLE"}
    ]
    assert identity(pyiceberg_output) == expected
    assert identity(pyiceberg_input) == expected
    assert (spark_output["facets"]["catalog"]["source"], pyiceberg_output["facets"]["catalog"]["source"]) == (
        "spark",
        "pyiceberg",
    )
    spark_commit = spark_output["outputFacets"]["icebergCommitReport"]
    pyiceberg_commit = pyiceberg_output["outputFacets"]["icebergCommitReport"]
    assert (spark_commit["sequenceNumber"], spark_commit["commitMetrics"]["totalRecords"]) == (1, 1)
    assert (pyiceberg_commit["sequenceNumber"], pyiceberg_commit["commitMetrics"]["totalRecords"]) == (2, 2)
    assert pyiceberg_output["facets"]["version"]["datasetVersion"] == str(pyiceberg_commit["snapshotId"])
