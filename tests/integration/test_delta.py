"""Delta Lake in local Spark, with delta-spark from PyPI and its jar from Maven Central: every operation's
datasets, named as openlineage-spark names them, with their lifecycle, ``storage``, ``catalog`` and
``version`` facets and column lineage.

Delta needs its session extension and its catalog as ``spark_catalog``; the run's shared session must not
get them, so every operation runs in one Spark application of its own (``tests/integration/delta_job.py``),
started once for this module, which sends its events over HTTP to a receiver here that validates each
against the OpenLineage schemas. That application is a Spark Connect server too: at its end, with its own
lineage off, a client process (PySpark's Connect client, no JVM) saves to a Delta path with lineage of its own,
which names it as the server side names its own saves.
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.jars import delta_version, spark_line
from tests.support import REPO_ROOT, LineageReceiver, client_python, query_events, run_ends

pytestmark = pytest.mark.spark

APP = "delta_lineage_tests"


@dataclass
class DeltaApp:
    base: Path
    events: list[dict[str, Any]]
    kafka: str | None
    """The bootstrap servers of the broker the Kafka to Delta pipeline ran against (``None``: it did not run)."""

    def runs(self, job: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """The runs of the job named ``APP.<job>``, in the order they started, each as its START and COMPLETE
        events. (Not in the order their events came: with several HTTP lanes, each sends a run's events, and two
        runs spooled together, as a Connect client keeps an action's events for the next ones', may come in either
        order.)"""
        by_run: dict[str, list[dict[str, Any]]] = {}
        for event in query_events(self.events):
            if event["job"]["name"] == f"{APP}.{job}":
                by_run.setdefault(event["run"]["runId"], []).append(event)
        for events in by_run.values():
            assert run_ends([e["eventType"] for e in events]) == ("START", "COMPLETE"), job
        runs = [(events[0], events[-1]) for events in by_run.values()]
        return sorted(runs, key=lambda run: _epoch_ms(run[0]["eventTime"]))

    def complete(self, job: str) -> dict[str, Any]:
        """The COMPLETE event of the job's only run."""
        runs = self.runs(job)
        names = sorted({e["job"]["name"] for e in query_events(self.events)})
        assert len(runs) == 1, f"{len(runs)} runs of {job}; jobs: {names}"
        return runs[0][1]

    def path(self, *parts: str) -> str:
        return str(self.base.joinpath(*parts))


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, kafka: Any) -> Iterator[DeltaApp]:
    pyspark = pytest.importorskip("pyspark")
    wanted = delta_version(pyspark.__version__)
    if wanted is None:
        pytest.skip(f"no Delta Lake release supports Spark {spark_line(pyspark.__version__)}")
    pytest.importorskip("delta", reason="delta-spark is not installed (the `delta` extra)")
    installed = importlib.metadata.version("delta-spark")
    assert installed == wanted, f"delta-spark {installed} is installed; tests/jars.py loads Delta {wanted}'s jar"
    base = tmp_path_factory.mktemp("delta").resolve()
    receiver = LineageReceiver()
    try:
        command = [sys.executable, "-m", "tests.integration.delta_job", "--url", receiver.url, "--base", str(base)]
        command += ["--kafka", kafka.bootstrap] if kafka is not None else []
        command += ["--client", client_python()]
        finished = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=900, check=False)
        assert finished.returncode == 0, f"the Delta application failed:\n{finished.stderr[-4000:]}"
        events = list(receiver.events)
    finally:
        receiver.close()
    assert not receiver.invalid, "events that fail the OpenLineage schemas:\n" + "\n".join(receiver.invalid)
    yield DeltaApp(base, events, kafka.bootstrap if kafka is not None else None)


def _ids(event: dict[str, Any], kind: str) -> list[tuple[str, str]]:
    return sorted((d["namespace"], d["name"]) for d in event[kind])


def _epoch_ms(event_time: str) -> int:
    return round(datetime.fromisoformat(event_time.replace("Z", "+00:00")).timestamp() * 1000)


def _one(event: dict[str, Any], kind: str) -> dict[str, Any]:
    assert len(event[kind]) == 1, _ids(event, kind)
    return dict(event[kind][0])


def _by_name(event: dict[str, Any], kind: str, name: str) -> dict[str, Any]:
    (dataset,) = [d for d in event[kind] if d["name"] == name]
    return dict(dataset)


def _facet(dataset: dict[str, Any], name: str) -> Any:
    return (dataset.get("facets") or {}).get(name)


