"""What ``%lineage`` shows, which runs, how its options parse, and how a notebook's name is found, without a
kernel or a JVM."""

from __future__ import annotations

import logging
import re

import pytest

from spark_lineage import notebook, notebook_graph
from spark_lineage.activation import notebook_name
from spark_lineage.errors import NotebookUsageError
from spark_lineage.notebook import LineageGraph, Options, lineage_magic, parse_options
from spark_lineage.notebook_graph import ELLIPSIS, build, mermaid, select_runs, wrap_middle
from spark_lineage.process import PROCESS
from spark_lineage.session import RunSummary

RUNS = [
    RunSummary("etl.load", "COMPLETE", ("/data/raw",), ("/data/clean",), "run-1"),
    RunSummary("etl.report", "FAIL", ("/data/clean", "s3://bucket/dims"), ("/data/report",), "run-2"),
    RunSummary("etl.merge", "COMPLETE", ("/data/report",), ("/data/report",), "run-3"),  # reads its own target
]


def test_text_shows_one_line_per_run() -> None:
    assert repr(LineageGraph(RUNS)).splitlines() == [
        "/data/raw -> [etl.load] -> /data/clean",
        "/data/clean, s3://bucket/dims -> [etl.report] -> /data/report FAILED",
        "/data/report -> [etl.merge] -> /data/report",
    ]
    assert repr(LineageGraph([])) == "no lineage runs yet in this session"
    assert LineageGraph([])._repr_svg_() is None
    assert LineageGraph([])._repr_markdown_() is None


def test_long_names_keep_their_start_and_end() -> None:
    path = "/warehouse/sales_department/quarterly_reports/2024/q3/revenue_by_city_and_product"
    lines = wrap_middle(path, 3)
    assert len(lines) == 3
    assert all(len(line) <= notebook_graph.LINE_CHARS + 1 for line in lines)
    assert lines[0].startswith("/warehouse/")
    assert lines[-1].endswith("revenue_by_city_and_product"[-10:])
    assert lines[1].startswith(ELLIPSIS)
    assert wrap_middle("/data/raw", 3) == ("/data/raw",)
    # wrapped, nothing left out: the lines put back together are the name
    assert "".join(wrap_middle("kafka://broker:9092/orders.v2", 3)) == "kafka://broker:9092/orders.v2"
    assert wrap_middle("x" * 60, 2) == ("x" * 24, ELLIPSIS + "x" * 12)  # no separator at all: cut at the width


def test_each_run_is_a_node_of_its_own_and_datasets_are_shared() -> None:
    again = RunSummary("etl.load", "COMPLETE", ("/data/raw",), ("/data/clean",), "019a-0000-0000-feedbeef")
    graph = build([*RUNS, again])
    jobs = [node for node in graph.nodes if node.kind == "job"]
    datasets = [node for node in graph.nodes if node.kind == "dataset"]
    assert len(jobs) == 4, "two runs of etl.load are two nodes"
    assert [node.lines[0] for node in datasets] == ["/data/raw", "/data/clean", "s3://bucket/dims", "/data/report"]
    loads = [node for node in jobs if node.lines[0] == "etl.load"]
    assert [node.lines[-1] for node in loads] == [f"run {ELLIPSIS}run-1", f"run {ELLIPSIS}feedbeef"]
    assert "run: 019a-0000-0000-feedbeef" in loads[1].tooltip
    assert [node.failed for node in jobs] == [False, True, False, False]
    assert len(graph.edges) == 9
    key = {node.lines[0]: node.key for node in datasets}
    assert (key["/data/clean"], jobs[1].key) in graph.edges
    assert (jobs[2].key, key["/data/report"]) in graph.edges and (key["/data/report"], jobs[2].key) in graph.edges


def test_tooltips_give_the_full_identity() -> None:
    run = RunSummary(
        "app.job",
        "COMPLETE",
        ("postgres://db:5432/shop.public.orders",),
        (),
        "r-1",
        "prod",
        (("postgres://db:5432/shop.public.orders", "postgres://db:5432", "shop.public.orders"),),
    )
    dataset, job = build([run]).nodes
    assert dataset.tooltip == "dataset\nnamespace: postgres://db:5432\nname: shop.public.orders"
    assert job.tooltip == "job\nnamespace: prod\nname: app.job\nrun: r-1\nCOMPLETE"


def runs_writing(count: int) -> list[RunSummary]:
    return [RunSummary(f"app.job{i}", "COMPLETE", ("/in",), (f"/out/{i}",), f"r{i}") for i in range(count)]


