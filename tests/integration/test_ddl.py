"""DDL: DROP, TRUNCATE, RENAME and other ALTER TABLE statements, with lifecycleStateChange."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support import LineageReceiver, datasets, only_run

pytestmark = pytest.mark.spark


def _table_facets(event: dict[str, Any], warehouse: Path, table: str) -> dict[str, Any]:
    assert datasets(event, "outputs") == [("file", str(warehouse / table))]
    facets = event["outputs"][0]["facets"]
    assert facets["symlinks"]["identifiers"] == [
        {"namespace": f"file:{warehouse}", "name": f"default.{table}", "type": "TABLE"}
    ]
    return facets  # type: ignore[no-any-return]


def test_create_truncate_alter_rename_drop(
    spark: Any, lineage: Any, receiver: LineageReceiver, warehouse: Path
) -> None:
    spark.sql("CREATE TABLE ddl_t (a INT) USING parquet")
    spark.sql("INSERT INTO ddl_t VALUES (1), (2)")
    spark.sql("TRUNCATE TABLE ddl_t")
    spark.sql("ALTER TABLE ddl_t ADD COLUMNS (b STRING)")
    # ALTER is read from the catalog after it ran; let it be read before the next statements change the table
    # (see docs/limitations.md).
    assert lineage.flush(60)
    spark.sql("ALTER TABLE ddl_t SET TBLPROPERTIES ('team' = 'data')")
    spark.sql("ALTER TABLE ddl_t RENAME TO ddl_renamed")
    spark.sql("DROP TABLE ddl_renamed")
    assert lineage.flush(60)

    _, create = only_run(receiver.events, "create_data_source_table_command")
    assert create["job"]["name"] == "lineage_tests.execute_create_data_source_table_command.default_ddl_t"
    facets = _table_facets(create, warehouse, "ddl_t")
    assert facets["lifecycleStateChange"] == {**facets["lifecycleStateChange"], "lifecycleStateChange": "CREATE"}
    assert [f["name"] for f in facets["schema"]["fields"]] == ["a"]

    _, truncate = only_run(receiver.events, "truncate_table_command")
    assert truncate["job"]["name"] == f"lineage_tests.execute_truncate_table_command.{warehouse.name}_ddl_t"
    assert _table_facets(truncate, warehouse, "ddl_t")["lifecycleStateChange"]["lifecycleStateChange"] == "TRUNCATE"

    _, add_columns = only_run(receiver.events, "alter_table_add_columns_command")
    facets = _table_facets(add_columns, warehouse, "ddl_t")
    assert facets["lifecycleStateChange"]["lifecycleStateChange"] == "ALTER"
    assert [f["name"] for f in facets["schema"]["fields"]] == ["a", "b"]

    _, set_properties = only_run(receiver.events, "alter_table_set_properties_command")
    assert _table_facets(set_properties, warehouse, "ddl_t")["lifecycleStateChange"]["lifecycleStateChange"] == "ALTER"

    _, rename = only_run(receiver.events, "alter_table_rename_command")
    assert rename["job"]["name"] == "lineage_tests.execute_alter_table_rename_command"
    change = _table_facets(rename, warehouse, "ddl_renamed")["lifecycleStateChange"]
    assert change["lifecycleStateChange"] == "RENAME"
    assert change["previousIdentifier"] == {"namespace": "file", "name": str(warehouse / "ddl_t")}

    _, drop = only_run(receiver.events, "drop_table")
    assert _table_facets(drop, warehouse, "ddl_renamed")["lifecycleStateChange"]["lifecycleStateChange"] == "DROP"


def test_drop_of_an_external_table_keeps_its_location(
    spark: Any, lineage: Any, receiver: LineageReceiver, data_dir: Path
) -> None:
    location = data_dir / "external_t"
    spark.sql(f"CREATE TABLE ext_t (a INT) USING parquet LOCATION '{location}'")
    spark.sql("DROP TABLE ext_t")
    assert lineage.flush(60)

    _, drop = only_run(receiver.events, "drop_table")
    assert datasets(drop, "outputs") == [("file", str(location))]
    facets = drop["outputs"][0]["facets"]
    assert facets["lifecycleStateChange"]["lifecycleStateChange"] == "DROP"
    assert "symlinks" not in facets  # outside the warehouse: no symlink, as in the reference
