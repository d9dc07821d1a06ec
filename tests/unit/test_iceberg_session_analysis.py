"""Iceberg tables in Iceberg's ``SparkSessionCatalog`` (as ``spark_catalog``) and in a ``SparkCatalog``, from
plans recorded on real Spark 3.5 and 4.1 (``tests/fixtures/record_iceberg_session_plans.py``), analyzed
without a JVM: job names as openlineage-spark gives them, the table as each command's output, and the
``schema``, ``version`` and lifecycle facets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openlineage.client.generated.lifecycle_state_change_dataset import LifecycleStateChange
from openlineage.client.serde import Serde

from spark_lineage.analysis import analyze
from spark_lineage.config import ColumnLineageConfig, LineageConfig
from spark_lineage.events import EventBuilder
from spark_lineage.lineage import AnalysisContext, DatasetLineage, QueryLineage
from tests.fixtures.recorded import recorded_query, recorded_session
from tests.support import validate_event

PLANS = Path(__file__).parent.parent / "fixtures" / "iceberg_session_plans"
VERSIONS = sorted(p.name for p in PLANS.iterdir() if p.is_dir())
BASE = "/tmp/spark-lineage-fixtures/iceberg_session"
APP = "fixture_recorder"


@pytest.fixture(params=VERSIONS)
def version(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _runs(version: str, scenario: str) -> list[tuple[str, QueryLineage]]:
    """Each capture of a scenario, in order, as its job name and lineage (its events validated)."""
    ctx = AnalysisContext(session=recorded_session(PLANS / version))
    runs = []
    for path in sorted((PLANS / version).glob(f"{scenario}-*.json"), key=lambda p: int(p.stem.rsplit("-", 1)[1])):
        query = recorded_query(PLANS / version, path.stem)
        lineage = analyze(query, ctx, ColumnLineageConfig())
        events = EventBuilder(LineageConfig(), ctx.session, "01930000-0000-7000-8000-000000000000").query_events(
            query, lineage
        )
        for event in events:
            validate_event(json.loads(Serde.to_json(event)))
        runs.append((events[-1].job.name, lineage))
    return runs


def _by_job(version: str, scenario: str) -> dict[str, QueryLineage]:
    runs = _runs(version, scenario)
    assert len({name for name, _ in runs}) == len(runs), [name for name, _ in runs]
    return {name.removeprefix(f"{APP}."): lineage for name, lineage in runs}


def _output(lineage: QueryLineage) -> DatasetLineage:
    assert len(lineage.outputs) == 1, lineage.outputs
    return lineage.outputs[0]


def _fields(dataset: DatasetLineage) -> list[tuple[str, str]]:
    return [(f.name, f.type) for f in dataset.schema or []]


def _version(dataset: DatasetLineage) -> Any:
    facet = dataset.extra_facets.get("version")
    return facet.datasetVersion if facet is not None else None


def _session_table(name: str) -> tuple[str, str]:
    return ("file", f"{BASE}/session_ice/default/{name}")


def _ids(datasets: list[DatasetLineage]) -> list[tuple[str, str]]:
    return sorted((d.identifier.namespace, d.identifier.name) for d in datasets)


def test_create_table_is_named_without_the_catalog(version: str) -> None:
    runs = _by_job(version, "session_create_table")
    assert list(runs) == ["create_table.default_s_created"]
    output = _output(runs["create_table.default_s_created"])
    assert _ids([output]) == [_session_table("s_created")]
    assert [(s.namespace, s.name) for s in output.symlinks] == [(f"file:{BASE}/session_ice", "default.s_created")]
    assert (output.lifecycle, _fields(output), _version(output)) == (
        LifecycleStateChange.CREATE,
        [("a", "integer"), ("b", "string")],
        None,
    )


def test_ctas_command_and_its_append(version: str) -> None:
    runs = _by_job(version, "session_ctas")
    assert sorted(runs) == ["append_data.spark_catalog_default_s_ctas", "atomic_create_table_as_select.default_s_ctas"]
    ctas = _output(runs["atomic_create_table_as_select.default_s_ctas"])
    append = _output(runs["append_data.spark_catalog_default_s_ctas"])
    assert _ids([ctas]) == _ids([append]) == [_session_table("s_ctas")]
    assert _fields(ctas) == [("a", "integer"), ("ub", "string")]
    assert (ctas.lifecycle, append.lifecycle) == (LifecycleStateChange.CREATE, None)
    # The CTAS's table is at the snapshot its data write made.
    assert _version(ctas) is not None and _version(ctas) == _version(append)


def test_rtas_command_and_its_overwrite(version: str) -> None:
    runs = _by_job(version, "session_rtas")
    overwrite = f"overwrite_by_expression.{'spark_catalog_' if version >= 'spark-4' else ''}default_s_rtas"
    assert sorted(runs) == sorted(
        ["create_table.default_s_rtas", "atomic_replace_table_as_select.default_s_rtas", overwrite]
    )
    rtas = _output(runs["atomic_replace_table_as_select.default_s_rtas"])
    assert (rtas.lifecycle, _fields(rtas)) == (LifecycleStateChange.OVERWRITE, [("a", "integer"), ("d", "string")])
    assert _version(rtas) is not None and _version(rtas) == _version(_output(runs[overwrite]))
    assert _ids(runs["atomic_replace_table_as_select.default_s_rtas"].inputs) == [("file", f"{BASE}/t2")]


def test_insert_appends_with_the_catalog_in_the_name(version: str) -> None:
    runs = _by_job(version, "session_insert")
    assert sorted(runs) == ["append_data.spark_catalog_default_s_inserted", "create_table.default_s_inserted"]
    append = _output(runs["append_data.spark_catalog_default_s_inserted"])
    assert _ids([append]) == [_session_table("s_inserted")]
    assert _version(append) is not None


@pytest.mark.parametrize(
    ("scenario", "table", "location"),
    [
        ("session_alter_add_column", "default_s_altered", f"{BASE}/session_ice/default/s_altered"),
        ("catalog_alter_add_column", "db_c_altered", f"{BASE}/ice/db/c_altered"),
    ],
)
def test_alter_table_reports_the_table_with_its_new_schema(
    version: str, scenario: str, table: str, location: str
) -> None:
    runs = _by_job(version, scenario)
    assert sorted(runs) == [f"alter_table.{table}", f"create_table.{table}"]
    created, altered = _output(runs[f"create_table.{table}"]), _output(runs[f"alter_table.{table}"])
    assert _ids([created]) == _ids([altered]) == [("file", location)]
    # CREATE keeps the schema it declared, though the table was read after the ALTER.
    assert _fields(created) == [("a", "integer"), ("b", "string")]
    assert (altered.lifecycle, _fields(altered)) == (
        LifecycleStateChange.ALTER,
        [("a", "integer"), ("b", "string"), ("c", "long")],
    )
    assert runs[f"alter_table.{table}"].errors == []
