"""What durability costs: writing an event to the spool, and how soon a finished query is safe on disk.

    python benchmarks/spool.py [--events 2000] [--queries 40] [--backlog 100000] [--slow-events 40] [--sections 1,2,3,4]

1. Spool write cost per event, without Spark: ``Delivery.submit`` as the analysis thread calls it (the
   client's enrichment, JSON, the redaction check, and the sqlite insert in WAL mode) for a typical query
   event (an output with a 12-column schema and its column lineage, about 4 KB of JSON), with the backend down
   so that no sending competes. Side by side: the same with the spool in memory
   (``python.spool.disabled=true``), and the sqlite insert alone.
2. From query end to spooled, with Spark: ``--queries`` parquet writes with lineage on and the backend down;
   for each query's COMPLETE event, the time from the query's end (its ``eventTime``) to the moment the spool
   stored it. That is what ``os._exit`` right after a write can lose: Spark hands finished queries to
   listeners asynchronously, and the analysis thread then captures and analyzes the plan before spooling.
3. Leasing from a deep spool, without Spark: a backend that was down long enough leaves ``--backlog`` events
   waiting, and each batch a sender takes (``Spool.lease`` then ``Spool.release``) first ends the leases of
   senders whose process has ended (the leases have a table of their own, so that step reads the leases, not
   the events waiting). Side by side: a batch of 100, and the lease of one lane of a sender with several
   requests in flight, which takes one run's events (here: one event).
4. Delivery throughput to a slow backend, without Spark: ``--slow-events`` events (runs of START, three RUNNING
   and COMPLETE, interleaved as a busy job spools them) to a loopback backend that takes ``--slow-seconds`` per
   request, at ``python.delivery.concurrency`` 1 and 4, side by side (at the same time: each backend only
   sleeps), in events per second.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import socket
import sqlite3
import statistics
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import attr
from openlineage.client.event_v2 import Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import column_lineage_dataset, schema_dataset
from openlineage.client.transport.http import HttpConfig, HttpTransport

from spark_lineage.config import resolve
from spark_lineage.delivery import Delivery, create_client, open_spool
from spark_lineage.delivery.payloads import to_payload
from spark_lineage.delivery.sender import Sender
from spark_lineage.delivery.spool import SPOOL_FILE, Spool
from spark_lineage.redaction import Redactor
from spark_lineage.transports import leave_retries_to_the_spool
from spark_lineage.worker import ErrorLog


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _event(index: int) -> RunEvent:
    columns = [f"column_{n}" for n in range(12)]
    fields = {
        name: column_lineage_dataset.Fields(
            inputFields=[
                column_lineage_dataset.InputField(
                    namespace="file",
                    name="/data/warehouse/orders",
                    field=name,
                    transformations=[column_lineage_dataset.Transformation(type="DIRECT", subtype="IDENTITY")],
                )
            ]
        )
        for name in columns
    }
    output = OutputDataset(
        namespace="file",
        name=f"/data/warehouse/report_{index}",
        facets={
            "schema": schema_dataset.SchemaDatasetFacet(
                fields=[schema_dataset.SchemaDatasetFacetFields(name=name, type="long") for name in columns]
            ),
            "columnLineage": column_lineage_dataset.ColumnLineageDatasetFacet(fields=fields),
        },
    )
    return RunEvent(
        eventType=RunState.COMPLETE,
        eventTime=dt.datetime.now(dt.timezone.utc).isoformat(),
        run=Run(runId=f"0195f5b6-0000-7000-8000-{index:012d}"),
        job=Job(namespace="default", name=f"bench.execute_insert_into_hadoop_fs_relation_command.report_{index}"),
        outputs=[output],
        producer="https://github.com/spark-lineage/spark-lineage",
    )


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def _line(label: str, samples: list[float]) -> str:
    median, p99 = _percentiles(samples)
    return f"  {label:<44} median {median * 1000:7.3f} ms   p99 {p99 * 1000:7.3f} ms"


def spool_write_cost(events: int, workdir: Path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    batch = [_event(index) for index in range(events)]
    print(f"1. spool write cost per event ({events} events, {len(to_payload(batch[0]).json)} bytes of JSON each)")
    deliveries: dict[str, Delivery] = {}
    for label, spool_settings in (
        ("Delivery.submit, spool on disk (sqlite, WAL)", {"dir": str(workdir / "spool")}),
        ("Delivery.submit, spool in memory (disabled)", {"disabled": True}),
    ):
        config = resolve({}, {"transport": {"type": "http", "url": url}, "python": {"spool": spool_settings}})
        redactor = Redactor()
        deliveries[label] = Delivery(create_client(config, redactor), open_spool(config), ErrorLog(), redactor)
    measured: dict[str, list[float]] = {label: [] for label in deliveries}
    sides = list(deliveries.items())
    # Side by side, event by event, first one side then the other: this VM's speed drifts within seconds.
    for index, event in enumerate(batch):
        for label, delivery in sides if index % 2 else reversed(sides):
            started = time.perf_counter()
            delivery.submit(event)
            measured[label].append(time.perf_counter() - started)
    for delivery in deliveries.values():
        delivery.close(0)
    spool = Spool(workdir / "insert-only")
    payloads = [to_payload(event) for event in batch]
    inserts = []
    for payload in payloads:
        started = time.perf_counter()
        spool.put("bench", payload.run_id, payload.job, payload.application, payload.json)
        inserts.append(time.perf_counter() - started)
    measured["sqlite insert alone (Spool.put)"] = inserts
    for label, samples in measured.items():
        print(_line(label, samples))
    on_disk, in_memory = (statistics.median(samples) for samples in list(measured.values())[:2])
    print(f"  on disk / in memory (medians): {on_disk / in_memory:.2f}")


def query_end_to_spooled(queries: int, workdir: Path) -> None:
    from _spark import local_session

    import spark_lineage

    spool_dir = workdir / "spark-spool"
    spark = local_session("Spool Benchmark")
    handle = spark_lineage.enable(
        spark,
        transport={"type": "http", "url": f"http://127.0.0.1:{_closed_port()}"},
        python={"spool": {"dir": str(spool_dir)}},
    )
    source = spark.range(1000).selectExpr("id", "id % 7 AS bucket")
    for index in range(5):
        source.write.mode("overwrite").parquet(str(workdir / f"warm_{index}"))
    first_measured = time.time()
    for index in range(queries):
        source.where(f"bucket != {index % 7}").write.mode("overwrite").parquet(str(workdir / f"out_{index}"))
        time.sleep(0.2)  # one query at a time: the latency of each, not a queue's
    handle.flush(5)
    with sqlite3.connect(spool_dir / "spool.sqlite") as db:
        rows = db.execute("SELECT payload, created FROM events").fetchall()
    spark.stop()
    latencies = []
    for payload, created in rows:
        event: dict[str, Any] = json.loads(payload)
        if event.get("eventType") != "COMPLETE" or "out_" not in json.dumps(event.get("outputs")):
            continue
        ended = dt.datetime.fromisoformat(event["eventTime"]).timestamp()
        if ended >= first_measured:
            latencies.append(created - ended)
    print(f"\n2. from query end to spooled, with Spark ({len(latencies)} parquet writes, one at a time)")
    print(_line("query end -> COMPLETE event safe in the spool", latencies))


def lease_from_a_deep_spool(backlog: int, workdir: Path, batches: int = 200) -> None:
    payload = to_payload(_event(0))
    spool = Spool(workdir / "backlog")
    # in one transaction: the backlog is the setting, not what is measured
    with sqlite3.connect(workdir / "backlog" / SPOOL_FILE) as db:
        db.executemany(
            "INSERT INTO events (destination, run_id, job, application, payload, size, created) "
            "VALUES ('bench', ?, ?, 0, ?, ?, 0)",
            ((f"run-{index}", payload.job, payload.json, len(payload.json)) for index in range(backlog)),
        )
    sides = {"a batch of 100": False, "a lane's lease (one run per batch)": True}
    measured: dict[str, list[float]] = {label: [] for label in sides}
    for index in range(batches):
        for label, one in sides.items() if index % 2 else reversed(sides.items()):
            started = time.perf_counter()
            leased = spool.lease("bench", "bench-sender", 100, 60, one_run=one)
            spool.release([event.id for event in leased], "bench-sender")
            measured[label].append(time.perf_counter() - started)
    print(f"\n3. leasing from a deep spool ({backlog} events waiting; lease and release)")
    for label, samples in measured.items():
        print(_line(label, samples))
    spool.close()


def _slow_backend(seconds: float) -> ThreadingHTTPServer:
    """A lineage backend on loopback that answers each request after ``seconds``, each on a thread of its own."""

    class Slow(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            time.sleep(seconds)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def throughput_to_a_slow_backend(events: int, seconds: float, workdir: Path) -> None:
    states = [RunState.START, RunState.RUNNING, RunState.RUNNING, RunState.RUNNING, RunState.COMPLETE]
    runs = max(events // len(states), 1)
    # A new run every tick, each lasting ten: about ten under way at once, their events interleaved.
    timeline = sorted((run + 2.5 * step, run, state) for run in range(runs) for step, state in enumerate(states))
    payloads = [to_payload(attr.evolve(_event(run), eventType=state)) for _, run, state in timeline]
    elapsed: dict[int, float] = {}

    def deliver(concurrency: int) -> None:
        server = _slow_backend(seconds)
        spool = Spool(workdir / f"slow-{concurrency}")
        for payload in payloads:
            spool.put("bench", payload.run_id, payload.job, payload.application, payload.json)
        url = f"http://127.0.0.1:{server.server_address[1]}"
        transport = HttpTransport(HttpConfig.from_dict({"url": url, "timeout": seconds * 5}))
        leave_retries_to_the_spool(transport)
        started = time.monotonic()
        sender = Sender(spool, "bench", transport, ErrorLog(), concurrency=concurrency)
        if sender.close(None):
            elapsed[concurrency] = time.monotonic() - started
        spool.close()
        server.shutdown()

    sides = [threading.Thread(target=deliver, args=(concurrency,)) for concurrency in (1, 4)]
    for side in sides:
        side.start()
    for side in sides:
        side.join()
    print(
        f"\n4. delivery throughput to a backend taking {seconds:g} s per request ({len(payloads)} events, {runs} runs "
        "of 5, interleaved)"
    )
    for concurrency, took in sorted(elapsed.items()):
        label = f"python.delivery.concurrency={concurrency}"
        print(f"  {label:<44} {len(payloads) / took:6.2f} events/s ({took:.1f} s)")
    if len(elapsed) == 2:
        print(f"  concurrency 4 / 1 (events/s): {elapsed[1] / elapsed[4]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--backlog", type=int, default=100_000)
    parser.add_argument("--slow-events", type=int, default=40)
    parser.add_argument("--slow-seconds", type=float, default=2.0)
    parser.add_argument(
        "--sections", default="1,2,3,4", help="which sections to run, e.g. 3,4 (section 2 is the one with Spark)"
    )
    args = parser.parse_args()
    sections = {int(section) for section in args.sections.split(",") if section.strip()}
    with tempfile.TemporaryDirectory(prefix="spool-bench-") as directory:
        if 1 in sections:
            spool_write_cost(args.events, Path(directory))
        if 2 in sections:
            query_end_to_spooled(args.queries, Path(directory))
        if 3 in sections:
            lease_from_a_deep_spool(args.backlog, Path(directory))
        if 4 in sections:
            throughput_to_a_slow_backend(args.slow_events, args.slow_seconds, Path(directory))


if __name__ == "__main__":
    main()