def _version(dataset: dict[str, Any]) -> str | None:
    facet = _facet(dataset, "version")
    return facet["datasetVersion"] if facet else None


def _lifecycle(dataset: dict[str, Any]) -> str | None:
    facet = _facet(dataset, "lifecycleStateChange")
    return facet["lifecycleStateChange"] if facet else None


def _symlinks(dataset: dict[str, Any]) -> list[tuple[str, str, str]]:
    facet = _facet(dataset, "symlinks")
    return [(i["namespace"], i["name"], i["type"]) for i in facet["identifiers"]] if facet else []


def _schema(dataset: dict[str, Any]) -> list[str]:
    return [field["name"] for field in _facet(dataset, "schema")["fields"]]


def _columns(dataset: dict[str, Any]) -> dict[str, list[str]]:
    """Column lineage as ``{field: ["<input dataset's last segment>.<field>:<subtypes>", ...]}``, the rows'
    dependencies under ``(rows)``."""

    def render(sources: list[dict[str, Any]]) -> list[str]:
        rendered = []
        for source in sources:
            subtypes = ",".join(sorted(t["subtype"] for t in source["transformations"]))
            rendered.append(f"{source['name'].rsplit('/', 1)[-1]}.{source['field']}:{subtypes}")
        return sorted(rendered)

    facet = _facet(dataset, "columnLineage")
    found = {name: render(value["inputFields"]) for name, value in facet["fields"].items()}
    if facet.get("dataset"):
        found["(rows)"] = render(facet["dataset"])
    return found


def _assert_delta_table(dataset: dict[str, Any], *, version: str | None, catalog: bool) -> None:
    assert _facet(dataset, "storage")["storageLayer"] == "delta"
    assert _facet(dataset, "storage")["fileFormat"] == "parquet"
    assert _version(dataset) == version
    if catalog:
        facet = _facet(dataset, "catalog")
        assert (facet["framework"], facet["type"], facet["name"], facet["source"]) == (
            "delta",
            "delta",
            "spark_catalog",
            "spark",
        )
    else:
        assert _facet(dataset, "catalog") is None


# --- path tables ---------------------------------------------------------------------------------------------


def test_path_saves_name_the_table_by_its_path(app: DeltaApp) -> None:
    runs = app.runs("execute_save_into_data_source_command.paths_people")
    assert len(runs) == 3  # save, append, overwrite
    lifecycles = []
    for _start, complete in runs:
        assert _ids(complete, "inputs") == [("file", app.path("source"))]
        output = _one(complete, "outputs")
        assert (output["namespace"], output["name"]) == ("file", app.path("paths", "people"))
        assert _symlinks(output) == []
        assert _schema(output) == ["id", "name", "city"]
        _assert_delta_table(output, version=None, catalog=False)  # a save keeps no handle on the Delta log
        lifecycles.append(_lifecycle(output))
    assert lifecycles == ["CREATE", None, "OVERWRITE"]
    assert _columns(_one(runs[1][1], "outputs"))["(rows)"] == ["source.id:FILTER"]
    assert _columns(_one(runs[2][1], "outputs"))["name"] == ["source.name:TRANSFORMATION"]


def test_a_connect_clients_delta_saves_are_named_as_the_server_side_names_its_own(app: DeltaApp) -> None:
    """A Spark Connect client of a server that runs no lineage (the application's own, turned off) saves to a
    Delta path and appends to it: its own lineage, from its protos alone, names them as the server side named
    its save and append of the same source (its own path aside), with the same facets: the Delta table's
    ``storage``, its ``lifecycleStateChange``, the ``dataSource``; and it says which column lineage it lacks."""
    client = app.runs("execute_save_into_data_source_command.paths_client_people")
    server = app.runs("execute_save_into_data_source_command.paths_people")[:2]  # save, append
    assert len(client) == 2
    for (start, complete), (_, own) in zip(client, server):
        for event in (start, complete):
            assert event["run"]["facets"]["spark_connect"]["derivedOnClient"] is True
        assert _ids(complete, "inputs") == _ids(own, "inputs") == [("file", app.path("source"))]
        mine, theirs = _one(complete, "outputs"), _one(own, "outputs")
        assert (mine["namespace"], mine["name"]) == ("file", app.path("paths", "client_people"))
        for facet in ("storage", "lifecycleStateChange", "dataSource"):
            assert _facet(mine, facet) == _facet(theirs, facet), facet
    assert [_lifecycle(_one(complete, "outputs")) for _, complete in client] == ["CREATE", None]
    # The accepted difference: the source's columns are the server's to know (the client claims none, and says
    # so; python.connect.resolveSchemas=true asks the server, tests/integration/test_connect_client.py).
    for _, complete in client:
        assert _facet(_one(complete, "outputs"), "columnLineage") is None
        assert [error["errorMessage"] for error in complete["run"]["facets"]["extractionError"]["errors"]] == [
            "column lineage: no column lineage: which columns are written is not known on the client (a * over a "
            "source whose schema is not known on the client); python.connect.resolveSchemas=true asks the server"
        ]
    assert all(_facet(_one(own, "outputs"), "columnLineage") for _, own in server)


