"""RDD lineage: DataFrames over RDDs, from plans recorded on real Spark (tests/fixtures/record_plans.py), and
the pure-Python pieces (directory reduction, input-path splitting)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from openlineage.client.serde import Serde

from spark_lineage.analysis import analyze
from spark_lineage.config import LineageConfig
from spark_lineage.events import EventBuilder
from spark_lineage.handlers.rdd import rdd_inputs
from spark_lineage.jvm.rdd import split_input_paths
from spark_lineage.lineage import AnalysisContext
from spark_lineage.naming import read_directories
from spark_lineage.plan import CapturedNode, RddRecord
from tests.fixtures.recorded import recorded_query, recorded_session
from tests.support import validate_event

PLANS = Path(__file__).parent.parent / "fixtures" / "plans"
VERSIONS = sorted(p.name for p in PLANS.iterdir() if p.is_dir())
DATA = "/tmp/spark-lineage-fixtures/data"


@pytest.fixture(params=VERSIONS)
def version(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize(
    ("operation", "output"),
    [("rdd_text_file", f"{DATA}/lines"), ("rdd_of_dataframe", f"{DATA}/people_rdd")],
)
def test_a_dataframe_over_an_rdd_reads_what_its_rdd_lineage_reads(version: str, operation: str, output: str) -> None:
    session = recorded_session(PLANS / version)
    ctx = AnalysisContext(session=session)
    query = recorded_query(PLANS / version, operation)
    lineage = analyze(query, ctx)
    assert lineage.errors == []
    # A file read through textFile or a file scan is reported as its directory, as the reference does.
    assert [(d.identifier.namespace, d.identifier.name) for d in lineage.inputs] == [("file", DATA)]
    assert [(d.identifier.namespace, d.identifier.name) for d in lineage.outputs] == [("file", output)]
    assert lineage.inputs[0].schema is None
    assert lineage.outputs[0].column_lineage is None or not lineage.outputs[0].column_lineage.fields
    for event in EventBuilder(LineageConfig(), session, "01930000-0000-7000-8000-000000000000").query_events(
        query, lineage
    ):
        validate_event(json.loads(Serde.to_json(event)))


def _rdd(
    rdd_id: int, class_name: str, *deps: int, paths: tuple[str, ...] = (), files: tuple[str, ...] = ()
) -> RddRecord:
    return RddRecord(rdd_id, f"org.apache.spark.rdd.{class_name}", None, deps, paths, frozenset(files))


def test_only_file_reading_rdds_give_inputs_each_once() -> None:
    graph = (
        _rdd(4, "UnionRDD", 3, 2, 1),
        _rdd(
            3, "HadoopRDD", paths=("file:/d/a/1.txt", "file:/d/a/2.txt"), files=("file:/d/a/1.txt", "file:/d/a/2.txt")
        ),
        _rdd(2, "NewHadoopRDD", paths=("hdfs://nn:8020/logs/*.gz", "file:/d/a")),
        _rdd(1, "ParallelCollectionRDD"),
    )
    assert [(d.identifier.namespace, d.identifier.name) for d in rdd_inputs(graph)] == [
        ("file", "/d/a"),
        ("hdfs://nn:8020", "/logs/*.gz"),
    ]


def test_read_directories_reports_a_files_directory_and_a_directory_itself() -> None:
    paths = ["file:/x/a.csv", "file:/x/b.csv", "file:/y", "file:/y/c.csv", "file:/z/*.csv"]
    assert read_directories(paths, {"file:/x/a.csv", "file:/x/b.csv", "file:/y/c.csv"}) == [
        "file:/x",
        "file:/y",
        "file:/z/*.csv",
    ]


def test_hadoop_input_paths_split_on_unescaped_commas() -> None:
    assert split_input_paths("file:/a,file:/b/{x\\,y},file:/c\\\\d") == ("file:/a", "file:/b/{x,y}", "file:/c\\d")
    assert split_input_paths("") == ()


def test_an_rdd_graph_round_trips_through_json() -> None:
    node = CapturedNode(
        "LogicalRDD", props={"rdd": (_rdd(2, "MapPartitionsRDD", 1), _rdd(1, "HadoopRDD", paths=("f",)))}
    )
    assert CapturedNode.from_dict(json.loads(json.dumps(node.to_dict()))) == node
