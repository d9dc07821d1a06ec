"""What ``%lineage`` shows, and how a notebook's name is found, without a kernel."""

from __future__ import annotations

import re

import pytest

from spark_lineage.notebook import LineageGraph, notebook_name
from spark_lineage.session import RunSummary

RUNS = [
    RunSummary("etl.load", "COMPLETE", ("/data/raw",), ("/data/clean",)),
    RunSummary("etl.report", "FAIL", ("/data/clean", "s3://bucket/dims"), ("/data/report",)),
    RunSummary("etl.merge", "COMPLETE", ("/data/report",), ("/data/report",)),  # reads its own target
]


def test_text_shows_one_line_per_run() -> None:
    assert repr(LineageGraph(RUNS)).splitlines() == [
        "/data/raw -> [etl.load] -> /data/clean",
        "/data/clean, s3://bucket/dims -> [etl.report] -> /data/report FAILED",
        "/data/report -> [etl.merge] -> /data/report",
    ]
    assert repr(LineageGraph([])) == "no lineage runs yet in this session"
    assert LineageGraph([])._repr_svg_() is None


def test_svg_is_a_graph_with_shared_dataset_nodes_and_failed_jobs_marked() -> None:
    svg = LineageGraph(RUNS)._repr_svg_()
    assert svg is not None
    assert svg.count('class="job"') == 3
    assert svg.count('class="dataset"') == 4  # /data/clean and /data/report are one node each
    assert svg.count('class="edge"') == 7
    assert 'data-from="/data/clean" data-to="etl.report"' in svg
    assert 'data-from="etl.merge" data-to="/data/report"' in svg
    assert svg.count('fill="#fde2e1"') == 1  # the failed run's job
    # columns follow the flow; the merge's write back to what it read goes over the top, not backwards
    x = {name: int(left) for name, left in re.findall(r'<title>([^<]+)</title><rect x="(\d+)"', svg)}
    order = ["/data/raw", "etl.load", "/data/clean", "etl.report", "/data/report", "etl.merge"]
    assert sorted(order, key=x.__getitem__) == order
    assert len({x[name] for name in order}) == len(order)
    assert x["s3://bucket/dims"] == x["/data/clean"], "a source sits just before its first reader"


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