def test_runs_shown_the_last_ones_or_those_of_one_dataset() -> None:
    many = runs_writing(20)
    shown, note = select_runs(many)
    assert shown == many[-notebook_graph.SHOWN_RUNS :]
    assert note == f"the last {notebook_graph.SHOWN_RUNS} of 20 runs (--last N shows more)"
    assert select_runs(many, last=3) == (many[-3:], "the last 3 of 20 runs")
    assert select_runs(many, last=50) == (many, "")
    assert select_runs(many, dataset="/out/7") == ([many[7]], "")
    assert select_runs(many, dataset="/in", last=2)[0] == many[-2:]
    assert select_runs(RUNS, dataset="dims")[0] == [RUNS[1]], "a part of a name, when no name matches whole"
    assert select_runs(RUNS, dataset="/data/report")[0] == RUNS[1:]
    named = RunSummary(
        "j", "COMPLETE", ("hive://ms:9083/db.t",), (), "r", "", (("hive://ms:9083/db.t", "hive://ms:9083", "db.t"),)
    )
    assert select_runs([*RUNS, named], dataset="db.t")[0] == [named], "a dataset by its name without namespace"
    with pytest.raises(notebook_graph.DatasetNotFoundError, match="'nothing'"):
        select_runs(RUNS, dataset="nothing")
    assert "showing the last 3 of 20 runs" in repr(LineageGraph(*select_runs(many, last=3)))


def test_mermaid_where_graphviz_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(notebook_graph, "dot_available", lambda: False)
    shown = LineageGraph(RUNS)
    assert shown._repr_svg_() is None
    markdown = shown._repr_markdown_()
    assert markdown is not None and markdown.startswith("```mermaid\nflowchart LR\n") and markdown.endswith("\n```")
    source = shown._repr_mimebundle_()["text/vnd.mermaid"]
    assert source in markdown
    assert '  d0[("/data/raw")]' in source  # a dataset is a cylinder
    assert '  r0("etl.load")' in source  # a run a rounded box
    assert "  class r1 failed" in source
    assert source.count(" --> ") == 7
    odd = RunSummary('app."quoted"<job>', "COMPLETE", (), (), "r")
    assert 'r0("app.#quot;quoted#quot;#lt;job#gt;")' in mermaid(build([odd]))


@pytest.mark.skipif(not notebook_graph.dot_available(), reason="Graphviz's dot is not installed")
def test_graphviz_draws_left_to_right_and_shrinks_to_the_width() -> None:
    svg = LineageGraph(RUNS)._repr_svg_()
    assert svg is not None and svg.startswith("<svg ")
    assert re.match(r'<svg width="\d+px" height="\d+px" style="max-width:100%;height:auto"', svg)
    assert svg.count('class="node job"') == 2 and svg.count('class="node job failed"') == 1
    assert svg.count('class="node dataset"') == 4
    assert svg.count('class="edge"') == 7
    assert 'xlink:title="job&#10;namespace: ?&#10;name: etl.load' in svg
    x = {text: float(left) for left, text in re.findall(r'<text[^>]*x="([\d.-]+)"[^>]*>([^<]+)</text>', svg)}
    assert x["/data/raw"] < x["etl.load"] < x["/data/clean"] < x["etl.report"] < x["/data/report"]