@pytest.mark.parametrize(
    ("output", "version"),
    [("latest", "2"), ("version_1", "1"), ("at_timestamp", "0")],
    ids=["latest", "versionAsOf", "timestampAsOf"],
)
def test_path_reads_carry_the_version_they_read(app: DeltaApp, output: str, version: str) -> None:
    complete = app.complete(f"execute_insert_into_hadoop_fs_relation_command.out_{output}")
    read = _one(complete, "inputs")
    assert (read["namespace"], read["name"]) == ("file", app.path("paths", "people"))
    _assert_delta_table(read, version=version, catalog=False)
    assert _schema(read) == ["id", "name", "city"]
    assert _columns(_one(complete, "outputs"))["name"] == ["people.name:IDENTITY"]


# --- catalog tables --------------------------------------------------------------------------------------------


def _table_symlink(app: DeltaApp, table: str) -> list[tuple[str, str, str]]:
    return [(f"file:{app.path('warehouse')}", f"default.{table}", "TABLE")]


def test_save_as_table_is_one_ctas_then_an_append(app: DeltaApp) -> None:
    created = _one(app.complete("atomic_create_table_as_select.default_people_saved"), "outputs")
    assert (created["namespace"], created["name"]) == ("file", app.path("warehouse", "people_saved"))
    assert _symlinks(created) == _table_symlink(app, "people_saved")
    assert _lifecycle(created) == "CREATE"
    _assert_delta_table(created, version="0", catalog=True)
    assert _schema(created) == ["id", "name", "city"]
    # The CTAS's own data write is not a run of its own (openlineage-spark filters it too): the only append
    # is saveAsTable(mode="append").
    appended = app.complete("append_data_exec_v1.spark_catalog_default_people_saved")
    assert _ids(appended, "inputs") == [("file", app.path("source"))]
    output = _one(appended, "outputs")
    assert _symlinks(output) == _table_symlink(app, "people_saved")
    assert _lifecycle(output) is None
    _assert_delta_table(output, version="1", catalog=True)


def test_create_table_then_insert_into(app: DeltaApp) -> None:
    created = app.complete("create_table.default_cities")
    assert created["inputs"] == []
    table = _one(created, "outputs")
    assert (table["name"], _lifecycle(table), _symlinks(table)) == (
        app.path("warehouse", "cities"),
        "CREATE",
        _table_symlink(app, "cities"),
    )
    _assert_delta_table(table, version="0", catalog=True)
    assert _schema(table) == ["city", "residents"]

    inserted = app.complete("append_data_exec_v1.spark_catalog_default_cities")
    read = _one(inserted, "inputs")
    assert (read["name"], _symlinks(read)) == (
        app.path("warehouse", "people_saved"),
        _table_symlink(app, "people_saved"),
    )
    _assert_delta_table(read, version="1", catalog=True)
    assert _schema(read) == ["id", "name", "city"]  # from the Delta log: the metastore keeps no schema
    written = _one(inserted, "outputs")
    _assert_delta_table(written, version="1", catalog=True)
    assert _columns(written) == {"city": ["people_saved.city:IDENTITY"], "(rows)": ["people_saved.city:GROUP_BY"]}


def test_ctas(app: DeltaApp) -> None:
    complete = app.complete("atomic_create_table_as_select.default_paris")
    assert _ids(complete, "inputs") == [("file", app.path("warehouse", "people_saved"))]
    table = _one(complete, "outputs")
    assert (table["name"], _lifecycle(table), _symlinks(table)) == (
        app.path("warehouse", "paris"),
        "CREATE",
        _table_symlink(app, "paris"),
    )
    _assert_delta_table(table, version="0", catalog=True)
    assert _columns(table) == {
        "id": ["people_saved.id:IDENTITY"],
        "name": ["people_saved.name:TRANSFORMATION"],
        "(rows)": ["people_saved.city:FILTER"],
    }


