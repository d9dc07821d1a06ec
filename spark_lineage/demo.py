"""A small local pipeline with lineage on: CSV -> cleaned parquet -> joined and aggregated table.

Run it with ``spark-lineage demo``; it writes the OpenLineage events to a file and prints what each job read
and wrote.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

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


class DemoDirError(Exception):
    """The demo's directory is one it may not use: it would have to delete what it did not create."""


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


def summarize(events_file: Path) -> str:
    """What each job read and wrote, from the events in ``events_file``."""
    events = [json.loads(line) for line in events_file.read_text().splitlines() if line.strip()]
    lines = [f"{len(events)} OpenLineage events written to {events_file}", ""]
    for event in events:
        job_type = event["job"].get("facets", {}).get("jobType", {}).get("jobType")
        if job_type == "APPLICATION" and event["eventType"] != "START":
            lines.insert(2, f"application {event['job']['name']}: run {event['run']['runId']} {event['eventType']}")
        if job_type == "APPLICATION" or event["eventType"] not in ("COMPLETE", "FAIL"):
            continue
        lines.append(f"job {event['job']['namespace']}/{event['job']['name']} ({event['eventType']})")
        lines.extend(f"    reads   {_describe(d)}" for d in event["inputs"])
        for output in event["outputs"]:
            lines.append(f"    writes  {_describe(output)}")
            lines.extend(_columns(output))
    return "\n".join(lines)


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