@pytest.mark.skipif(not notebook_graph.dot_available(), reason="Graphviz's dot is not installed")
def test_a_long_pipeline_is_drawn_top_to_bottom_rather_than_too_wide() -> None:
    chain = [RunSummary(f"app.step{i}", "COMPLETE", (f"/data/stage{i}",), (f"/data/stage{i + 1}",)) for i in range(6)]
    svg = LineageGraph(chain)._repr_svg_()
    assert svg is not None
    shown = re.search(r'<svg width="(\d+)px" height="(\d+)px"', svg)
    drawn = re.search(r'viewBox="0.00 0.00 ([\d.]+) ([\d.]+)"', svg)
    assert shown and drawn
    assert float(drawn.group(1)) <= notebook_graph.MAX_WIDTH_PT, "laid out top to bottom, narrower"
    assert float(drawn.group(2)) > float(drawn.group(1))
    assert int(shown.group(1)) <= notebook_graph.FIT_PX
    # text of 10 pt stays at 10 px or more however the drawing is scaled down to fit
    assert 10 * 4 / 3 * int(shown.group(1)) / (float(drawn.group(1)) * 4 / 3) >= 10


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("", Options()),
        ("on", Options(switch=True)),
        (" OFF ", Options(switch=False)),
        ("--last 5", Options(last=5)),
        ("--last=5 --dataset '/data/my table'", Options(last=5, dataset="/data/my table")),
        ("--dataset=orders", Options(dataset="orders")),
    ],
)
def test_options(line: str, expected: Options) -> None:
    assert parse_options(line) == expected


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("--last", "--last needs a value"),
        ("--last 0", "--last takes a number of runs (1 or more), not '0'"),
        ("--last five", "--last takes a number of runs (1 or more), not 'five'"),
        ("on off", "unknown argument 'on'"),
        ("--everything", "unknown argument '--everything'"),
        ("--dataset 'open", "No closing quotation"),
    ],
)
def test_bad_options_say_why_and_how(line: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(NotebookUsageError, match=re.escape(message)):
        parse_options(line)
    assert lineage_magic(line) is None  # the magic prints, never raises
    err = capsys.readouterr().err
    assert err.startswith(f"%lineage: {message}") and notebook.USAGE in err


def test_a_dataset_no_run_touched_is_said_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(PROCESS, "flush_all", lambda timeout: None)
    monkeypatch.setattr(PROCESS, "recent_runs", lambda: list(RUNS))
    assert lineage_magic("--dataset nowhere") is None
    assert "no run in this session read or wrote a dataset named 'nowhere'" in capsys.readouterr().err
    shown = lineage_magic("--dataset /data/raw --last 1")
    assert shown is not None and shown.runs == [RUNS[0]]


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (None, "lineage on from the next SparkSession; events go to the console (one line per query run, printed"),
        ("http://ann:hunter2@marquez:5000", "events go to http http://marquez:5000/api/v1/lineage"),
    ],
)
def test_where_events_go(
    url: str | None,
    expected: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: pytest.TempPathFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    for name in ("OPENLINEAGE_URL", "OPENLINEAGE_CONFIG", "OPENLINEAGE__TRANSPORT__TYPE", "OPENLINEAGE_DISABLED"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # no openlineage.yml
    monkeypatch.setattr(PROCESS, "destinations", lambda: [])
    if url:
        monkeypatch.setenv("OPENLINEAGE_URL", url)
    caplog.set_level(logging.WARNING)
    line = notebook._where_events_go()
    assert expected in line
    assert "hunter2" not in line
    assert not caplog.records, "the line says it all: no warning of openlineage-python's fallback besides"


@pytest.mark.parametrize(
    ("session_name", "expected"),
    [("/home/ann/work/Sales Report.ipynb", "Sales Report"), ("console-1234", None), (None, None)],
)
def test_notebook_name_from_jupyter_server(
    session_name: str | None, expected: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if session_name is None:
        monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    else:
        monkeypatch.setenv("JPY_SESSION_NAME", session_name)
    assert notebook_name() == expected


PIPELINE = [  # what Spark 4.3 reports for read.csv(inferSchema=True) -> filter -> join -> saveAsTable
    RunSummary("nb.collect_limit", "COMPLETE", ("/raw/orders.csv",), (), "r1"),  # schema inference
    RunSummary("nb.deserialize_to_object", "COMPLETE", ("/raw/orders.csv",), (), "r2"),
    RunSummary(
        "nb.execute_insert_into_hadoop_fs_relation_command.clean", "COMPLETE", ("/raw/orders.csv",), ("/clean",), "r3"
    ),
    RunSummary("nb.adaptive_spark_plan.warehouse_revenue", "COMPLETE", ("/clean",), ("/warehouse/revenue",), "r4"),
    RunSummary(
        "nb.execute_create_data_source_table_as_select_command.default_revenue",
        "COMPLETE",
        ("/clean", "/raw/cities.csv"),
        ("/warehouse/revenue",),
        "r5",
    ),
    RunSummary("nb.execute_save_as_v1_table_command", "COMPLETE", (), (), "r6"),
]


def test_the_data_flow_is_the_users_steps_not_sparks_runs() -> None:
    """Read-only runs and runs without datasets are left out; the CTAS and the adaptive plan of its write are
    one job, named after the command, reading what either read."""
    steps = notebook_graph.flow(PIPELINE)
    assert [(run.job_name, run.inputs, run.outputs) for run in steps] == [
        ("nb.execute_insert_into_hadoop_fs_relation_command.clean", ("/raw/orders.csv",), ("/clean",)),
        (
            "nb.execute_create_data_source_table_as_select_command.default_revenue",
            ("/clean", "/raw/cities.csv"),
            ("/warehouse/revenue",),
        ),
    ]
    graph = build(steps, flow=True)
    assert [node.kind for node in graph.nodes] == ["dataset"] * 4  # no run boxes: each job is its edges
    labels = {node.key: node.lines[0] for node in graph.nodes}
    assert [(labels[source], labels[target], graph.labels[(source, target)]) for source, target in graph.edges] == [
        ("/raw/orders.csv", "/clean", ("nb.execute_insert_into_hadoop_fs_relation_", "command.clean")),
        ("/clean", "/warehouse/revenue", ("nb.execute_create_data_source_table_as_select_", "command.default_revenue")),
        (
            "/raw/cities.csv",
            "/warehouse/revenue",
            ("nb.execute_create_data_source_table_as_select_", "command.default_revenue"),
        ),
    ]
    assert '-->|"nb.execute_insert_into_hadoop_fs_relation_<br/>command.clean"|' in mermaid(graph)
    everything = build(PIPELINE)  # --runs: every run, its own node
    assert sum(node.kind == "job" for node in everything.nodes) == 6


def test_runs_option_parses() -> None:
    assert parse_options("--runs --last 3") == Options(last=3, runs=True)
    assert parse_options("") == Options()