def test_table_read_back_in_time(app: DeltaApp) -> None:
    read = _one(app.complete("execute_insert_into_hadoop_fs_relation_command.out_cities_v1"), "inputs")
    assert (read["name"], _symlinks(read)) == (app.path("warehouse", "cities"), _table_symlink(app, "cities"))
    _assert_delta_table(read, version="1", catalog=True)


# --- MERGE, UPDATE, DELETE -------------------------------------------------------------------------------------


def test_merge_reads_target_and_source_and_writes_the_target(app: DeltaApp) -> None:
    complete = app.complete("execute_merge_into_command.cities")
    cities, people = app.path("warehouse", "cities"), app.path("warehouse", "people_saved")
    assert _ids(complete, "inputs") == [("file", cities), ("file", people)]
    _assert_delta_table(_by_name(complete, "inputs", cities), version="1", catalog=True)
    written = _one(complete, "outputs")
    assert (written["name"], _symlinks(written), _lifecycle(written)) == (cities, _table_symlink(app, "cities"), None)
    _assert_delta_table(written, version="2", catalog=True)
    assert _columns(written) == {
        "city": ["cities.city:IDENTITY", "people_saved.city:IDENTITY"],
        "residents": ["cities.residents:IDENTITY,TRANSFORMATION"],
        "(rows)": ["cities.city:JOIN", "people_saved.city:JOIN", "people_saved.id:FILTER"],
    }


def test_update(app: DeltaApp) -> None:
    complete = app.complete("execute_update_command")  # no suffix, as openlineage-spark names it
    paris = app.path("warehouse", "paris")
    read, written = _one(complete, "inputs"), _one(complete, "outputs")
    assert (read["name"], written["name"]) == (paris, paris)
    _assert_delta_table(read, version="0", catalog=True)
    _assert_delta_table(written, version="1", catalog=True)
    assert _symlinks(written) == _table_symlink(app, "paris")
    assert _columns(written) == {
        "id": ["paris.id:IDENTITY"],
        "name": ["paris.id:CONDITIONAL", "paris.name:TRANSFORMATION"],
    }


def test_delete(app: DeltaApp) -> None:
    (_start, complete), _path_delete = app.runs("execute_delete_command")
    cities = app.path("warehouse", "cities")
    read, written = _one(complete, "inputs"), _one(complete, "outputs")
    assert (read["name"], written["name"]) == (cities, cities)
    _assert_delta_table(read, version="2", catalog=True)
    _assert_delta_table(written, version="3", catalog=True)
    assert _columns(written) == {
        "city": ["cities.city:IDENTITY"],
        "residents": ["cities.residents:IDENTITY"],
        "(rows)": ["cities.city:FILTER"],
    }


def test_python_api_merge_and_delete_on_a_path_table(app: DeltaApp) -> None:
    moves, source = app.path("paths", "moves"), app.path("source")
    merged = app.complete("execute_merge_into_command")  # DeltaTable.merge: the target has no alias of its own
    assert _ids(merged, "inputs") == [("file", moves), ("file", source)]
    _assert_delta_table(_by_name(merged, "inputs", moves), version="0", catalog=False)
    written = _one(merged, "outputs")
    assert (written["name"], _symlinks(written)) == (moves, [])
    _assert_delta_table(written, version="1", catalog=False)
    assert _columns(written)["city"] == ["moves.city:IDENTITY", "source.city:IDENTITY,TRANSFORMATION"]

    _sql_delete, (_start, deleted) = app.runs("execute_delete_command")
    assert _ids(deleted, "inputs") == _ids(deleted, "outputs") == [("file", moves)]
    _assert_delta_table(_one(deleted, "outputs"), version="2", catalog=False)
    assert _columns(_one(deleted, "outputs"))["(rows)"] == ["moves.id:FILTER"]


def test_a_foreach_batch_write_reads_the_delta_table_its_stream_reads(app: DeltaApp) -> None:
    table, out = ("file", app.path("paths", "stream_source")), ("file", app.path("out", "from_delta_stream"))
    stream = [e for e in app.events if e["job"]["name"] == f"{APP}.streaming_query"]
    assert [e["eventType"] for e in stream] == ["START", "RUNNING", "COMPLETE"]
    assert [_ids(e, "inputs") for e in stream] == [[], [table], [table]]
    (write,) = [e for e in query_events(app.events) if e["eventType"] == "COMPLETE" and _ids(e, "outputs") == [out]]
    assert _ids(write, "inputs") == [table]


# --- what is not reported ----------------------------------------------------------------------------------------


