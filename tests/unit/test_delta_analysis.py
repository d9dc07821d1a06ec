"""Delta Lake's plans, recorded on real Spark 3.5 (Delta 3.3) and 4.1 (Delta 4.1) from the Delta parity scenarios
(``tests/fixtures/record_delta_plans.py``), analyzed without a JVM: dataset names, symlinks, lifecycle,
``storage``/``catalog``/``version`` facets, job names and column lineage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openlineage.client.generated.lifecycle_state_change_dataset import LifecycleStateChange
from openlineage.client.serde import Serde

from spark_lineage import naming
from spark_lineage.analysis import analyze, is_empty, is_reported, read_only_roots
from spark_lineage.config import ColumnLineageConfig, LineageConfig
from spark_lineage.events import EventBuilder
from spark_lineage.handlers.relations import HadoopFsRelationHandler
from spark_lineage.lineage import AnalysisContext, ColumnSource, DatasetLineage, QueryLineage
from spark_lineage.plan import CapturedNode, CapturedQuery, SessionInfo
from tests.fixtures.recorded import recorded_query, recorded_session
from tests.support import validate_event

PLANS = Path(__file__).parent.parent / "fixtures" / "delta_plans"
VERSIONS = sorted(p.name for p in PLANS.iterdir() if p.is_dir())
BASE = "/tmp/spark-lineage-fixtures/delta"
WAREHOUSE = f"{BASE}/warehouse"


@pytest.fixture(params=VERSIONS)
def version(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _session(version: str) -> SessionInfo:
    return recorded_session(PLANS / version)


def _analyze(version: str, name: str) -> tuple[QueryLineage, list[Any]]:
    ctx = AnalysisContext(session=_session(version))
    query = recorded_query(PLANS / version, name)
    lineage = analyze(query, ctx, ColumnLineageConfig())
    events = EventBuilder(LineageConfig(), ctx.session, "01930000-0000-7000-8000-000000000000").query_events(
        query, lineage
    )
    for event in events:
        validate_event(json.loads(Serde.to_json(event)))
    return lineage, events


def _ids(datasets: list[DatasetLineage]) -> list[tuple[str, str]]:
    return sorted((d.identifier.namespace, d.identifier.name) for d in datasets)


def _one(datasets: list[DatasetLineage]) -> DatasetLineage:
    assert len(datasets) == 1, _ids(datasets)
    return datasets[0]


def _version(dataset: DatasetLineage) -> str | None:
    facet = dataset.extra_facets.get("version")
    return str(facet.datasetVersion) if facet is not None else None


def _symlinks(dataset: DatasetLineage) -> list[tuple[str, str]]:
    return [(s.namespace, s.name) for s in dataset.symlinks]


def _assert_delta(dataset: DatasetLineage, *, version: str | None, catalog: bool) -> None:
    storage = dataset.extra_facets["storage"]
    assert (storage.storageLayer, storage.fileFormat) == ("delta", "parquet")
    assert _version(dataset) == version
    assert ("catalog" in dataset.extra_facets) is catalog
    if catalog:
        facet = dataset.extra_facets["catalog"]
        assert (facet.framework, facet.type, facet.name, facet.source) == ("delta", "delta", "spark_catalog", "spark")


def _columns(dataset: DatasetLineage) -> dict[str, list[str]]:
    def render(sources: list[ColumnSource]) -> list[str]:
        return sorted(
            f"{s.column.dataset.name.rsplit('/', 1)[-1]}.{s.column.field}:"
            + ",".join(sorted(t.subtype for t in s.transformations))
            for s in sources
        )

    assert dataset.column_lineage is not None
    found = {name: render(sources) for name, sources in dataset.column_lineage.fields.items()}
    if dataset.column_lineage.dataset:
        found["(rows)"] = render(dataset.column_lineage.dataset)
    return found


def _table(name: str) -> tuple[str, str]:
    return ("file", f"{WAREHOUSE}/{name}")


def _symlink(name: str) -> list[tuple[str, str]]:
    return [(f"file:{WAREHOUSE}", f"default.{name}")]


def test_path_saves(version: str) -> None:
    lifecycles = []
    for index in range(3):
        lineage, events = _analyze(version, f"delta_path_write-{index}")
        output = _one(lineage.outputs)
        assert _ids(lineage.outputs) == [("file", f"{BASE}/out/delta_path")]
        assert output.symlinks == []
        _assert_delta(output, version=None, catalog=False)
        lifecycles.append(output.lifecycle)
        assert events[-1].job.name == "fixture_recorder.execute_save_into_data_source_command.out_delta_path"
        assert lineage.errors == []
    assert lifecycles == [LifecycleStateChange.CREATE, None, LifecycleStateChange.OVERWRITE]
    assert _ids(_analyze(version, "delta_path_write-1")[0].inputs) == [("file", f"{BASE}/t2")]


@pytest.mark.parametrize(("fixture", "read"), [(2, "1"), (3, "0"), (4, "0")], ids=["latest", "version", "timestamp"])
def test_path_reads_carry_the_version_read(version: str, fixture: int, read: str) -> None:
    lineage, _ = _analyze(version, f"delta_path_read_time_travel-{fixture}")
    dataset = _one(lineage.inputs)
    assert _ids(lineage.inputs) == [("file", f"{BASE}/out/delta_versions")]
    _assert_delta(dataset, version=read, catalog=False)
    assert [f.name for f in dataset.schema or []] == ["a", "b", "c"]


def test_ctas_is_one_run(version: str) -> None:
    staged_append, _ = _analyze(version, "delta_ctas-0")
    assert is_empty(staged_append)  # the CTAS's own data write: not reported on its own
    lineage, events = _analyze(version, "delta_ctas-1")
    output = _one(lineage.outputs)
    assert _ids(lineage.outputs) == [_table("delta_ctas")]
    assert (_symlinks(output), output.lifecycle) == (_symlink("delta_ctas"), LifecycleStateChange.CREATE)
    _assert_delta(output, version="0", catalog=True)
    assert _ids(lineage.inputs) == [("file", f"{BASE}/t1")]
    assert _columns(output) == {"a": ["t1.a:IDENTITY"], "ub": ["t1.b:TRANSFORMATION"], "(rows)": ["t1.c:FILTER"]}
    assert events[-1].job.name == "fixture_recorder.atomic_create_table_as_select.default_delta_ctas"


def test_create_table_then_insert(version: str) -> None:
    created, events = _analyze(version, "delta_insert_into-0")
    table = _one(created.outputs)
    assert (_ids(created.outputs), table.lifecycle, _symlinks(table)) == (
        [_table("delta_inserted")],
        LifecycleStateChange.CREATE,
        _symlink("delta_inserted"),
    )
    _assert_delta(table, version="0", catalog=True)
    assert events[-1].job.name == "fixture_recorder.create_table.default_delta_inserted"
    inserted, events = _analyze(version, "delta_insert_into-1")
    written = _one(inserted.outputs)
    assert written.lifecycle is None
    _assert_delta(written, version="1", catalog=True)
    assert events[-1].job.name == "fixture_recorder.append_data_exec_v1.spark_catalog_default_delta_inserted"
    assert _columns(written) == {"a": ["t2.a:IDENTITY"], "d": ["t2.d:IDENTITY"], "(rows)": ["t2.a:FILTER"]}


def test_merge(version: str) -> None:
    lineage, events = _analyze(version, "delta_merge_update_delete-3")
    assert _ids(lineage.inputs) == [("file", f"{BASE}/t2"), _table("delta_merged")]
    target = next(d for d in lineage.inputs if d.identifier.name.endswith("delta_merged"))
    _assert_delta(target, version="1", catalog=True)
    written = _one(lineage.outputs)
    assert (_symlinks(written), written.lifecycle) == (_symlink("delta_merged"), None)
    _assert_delta(written, version="2", catalog=True)
    assert [f.name for f in written.schema or []] == ["a", "b"]
    assert _columns(written) == {
        "a": ["delta_merged.a:IDENTITY", "t2.a:IDENTITY"],
        "b": ["delta_merged.b:IDENTITY", "t2.d:IDENTITY"],
        "(rows)": ["delta_merged.a:JOIN", "t2.a:JOIN"],
    }
    assert events[-1].job.name == "fixture_recorder.execute_merge_into_command.delta_merged"
    source_copy, _ = _analyze(version, "delta_merge_update_delete-2")  # Delta's localCheckpoint of the source
    assert (_ids(source_copy.inputs), source_copy.outputs) == ([("file", f"{BASE}/t2")], [])


def test_update_and_delete(version: str) -> None:
    updated, events = _analyze(version, "delta_merge_update_delete-4")
    assert _ids(updated.inputs) == _ids(updated.outputs) == [_table("delta_merged")]
    _assert_delta(_one(updated.inputs), version="2", catalog=True)
    _assert_delta(_one(updated.outputs), version="3", catalog=True)
    assert _columns(_one(updated.outputs)) == {
        "a": ["delta_merged.a:IDENTITY"],
        "b": ["delta_merged.a:CONDITIONAL", "delta_merged.b:TRANSFORMATION"],
    }
    assert events[-1].job.name == "fixture_recorder.execute_update_command"
    deleted, events = _analyze(version, "delta_merge_update_delete-5")
    _assert_delta(_one(deleted.inputs), version="3", catalog=True)
    _assert_delta(_one(deleted.outputs), version="4", catalog=True)
    assert _columns(_one(deleted.outputs)) == {
        "a": ["delta_merged.a:IDENTITY"],
        "b": ["delta_merged.b:IDENTITY"],
        "(rows)": ["delta_merged.a:FILTER"],
    }
    assert events[-1].job.name == "fixture_recorder.execute_delete_command"


def test_merge_into_a_path_table(version: str) -> None:
    lineage, events = _analyze(version, "delta_path_merge-1")
    path = ("file", f"{BASE}/out/delta_path_merged")
    assert _ids(lineage.inputs) == [path, ("file", f"{BASE}/t2")]
    written = _one(lineage.outputs)
    assert (_ids(lineage.outputs), written.symlinks) == ([path], [])
    _assert_delta(written, version="1", catalog=False)
    assert events[-1].job.name == "fixture_recorder.execute_merge_into_command.out_delta_path_merged"


@pytest.mark.parametrize(("fixture", "read"), [(3, "0"), (4, "1")], ids=["version_as_of", "latest"])
def test_table_reads(version: str, fixture: int, read: str) -> None:
    lineage, _ = _analyze(version, f"delta_table_time_travel-{fixture}")
    dataset = _one(lineage.inputs)
    assert (_ids(lineage.inputs), _symlinks(dataset)) == ([_table("delta_history")], _symlink("delta_history"))
    _assert_delta(dataset, version=read, catalog=True)
    assert [f.name for f in dataset.schema or []] == ["a", "b"]  # from the relation: the metastore has none


def test_captures_round_trip_through_json(version: str) -> None:
    for path in (PLANS / version).glob("delta_*.json"):
        data = json.loads(path.read_text())
        assert CapturedQuery.from_dict(data).to_dict() == data


def test_delta_internal_executions_are_not_read() -> None:
    delta = {"spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions, "
             "io.delta.sql.DeltaSparkSessionExtension"}  # fmt: skip
    assert not is_reported("LogicalRDD", "deltaTransactionalWrite", filter_read_only=True)
    for root in ("SerializeFromObject", "Filter"):
        assert not is_reported(root, "collect", filter_read_only=True, read_only_roots=read_only_roots(delta))
        assert is_reported(root, "collect", filter_read_only=True, read_only_roots=read_only_roots({}))


def test_the_transaction_log_is_no_dataset() -> None:
    assert naming.is_delta_log("file:/data/t/_delta_log/00000000000000000001.json")
    assert naming.is_delta_log("s3a://b/t/_delta_log")
    assert not naming.is_delta_log("file:/data/t/part-0000.parquet")
    relation = CapturedNode(
        "org.apache.spark.sql.execution.datasources.HadoopFsRelation",
        {"rootPaths": ["file:/data/t/_delta_log/00000000000000000000.json", "file:/data/t/_delta_log/0001.json"]},
    )
    ctx = AnalysisContext(session=SessionInfo("a", "local-1", "3.5.9", "local", None))
    assert HadoopFsRelationHandler().inputs(relation, ctx) == []
