"""A small local pipeline with lineage on: CSV -> cleaned parquet -> joined and aggregated table.

Run it with ``spark-lineage demo``; it writes the OpenLineage events to a file and prints what each job read
and wrote.
"""

from __future__ import annotations

import bisect
import json
import re
import shutil
from pathlib import Path
from typing import Any

from spark_lineage.errors import DemoDirError

ORDERS = """order_id,customer_id,amount,status
1,10,25.00,paid
2,11,,paid
3,10,12.50,refunded
4,12,40.00,paid
5,11,18.25,paid
6,13,7.75,paid
"""

CUSTOMERS = """customer_id,name,city
10,Ada,Paris
11,Linus,Helsinki
12,Grace,New York
13,Alan,Paris
"""


MARKER = ".spark-lineage-demo"
"""The file the demo writes at the top of its directory, the sign that it may clear that directory again."""

ENTRIES = ("raw", "clean", "warehouse", "events.jsonl")
"""What the demo writes in its directory; a rerun clears these and leaves anything else there alone."""


def prepare_workdir(workdir: Path) -> None:
    """Make ``workdir`` ready for a run, deleting nothing the demo did not create, or raise :class:`DemoDirError`.

    ``workdir`` may be missing (it is created), an empty directory, or a directory an earlier run made (it holds
    :data:`MARKER`; that run's :data:`ENTRIES` are cleared). Anything else is refused, untouched.
    """
    if workdir.is_symlink() or (workdir.exists() and not workdir.is_dir()):
        raise DemoDirError(f"{workdir} exists and is not a directory; pick a new or empty directory with --dir")
    if workdir.is_dir() and any(workdir.iterdir()):
        marker = workdir / MARKER
        if marker.is_symlink() or not marker.is_file():
            hint = ""
            if {path.name for path in workdir.iterdir()} <= set(ENTRIES):  # perhaps a run from before the marker
                hint = " (if an earlier version of the demo wrote what is there, delete it yourself to reuse it)"
            raise DemoDirError(
                f"{workdir} is not empty and was not made by the demo (it has no {MARKER} file), so the demo will "
                f"not clear it; nothing was changed. Pick a new or empty directory with --dir{hint}"
            )
        for name in ENTRIES:
            entry = workdir / name
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            elif entry.exists() or entry.is_symlink():
                entry.unlink()
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / MARKER).write_text(
        "Made by `spark-lineage demo`: a later `spark-lineage demo --dir` here clears what the demo wrote "
        f"({', '.join(ENTRIES)}).\n"
    )


def run_pipeline(workdir: Path) -> Path:
    """Run the demo pipeline under ``workdir`` and return the file the events went to.

    Raises :class:`DemoDirError`, before anything is changed or Spark starts, when the demo may not use ``workdir``
    (see :func:`prepare_workdir`).
    """
    prepare_workdir(workdir)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F  # noqa: N812 - PySpark's own convention

    import spark_lineage

    raw = workdir / "raw"
    raw.mkdir()
    (raw / "orders.csv").write_text(ORDERS)
    (raw / "customers.csv").write_text(CUSTOMERS)
    events_file = workdir / "events.jsonl"

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("Demo Pipeline")
        .config("spark.sql.warehouse.dir", str(workdir / "warehouse"))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark_lineage.enable(spark, namespace="demo", transport={"type": "file", "location": str(events_file)})

    schema = "order_id INT, customer_id INT, amount DOUBLE, status STRING"
    orders = spark.read.option("header", True).schema(schema).csv(str(raw / "orders.csv"))
    cleaned = orders.where("status = 'paid' AND amount IS NOT NULL").drop("status")
    cleaned.write.mode("overwrite").parquet(str(workdir / "clean" / "orders"))

    customers = (
        spark.read.option("header", True)
        .schema("customer_id INT, name STRING, city STRING")
        .csv(str(raw / "customers.csv"))
    )
    revenue = (
        spark.read.parquet(str(workdir / "clean" / "orders"))
        .join(customers, "customer_id")
        .groupBy("city")
        .agg(F.sum("amount").alias("revenue"), F.count("*").alias("orders"))
    )
    revenue.write.mode("overwrite").saveAsTable("revenue_by_city")
    spark.stop()  # completes the application run and delivers every event
    return events_file