def test_delta_internals_are_not_reported(app: DeltaApp) -> None:
    """Delta reads its transaction log, writes its files and copies a MERGE's source with Spark executions of its
    own: none of them is a run here (openlineage-spark reports a source copy whose plan is not a filter, as
    the parity scenarios show), the log is never a dataset, and no run lost part of its lineage."""
    expected = {
        "execute_save_into_data_source_command.paths_people": 3,
        "execute_save_into_data_source_command.paths_moves": 1,
        "execute_insert_into_hadoop_fs_relation_command.out_latest": 1,
        "execute_insert_into_hadoop_fs_relation_command.out_version_1": 1,
        "execute_insert_into_hadoop_fs_relation_command.out_at_timestamp": 1,
        "execute_insert_into_hadoop_fs_relation_command.out_cities_v1": 1,
        "atomic_create_table_as_select.default_people_saved": 1,
        "append_data_exec_v1.spark_catalog_default_people_saved": 1,
        "create_table.default_cities": 1,
        "append_data_exec_v1.spark_catalog_default_cities": 1,
        "atomic_create_table_as_select.default_paris": 1,
        "execute_merge_into_command.cities": 1,
        "execute_merge_into_command": 1,
        "execute_update_command": 1,
        "execute_delete_command": 2,
        "execute_save_into_data_source_command.paths_stream_source": 1,
        "columnar_to_row": 1,  # the micro-batch of the Delta stream into foreachBatch (whose sink is no dataset)
        "execute_insert_into_hadoop_fs_relation_command.out_from_delta_stream": 1,  # its foreachBatch write
        # The Connect client's save and append: its own lineage, whose extractionError says which columns it
        # cannot follow from its protos (test_a_connect_clients_delta_saves_...).
        "execute_save_into_data_source_command.paths_client_people": 2,
    }
    if app.kafka is not None:
        expected["execute_save_into_data_source_command"] = 1  # into the topic: a Kafka save names no suffix
        expected["execute_save_into_data_source_command.paths_from_kafka"] = 1
        expected["project.paths_from_kafka_stream"] = 1  # the stream's one micro-batch
    counts: dict[str, int] = {}
    for event in query_events(app.events):
        if event["eventType"] == "COMPLETE":
            name = event["job"]["name"].removeprefix(f"{APP}.")
            counts[name] = counts.get(name, 0) + 1
            if "spark_connect" not in event["run"]["facets"]:
                assert "extractionError" not in event["run"]["facets"], event["run"]["facets"]
        for dataset in event["inputs"] + event["outputs"]:
            assert "_delta_log" not in dataset["name"], (event["job"]["name"], dataset["name"])
    assert counts == expected


def _kafka(app: DeltaApp) -> str:
    if app.kafka is None:
        pytest.skip("no Kafka broker here (scripts/test fetches and starts one)")
    return f"kafka://{app.kafka}"


def test_kafka_topic_into_delta_in_batch(app: DeltaApp) -> None:
    topic = (_kafka(app), "people_topic")
    writes = [e for e in query_events(app.events) if e["eventType"] == "COMPLETE" and e["outputs"]]
    (produce,) = [e for e in writes if _ids(e, "outputs") == [topic]]
    assert _ids(produce, "inputs") == [("file", app.path("source"))]
    (into_delta,) = [e for e in writes if _ids(e, "outputs") == [("file", app.path("paths", "from_kafka"))]]
    assert _ids(into_delta, "inputs") == [topic]
    output = _one(into_delta, "outputs")
    assert _facet(output, "storage")["storageLayer"] == "delta"
    assert _columns(output) == {
        "id": ["people_topic.key:TRANSFORMATION"],
        "name": ["people_topic.value:TRANSFORMATION"],
    }


def test_kafka_topic_into_delta_as_a_stream(app: DeltaApp) -> None:
    topic = (_kafka(app), "people_topic")
    sink = ("file", app.path("paths", "from_kafka_stream"))
    stream = [e for e in app.events if e["job"]["name"] == f"{APP}.kafka_to_delta"]
    assert [e["eventType"] for e in stream] == ["START", "RUNNING", "COMPLETE"]
    for event in stream[1:]:
        assert _ids(event, "inputs") == [topic]
        assert _ids(event, "outputs") == [sink]
    stream_run = stream[0]["run"]["runId"]
    batches = [e for e in query_events(app.events) if e["run"]["facets"]["parent"]["run"]["runId"] == stream_run]
    assert [e["eventType"] for e in batches] == ["START", "COMPLETE"]
    assert batches[1]["job"]["facets"]["jobType"]["processingType"] == "STREAMING"
    assert _ids(batches[1], "inputs") == [topic]
    assert _ids(batches[1], "outputs") == [sink]
