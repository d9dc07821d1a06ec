"""The capture's fallbacks, each fault injected for real into the running reader of a lineage handle on real
local Spark, after it was made and before the queries it reads:

- a body the JVM cannot answer: the reader's body functions are each composed, JVM-side, with a throw after
  they ran, so every body call raises a Java exception across py4j;
- a plan text that does not decode: the same composition rewrites the body's answer as it leaves the JVM, the
  plan's text opening with a tag the decoder does not know (its length, and so the fields around it, intact);
- a class no prober can be made for: the prober compiler's getter of one class's accessors is a method handle
  of a type no prober can be composed of, so the JVM rejects that class's prober (every other class gets its
  own).

Each time the events of a join written to files, a CTAS, an INSERT INTO and a DROP TABLE are those of a run
without the fault (run the same way, the same statements on the same tables and paths): the queries are read
the Python way, their RUNNING events (their Spark jobs, which the header took out of the JVM) are kept, and no
error reaches the user.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import spark_lineage
from spark_lineage.handlers.registry import probes_for
from spark_lineage.jvm.capture import CaptureFunctions
from spark_lineage.jvm.probes import RESOLVED_KINDS
from spark_lineage.jvm.spark import QueryReader
from spark_lineage.jvm.values import JvmClasses
from spark_lineage.plan import simple_class_name
from tests.support import LineageReceiver, datasets, query_events

pytestmark = pytest.mark.spark

JOINED = "fallback_joined"
"""The directory the join is written to (in a folder of the module's own: the same path in every run)."""
CTAS = "fallback_ctas"
SOURCES = {
    "fallback_orders": ("id INT, customer_id INT, amount DOUBLE", [(1, 1, 10.5), (2, 2, 99.0), (3, 1, 5.0)]),
    "fallback_customers": ("id INT, name STRING", [(1, "ann"), (2, "bob")]),
}
JOIN = "fallback_orders o JOIN fallback_customers c ON o.customer_id = c.id"

Inject = Callable[["Jvm", QueryReader], None]
"""Injects a fault into a running reader."""


class Jvm:
    """What the faults are composed of: the JVM's classes and method handles, reached over py4j."""

    def __init__(self, spark: Any) -> None:
        self.gateway = spark.sparkContext._gateway
        self.classes = JvmClasses(spark.sparkContext._jvm)
        self.mh = self.classes("java.lang.invoke.MethodHandles")
        self.lookup = self.mh.publicLookup()
        self.object = self.classes.java_class("java.lang.Object")
        self.string = self.classes.java_class("java.lang.String")
        self.bi_function = self.classes.java_class("java.util.function.BiFunction")

    def array(self, element: str, *items: Any) -> Any:
        array = self.gateway.new_array(self.classes(element), len(items))
        for index, item in enumerate(items):
            array[index] = item
        return array

    def method_type(self, returns: Any, *params: Any) -> Any:
        return self.classes("java.lang.invoke.MethodType").methodType(returns, self.array("java.lang.Class", *params))

    def then(self, function: Any, after: Any) -> Any:
        """The ``BiFunction`` ``function`` followed by ``after``, an ``(Object)Object`` handle on its answer."""
        apply = self.lookup.findVirtual(
            self.bi_function, "apply", self.method_type(self.object, self.object, self.object)
        ).bindTo(function)
        proxies = self.classes("java.lang.invoke.MethodHandleProxies")
        return proxies.asInterfaceInstance(self.bi_function, self.mh.filterReturnValue(apply, after))

    def throwing(self, text: str) -> Any:
        """``(Object)Object``: throws an ``IllegalStateException`` saying ``text``."""
        error = self.classes("java.lang.IllegalStateException")(text)
        throw = self.mh.throwException(self.object, self.classes.java_class("java.lang.IllegalStateException"))
        return self.mh.dropArguments(throw.bindTo(error), 0, self.array("java.lang.Class", self.object))

    def replacing_first(self, regex: str, replacement: str) -> Any:
        """``(Object)Object``: the string's ``replaceFirst(regex, replacement)``."""
        replace = self.lookup.findVirtual(
            self.string, "replaceFirst", self.method_type(self.string, self.string, self.string)
        )
        bound = self.mh.insertArguments(replace, 1, self.array("java.lang.Object", regex, replacement))
        return bound.asType(self.method_type(self.object, self.object))


class BodiesThen(dict[Any, Any]):
    """A reader's body functions by their options, where ``CaptureFunctions`` keeps them: each one, made before
    or from now on, composed JVM-side with ``after``, a handle on its answer."""

    def __init__(self, jvm: Jvm, functions: CaptureFunctions, after: Any) -> None:
        super().__init__()
        self._jvm, self._functions, self._after = jvm, functions, after
        for options, function in functions._bodies.items():
            self[options] = function

    def __setitem__(self, options: Any, function: Any) -> None:
        super().__setitem__(options, self._jvm.then(function, self._after))

    def get(self, options: Any, default: Any = None) -> Any:
        """The body function for ``options``. One not made yet is made here, as the reader makes it: the reader
        would call the one it made before keeping it."""
        if options not in self:
            self[options] = self._functions._answer(self._functions._body_steps(options))
        return super().get(options, default)


def faulty_bodies(after: Callable[[Jvm], Any]) -> Inject:
    """Every body the reader asks for runs in the JVM, and its answer goes through ``after(jvm)``."""

    def inject(jvm: Jvm, reader: QueryReader) -> None:
        functions = reader._functions
        assert functions is not None
        functions._bodies = BodiesThen(jvm, functions, after(jvm))

    return inject


body_throws = faulty_bodies(lambda jvm: jvm.throwing("injected: the body's answer was lost"))
"""Every body the reader asks for runs in the JVM, then throws."""
plan_text_garbled = faulty_bodies(lambda jvm: jvm.replacing_first(r"^(s\d+:)\{", "$1!"))
"""Every body's answer leaves the JVM with its plan's text (its first field: ``s<n>:`` then the text) opening
with ``!``, a tag the decoder does not know; its length, and so every other field, as it was."""


def no_prober_for(class_name: str) -> Inject:
    """The prober compiler's getter of each accessor ``class_name``'s probes start with is ``(Object)boolean``:
    no prober can be composed of it, so the JVM rejects the class's prober (and only its)."""

    def inject(jvm: Jvm, reader: QueryReader) -> None:
        functions = reader._functions
        assert functions is not None
        steps = {
            spec.path[0]
            for spec in probes_for(simple_class_name(class_name)).values()
            if spec.kind not in RESOLVED_KINDS and spec.path and spec.path[0].isidentifier()
        }
        assert steps, f"{class_name} has no accessor to spoil"
        wrong = jvm.mh.dropArguments(
            jvm.mh.constant(jvm.gateway.jvm.java.lang.Boolean.TYPE, True),
            0,
            jvm.array("java.lang.Class", jvm.object),
        )
        for step in steps:
            functions._made[("getter", class_name, step)] = (wrong, None, "")

    return inject


@dataclass
class Run:
    """What one run of the statements gave."""

    runs: list[list[dict[str, Any]]]
    """The events of each query run, in arrival order."""
    errors: dict[str, int]
    """The errors the handle's runtime counted."""
    warnings: list[str]
    """What spark_lineage logged at WARNING or above."""
    fallbacks: list[str]
    """What the reader logged falling back (at DEBUG), each with its exception's text."""
    probers: set[str]
    """The classes the reader had JVM-side probers for, at the end."""


class Records(logging.Handler):
    """Keeps what spark_lineage logs while :func:`recording`."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def recording() -> Iterator[Records]:
    """What spark_lineage logs meanwhile: at WARNING and above, and the reader's DEBUG lines (its fallbacks)."""
    records = Records()
    library, reader = logging.getLogger("spark_lineage"), logging.getLogger("spark_lineage.jvm.spark")
    level = reader.level
    library.addHandler(records)
    reader.setLevel(logging.DEBUG)
    try:
        yield records
    finally:
        reader.setLevel(level)
        library.removeHandler(records)


def _make_sources(spark: Any) -> None:
    for name, (schema, rows) in SOURCES.items():
        spark.createDataFrame(rows, schema).write.mode("overwrite").saveAsTable(name)


def _statements(spark: Any, out: Path) -> None:
    spark.sql(f"SELECT o.id, c.name, o.amount FROM {JOIN}").write.parquet(str(out / JOINED))
    spark.sql(f"CREATE TABLE {CTAS} USING parquet AS SELECT o.id, c.name FROM {JOIN}")
    spark.sql(f"INSERT INTO {CTAS} SELECT o.id, c.name FROM {JOIN} WHERE o.amount > 10")
    spark.sql(f"DROP TABLE {CTAS}")


def _run(spark: Any, out: Path, inject: Inject | None = None) -> Run:
    """The statements, with lineage on (the fault injected into its reader first), from the same start: the
    source tables made anew with lineage off, and nothing of the statements left afterwards."""
    _make_sources(spark)
    receiver = LineageReceiver()
    try:
        with recording() as records:
            handle = spark_lineage.enable(
                spark, transport={"type": "http", "url": receiver.url}, python={"delivery": {"concurrency": 1}}
            )
            runtime = handle._runtime
            assert runtime is not None
            try:
                spark.sql("SELECT 1").collect()  # not reported: read far enough for the worker's reader to be made
                assert handle.flush(60)
                (reader,) = runtime.bridge._readers.values()
                if inject is not None:
                    inject(Jvm(spark), reader)
                _statements(spark, out)  # none raises
                assert handle.flush(60)
                errors = dict(runtime.errors.counts)
                assert reader._jvm_probes is not None
                probers = {str(name) for name in reader._jvm_probes.probers.keySet().toArray()}
            finally:
                handle.disable(timeout=30)
    finally:
        receiver.close()
        spark.sql(f"DROP TABLE IF EXISTS {CTAS}")
        for name in SOURCES:
            spark.sql(f"DROP TABLE IF EXISTS {name}")
        shutil.rmtree(out / JOINED, ignore_errors=True)
    assert not receiver.invalid, receiver.invalid
    runs: dict[str, list[dict[str, Any]]] = {}
    for event in query_events(receiver.events):
        runs.setdefault(event["run"]["runId"], []).append(event)
    warnings = [record.getMessage() for record in records.records if record.levelno >= logging.WARNING]
    fallbacks = [
        f"{record.getMessage()}: {record.exc_info[1]}"
        for record in records.records
        if record.name == "spark_lineage.jvm.spark" and record.exc_info and record.exc_info[1] is not None
    ]
    return Run(list(runs.values()), errors, warnings, fallbacks, probers)


def normalized(run: Run) -> list[list[dict[str, Any]]]:
    """The runs' events without what differs from one run of the same statements to the next: run ids (the
    query runs' and their parent's, the application run), event times, and Spark's job ids (counted from the
    first job of the statements)."""
    first_job = min((details["jobId"] for events in run.runs for details in _job_details(events)), default=0)

    def strip(value: Any, path: tuple[str, ...] = ()) -> Any:
        if isinstance(value, dict):
            kept = {}
            for key, item in value.items():
                if key in ("runId", "eventTime"):
                    continue
                if key == "jobId" and path[-1:] == ("spark_jobDetails",):
                    kept[key] = item - first_job
                else:
                    kept[key] = strip(item, (*path, key))
            return kept
        if isinstance(value, list):
            return [strip(item, path) for item in value]
        return value

    return [[strip(event) for event in events] for events in run.runs]


def _job_details(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``spark_jobDetails`` facets of a run's events: one per Spark job of the query."""
    return [
        event["run"]["facets"]["spark_jobDetails"] for event in events if "spark_jobDetails" in event["run"]["facets"]
    ]


def expected_runs(out: Path, warehouse: Path) -> list[tuple[str, list[str], list[str], bool]]:
    """The query runs the statements make, in order: each one's job name, its inputs and outputs (file
    datasets), and whether it ran Spark jobs. A CTAS is two: the write it runs (with the jobs), then itself."""
    sources = sorted(str(warehouse / name) for name in SOURCES)
    ctas = str(warehouse / CTAS)
    write = "lineage_tests.adaptive_spark_plan"
    return [
        (f"{write}.{out.name}_{JOINED}", sources, [str(out / JOINED)], True),
        (f"{write}.{warehouse.name}_{CTAS}", sources, [ctas], True),
        (f"lineage_tests.execute_create_data_source_table_as_select_command.default_{CTAS}", sources, [ctas], False),
        (f"{write}.{warehouse.name}_{CTAS}", sources, [ctas], True),
        ("lineage_tests.drop_table", [], [ctas], False),
    ]


def assert_shape(run: Run, out: Path, warehouse: Path) -> None:
    """Each query run has the job name, datasets and events its statement makes: START, a RUNNING at each Spark
    job's start and one at the first job's end, COMPLETE; and nothing went wrong as far as the user can tell."""
    shapes = []
    for events in run.runs:
        complete = events[-1]
        shapes.append(
            (
                complete["job"]["name"],
                [dataset for namespace, dataset in datasets(complete, "inputs") if namespace == "file"],
                [dataset for namespace, dataset in datasets(complete, "outputs") if namespace == "file"],
                bool(_job_details(events)),
            )
        )
        types = [event["eventType"] for event in events]
        jobs = _job_details(events)
        assert types[0] == "START" and types[-1] == "COMPLETE", types
        assert types.count("RUNNING") == (len(jobs) + 1 if jobs else 0), (types, jobs)
        assert "extractionError" not in complete["run"]["facets"], complete["run"]["facets"]["extractionError"]
    assert shapes == expected_runs(out, warehouse)
    assert (run.errors, run.warnings) == ({}, [])


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("capture_fallbacks")


@pytest.fixture(scope="module")
def clean(spark: Any, out: Path, warehouse: Path) -> Run:
    """The statements' run without a fault, which every faulted run must match."""
    run = _run(spark, out)
    assert_shape(run, out, warehouse)
    assert run.fallbacks == []
    return run


def as_without_fault(spark: Any, out: Path, warehouse: Path, clean: Run, inject: Inject) -> Run:
    """The statements' run with the fault ``inject`` injects: its events are those of the ``clean`` run."""
    faulted = _run(spark, out, inject)
    assert_shape(faulted, out, warehouse)
    assert normalized(faulted) == normalized(clean)
    return faulted


def test_a_body_the_jvm_cannot_answer_is_read_the_python_way(
    spark: Any, out: Path, warehouse: Path, clean: Run
) -> None:
    faulted = as_without_fault(spark, out, warehouse, clean, body_throws)

    # Each query's body ran and threw, and the query was read the Python way: its Spark jobs the header's (it took
    # them out of the JVM, and none was left to take again).
    assert len(faulted.fallbacks) == len(clean.runs), faulted.fallbacks
    assert all(
        line.startswith("spark_lineage: a query's body could not be read: ")
        and "java.lang.IllegalStateException: injected: the body's answer was lost" in line
        for line in faulted.fallbacks
    ), faulted.fallbacks


def test_a_plan_text_that_does_not_decode_is_read_the_python_way(
    spark: Any, out: Path, warehouse: Path, clean: Run
) -> None:
    faulted = as_without_fault(spark, out, warehouse, clean, plan_text_garbled)

    # Each query's plan text came garbled, and its plan was read the Python way.
    assert faulted.fallbacks == ["spark_lineage: a plan's text could not be read: unknown tag '!' at 0"] * len(
        clean.runs
    )


@pytest.mark.parametrize(
    "class_name",
    [
        "org.apache.spark.sql.execution.datasources.LogicalRelation",  # a plan node (each query's inputs)
        "org.apache.spark.sql.execution.datasources.HadoopFsRelation",  # a value probed of one (its files)
    ],
)
def test_a_class_no_prober_can_be_made_for_is_probed_the_python_way(
    spark: Any, out: Path, warehouse: Path, clean: Run, class_name: str
) -> None:
    faulted = as_without_fault(spark, out, warehouse, clean, no_prober_for(class_name))

    # The fault was the class's alone: every other class met got its prober, as without it.
    assert class_name in clean.probers
    assert faulted.probers == clean.probers - {class_name}