def summarize(events_file: Path, problems: list[str] | None = None) -> str:
    """What each job read and wrote, from the events the demo wrote to ``events_file`` (see
    :func:`summarize_text`)."""
    text = events_file.read_text(encoding="utf-8-sig", errors="replace")
    return summarize_text(text, f"written to {events_file}", problems)


def summarize_text(text: str, source: str, problems: list[str] | None = None) -> str:
    """What each job read and wrote, from the events in ``text``; the first line says how many there were and
    ``source`` (``read from events.jsonl``).

    ``text`` may hold JSON lines or pretty-printed JSON (see :func:`read_events`), and run, dataset and job
    events. A run shows its end (COMPLETE, FAIL, ABORT), or RUNNING, with what its latest event read and wrote,
    while it has none. What is not JSON, or not an event the summary can read, is skipped; ``problems``, when
    given, gets a line for each such record, naming its lines.
    """
    records, bad = read_events(text.removeprefix("\ufeff"))
    count, applications = 0, list[str]()
    entries: dict[object, tuple[bool, list[str]]] = {}  # in the order first seen: (ended, lines)
    for number, event in records:
        try:
            application, run, job_lines = _summary(event)
        except (KeyError, TypeError, AttributeError) as error:
            reason = f"no {error.args[0]!r} field" if isinstance(error, KeyError) else str(error)
            bad.append((number, f"line {number}: not an OpenLineage event the summary can read ({reason}); skipped"))
            continue
        count += 1
        if application:
            applications.insert(0, application)
        if run is None:
            entries[number] = (True, job_lines)
        elif job_lines and not entries.get(run, (False, []))[0]:  # an end, or the latest word of a run with none
            entries[run] = (_ended(event), job_lines)
    if problems is not None:
        problems.extend(text for _, text in sorted(bad))
    lines = [f"{count} OpenLineage events {source}", "", *applications]
    return "\n".join([*lines, *(line for _, job_lines in entries.values() for line in job_lines)])


_ENDS = ("COMPLETE", "FAIL", "ABORT")


def _ended(event: Any) -> bool:
    return event.get("eventType") in _ENDS


def _summary(event: Any) -> tuple[str | None, str | None, list[str]]:
    """The line for an application run's end, if ``event`` is one; the run of a job's run event (``None``
    for other events); and the lines for a job's or dataset's, a run's shown as RUNNING until it ends."""
    if not isinstance(event, dict):
        raise TypeError(f"a JSON {type(event).__name__}, not an object")
    if "dataset" in event:  # a DatasetEvent: a dataset's metadata, without a run or a job
        facets = ", ".join(event["dataset"].get("facets") or {}) or "no facets"
        return None, None, [f"dataset {_describe(event['dataset'])}  (dataset event: {facets})"]
    job = event["job"]
    name = f"{job['namespace']}/{job['name']}"
    datasets = [f"    reads   {_describe(dataset)}" for dataset in event.get("inputs") or []]
    for output in event.get("outputs") or []:
        datasets.append(f"    writes  {_describe(output)}")
        datasets.extend(_columns(output))
    if "run" not in event:  # a JobEvent: a job's metadata and datasets, without a run
        return None, None, [f"job {name} (job event)", *datasets]
    event_type, run_id = event.get("eventType"), event["run"]["runId"]
    if (job.get("facets") or {}).get("jobType", {}).get("jobType") == "APPLICATION":
        return (f"application {job['name']}: run {run_id} {event_type}" if event_type != "START" else None), None, []
    if event_type not in (*_ENDS, "START", "RUNNING"):  # OTHER: no word on the run's state
        return None, f"{name} {run_id}", []
    run = f"{name} {run_id}"  # a run is its job's: files that merge several processes' events may reuse ids
    return None, run, [f"job {name} ({event_type if event_type in _ENDS else 'RUNNING'})", *datasets]


_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"\s*")


