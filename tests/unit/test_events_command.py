"""``spark-lineage events FILE``: JSON lines or pretty-printed JSON, bad records named by line, every kind of
event, and a quiet end when its reader goes away. No Spark starts here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from openlineage.client.event_v2 import (
    DatasetEvent,
    InputDataset,
    Job,
    JobEvent,
    OutputDataset,
    Run,
    RunEvent,
    RunState,
    StaticDataset,
)
from openlineage.client.facet_v2 import job_type_job, schema_dataset, symlinks_dataset
from openlineage.client.serde import Serde

from spark_lineage import cli
from tests.support import REPO_ROOT, _validator_for, validate_event

SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/"
PRODUCER = "https://example.com/spark-lineage-tests"
TIME = "2026-01-02T03:04:05.000Z"
RUN_ID = "01a22cc1-6d41-7498-95f8-45658868d317"


def as_dict(event: Any) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(Serde.to_json(event))
    return value


def run_event(state: RunState, name: str, *, application: bool = False) -> dict[str, Any]:
    facets = {"jobType": job_type_job.JobTypeJobFacet("BATCH", "SPARK", "APPLICATION" if application else "JOB")}
    event = as_dict(
        RunEvent(
            eventType=state,
            eventTime=TIME,
            run=Run(runId=RUN_ID),
            job=Job(namespace="demo", name=name, facets=facets),
            producer=PRODUCER,
            inputs=[] if application else [InputDataset(namespace="file", name=f"/in/{name}")],
            outputs=[] if application else [OutputDataset(namespace="file", name=f"/out/{name}")],
        )
    )
    validate_event(event)
    return event


def dataset_event() -> dict[str, Any]:
    table = symlinks_dataset.Identifier(namespace="hive://metastore", name="shop.orders", type="TABLE")
    fields = [schema_dataset.SchemaDatasetFacetFields(name="id", type="long")]
    event = as_dict(
        DatasetEvent(
            eventTime=TIME,
            producer=PRODUCER,
            dataset=StaticDataset(
                namespace="file",
                name="/warehouse/shop/orders",
                facets={
                    "schema": schema_dataset.SchemaDatasetFacet(fields=fields),
                    "symlinks": symlinks_dataset.SymlinksDatasetFacet(identifiers=[table]),
                },
            ),
        )
    )
    _validator_for(SCHEMA + "DatasetEvent").validate(event)
    return event


def job_event() -> dict[str, Any]:
    event = as_dict(
        JobEvent(
            eventTime=TIME,
            producer=PRODUCER,
            job=Job(namespace="demo", name="nightly"),
            inputs=[InputDataset(namespace="file", name="/in/nightly")],
            outputs=[OutputDataset(namespace="file", name="/out/nightly")],
        )
    )
    _validator_for(SCHEMA + "JobEvent").validate(event)
    return event


def events() -> list[dict[str, Any]]:
    return [
        run_event(RunState.START, "app", application=True),
        run_event(RunState.COMPLETE, "first"),
        run_event(RunState.COMPLETE, "second"),
        run_event(RunState.COMPLETE, "app", application=True),
    ]


def summarize(
    tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str], name: str = "events.json"
) -> tuple[int, list[str], list[str]]:
    """The exit status, standard output lines and standard error lines of ``spark-lineage events`` on ``text``."""
    (tmp_path / name).write_text(text)
    status = cli.main(["events", str(tmp_path / name)])
    out, err = capsys.readouterr()
    return status, out.splitlines(), err.splitlines()


def expected(tmp_path: Path, name: str = "events.json", count: int = 4) -> list[str]:
    return [
        f"{count} OpenLineage events read from {tmp_path / name}",
        "",
        f"application app: run {RUN_ID} COMPLETE",
        "job demo/first (COMPLETE)",
        "    reads   file:/in/first",
        "    writes  file:/out/first",
        "job demo/second (COMPLETE)",
        "    reads   file:/in/second",
        "    writes  file:/out/second",
    ]


def test_json_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = "".join(json.dumps(event) + "\n" for event in events())
    assert summarize(tmp_path, text, capsys) == (0, expected(tmp_path), [])


def test_a_bad_line_in_the_middle_is_named_and_the_rest_summarized(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [json.dumps(event) for event in events()]
    lines[2:2] = ['{"eventType": "COMPLETE", "run": {"runId"', "", "not json at all", "{}", "42"]
    status, out, err = summarize(tmp_path, "\n".join(lines) + "\n", capsys, "events.jsonl")
    assert status == 1
    assert out == expected(tmp_path, "events.jsonl")
    where = f"spark-lineage events: {tmp_path / 'events.jsonl'}, "
    assert err == [
        where + "lines 3-5: not JSON: Expecting ':' delimiter (line 5, column 1); skipped",
        where + "line 6: not an OpenLineage event the summary can read (no 'job' field); skipped",
        where + "line 7: not an OpenLineage event the summary can read (a JSON int, not an object); skipped",
    ]


def test_pretty_printed_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = json.dumps(events()[1], indent=2)
    assert summarize(tmp_path, one, capsys) == (0, expected(tmp_path, count=1)[:2] + expected(tmp_path)[3:6], [])
    several = "\n".join(json.dumps(event, indent=2) for event in events()) + "\n"
    assert summarize(tmp_path, several, capsys) == (0, expected(tmp_path), [])
    array = json.dumps(events(), indent=4)
    assert summarize(tmp_path, array, capsys) == (0, expected(tmp_path), [])
    compact = json.dumps(events())
    assert summarize(tmp_path, compact, capsys) == (0, expected(tmp_path), [])
    status, out, err = summarize(tmp_path, "\n" + compact[:-1], capsys)  # cut short
    assert (status, out) == (1, expected(tmp_path))
    assert err == [
        f"spark-lineage events: {tmp_path / 'events.json'}, line 2: the JSON array that starts here has no closing ]"
    ]


def test_a_bad_record_in_pretty_printed_json_is_named_and_the_rest_summarized(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = [json.dumps(event, indent=2) for event in events()]
    records[1] = records[1].replace('"eventType": "COMPLETE",', '"eventType": COMPLETE,')
    text = "\n".join(records) + "\n"
    first = text.count("\n", 0, text.index(records[1])) + 1
    last, broken = first + records[1].count("\n"), first + records[1].count("\n", 0, records[1].index("COMPLETE,"))
    status, out, err = summarize(tmp_path, text, capsys)
    assert (status, out) == (1, [line for line in expected(tmp_path, count=3) if "first" not in line])
    assert err == [
        f"spark-lineage events: {tmp_path / 'events.json'}, lines {first}-{last}: not JSON: Expecting value "
        f"(line {broken}, column 16); skipped"
    ]

    text = json.dumps(events(), indent=2).replace('"name": "first"', '"name": first')
    lines = text.splitlines()
    broken = next(number for number, line in enumerate(lines, 1) if '"name": first' in line)
    item = max(number for number, line in enumerate(lines[:broken], 1) if line == "  {")
    following = lines.index("  {", broken)  # where the next item starts, as a 0-based index: the line before it
    status, out, err = summarize(tmp_path, text, capsys)
    assert (status, out) == (1, [line for line in expected(tmp_path, count=3) if "first" not in line])
    assert err == [
        f"spark-lineage events: {tmp_path / 'events.json'}, lines {item}-{following}: not JSON: Expecting value "
        f"(line {broken}, column {lines[broken - 1].index('first') + 1}); skipped"
    ]


def test_dataset_and_job_events(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = "\n".join(json.dumps(event) for event in (dataset_event(), job_event(), events()[1]))
    status, out, err = summarize(tmp_path, text, capsys)
    assert (status, err) == (0, [])
    assert out == [
        f"3 OpenLineage events read from {tmp_path / 'events.json'}",
        "",
        "dataset file:/warehouse/shop/orders  (table shop.orders)  (dataset event: schema, symlinks)",
        "job demo/nightly (job event)",
        "    reads   file:/in/nightly",
        "    writes  file:/out/nightly",
        *expected(tmp_path)[3:6],
    ]


def test_a_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["events", str(tmp_path / "none.jsonl")]) == 2
    assert capsys.readouterr().err == f"spark-lineage events: no file {tmp_path / 'none.jsonl'}\n"


def test_a_closed_pipe_ends_it_quietly(tmp_path: Path) -> None:
    line = json.dumps(events()[1]) + "\n"
    runs = (line.replace(RUN_ID, f"01a22cc1-6d41-7498-95f8-{index:012x}") for index in range(20000))
    (tmp_path / "big.jsonl").write_text("".join(runs))  # a summary far larger than a pipe's buffer
    result = subprocess.run(
        ["bash", "-c", 'set -o pipefail; "$0" -m spark_lineage.cli events "$1" | head -1', sys.executable, "big.jsonl"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (result.stdout, result.stderr) == ("20000 OpenLineage events read from big.jsonl\n", "")
    assert result.returncode == 141  # as for a process that SIGPIPE ends


def test_runs_still_open_show_as_running_with_their_latest_datasets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file of START events only (a job still running, or one that died): each run is shown, RUNNING."""
    started = [run_event(RunState.START, "app", application=True), run_event(RunState.START, "first")]
    running = run_event(RunState.RUNNING, "first")
    running["outputs"] = [{"namespace": "file", "name": "/out/first-part"}]
    status, out, err = summarize(tmp_path, "\n".join(json.dumps(e) for e in (*started, running)), capsys)
    assert (status, err) == (0, [])
    assert out == [
        f"3 OpenLineage events read from {tmp_path / 'events.json'}",
        "",
        "job demo/first (RUNNING)",
        "    reads   file:/in/first",
        "    writes  file:/out/first-part",
    ]
    ended = [*started, run_event(RunState.FAIL, "first"), running]  # a late RUNNING does not reopen a run
    status, out, _ = summarize(tmp_path, "\n".join(json.dumps(e) for e in ended), capsys)
    assert out[2:] == ["job demo/first (FAIL)", "    reads   file:/in/first", "    writes  file:/out/first"]


def test_a_dash_reads_standard_input() -> None:
    text = "\n".join(json.dumps(event) for event in events())
    result = subprocess.run(
        [sys.executable, "-m", "spark_lineage.cli", "events", "-"],
        input=text,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines()[0] == "4 OpenLineage events read from standard input"
    assert result.stdout.splitlines()[2:] == expected(Path("-"))[2:]