def read_events(text: str) -> tuple[list[tuple[int, Any]], list[tuple[int, str]]]:
    """The JSON values in ``text``, each with the line it starts on, and what could not be read, by line.

    ``text`` may be JSON lines, a pretty-printed JSON document, several of them one after the other, or JSON
    arrays of them (whose items count one by one). After a record that is not JSON, reading goes on at the next
    line that starts a record the way the bad one started: with ``{`` or ``[`` at the same indentation.
    """
    newlines = [match.start() for match in re.finditer("\n", text)]
    values: list[tuple[int, Any]] = []
    problems: list[tuple[int, str]] = []

    def line(pos: int) -> int:
        return bisect.bisect_left(newlines, pos) + 1

    def skip(pos: int) -> int:
        match = _SPACE.match(text, pos)
        return match.end() if match else pos

    def resync(pos: int, error: json.JSONDecodeError) -> int:
        """Report the bad record at ``pos``, up to where the next one like it starts, and return that place."""
        start = text.rfind("\n", 0, pos) + 1
        indent = text[start:pos] if text[start:pos].isspace() else ""
        after = text.find("\n", pos)
        match = re.compile(f"^{re.escape(indent)}[\\[{{]", re.MULTILINE).search(text, after + 1) if after >= 0 else None
        resume = match.start() + len(indent) if match else len(text)
        end = resume
        while end > pos and text[end - 1].isspace():
            end -= 1
        first, last = line(pos), line(end)
        where = f"line {first}" if last == first else f"lines {first}-{last}"
        problems.append((first, f"{where}: not JSON: {error.msg} (line {error.lineno}, column {error.colno}); skipped"))
        return resume

    def value(pos: int) -> int:
        try:
            item, end = _DECODER.raw_decode(text, pos)
        except json.JSONDecodeError as error:
            return resync(pos, error)
        values.append((line(pos), item))
        return end

    pos = skip(0)
    while pos < len(text):
        if text[pos] != "[":
            pos = skip(value(pos))
            continue
        opening, reported = line(pos), len(problems)
        pos = skip(pos + 1)  # an array: its items one by one, so that each has its line and a bad one is skipped
        while pos < len(text) and text[pos] != "]":
            pos = skip(value(pos))
            if text.startswith(",", pos):
                pos = skip(pos + 1)
        if pos >= len(text) and len(problems) == reported:
            problems.append((opening, f"line {opening}: the JSON array that starts here has no closing ]"))
        pos = skip(pos + 1)
    return values, problems


def _columns(dataset: dict[str, Any]) -> list[str]:
    """Each written column's sources, and what the whole output depends on, from ``columnLineage``."""
    facet = dataset.get("facets", {}).get("columnLineage")
    if not facet:
        return []

    def sources(input_fields: list[dict[str, Any]]) -> str:
        return ", ".join(
            f"{item['name'].rstrip('/').rsplit('/', 1)[-1]}.{item['field']} "
            f"({', '.join(t.get('subtype', t['type']).lower() for t in item.get('transformations') or [])})"
            for item in input_fields
        )

    width = max(len(name) for name in facet["fields"])
    lines = [f"      {name:<{width}} <- {sources(value['inputFields'])}" for name, value in facet["fields"].items()]
    if facet.get("dataset"):
        lines.append(f"      {'(rows)':<{width}} <- {sources(facet['dataset'])}")
    return lines


def _describe(dataset: dict[str, Any]) -> str:
    text = f"{dataset['namespace']}:{dataset['name']}"
    symlinks = dataset.get("facets", {}).get("symlinks", {}).get("identifiers", [])
    if symlinks:
        text += f"  (table {symlinks[0]['name']})"
    commit = dataset.get("outputFacets", {}).get("icebergCommitReport")
    scan = dataset.get("inputFacets", {}).get("icebergScanReport")
    stats = dataset.get("outputFacets", {}).get("outputStatistics")
    if commit:
        metrics = commit.get("commitMetrics", {})
        text += (
            f"  [{commit.get('operation') or 'commit'}: +{metrics.get('addedRecords', 0)}"
            f" -{metrics.get('removedRecords', 0)} rows, {metrics.get('attempts')} attempt(s),"
            f" {metrics.get('totalDuration')} ms]"
        )
    elif stats:
        text += f"  [{stats.get('rowCount')} rows, {stats.get('size')} bytes]"
    if scan:
        metrics = scan.get("scanMetrics", {})
        text += f"  [{metrics.get('resultDataFiles')} data files read, {metrics.get('skippedDataFiles', 0)} skipped]"
    return text
