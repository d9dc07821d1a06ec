"""DataFrames over RDDs (``LogicalRDD``, ``ExternalRDD``): what they read is what their RDD lineage reads.

openlineage-spark looks through the RDD graph for the RDDs that read files (Hadoop's two input APIs, Spark's
own file scans) and reports their directories; RDDs built from driver data (``parallelize``) read no dataset.
There is no column lineage through an RDD: its columns are whatever Python or Scala code made them.

A ``foreachBatch`` function's batch DataFrame is such a DataFrame, over the RDD of the micro-batch's plan,
whose sources (a Kafka topic, a rate source, a table) no RDD names: in a query the function ran, an RDD leaf
reads what the stream reads (:attr:`~spark_lineage.lineage.AnalysisContext.stream_sources`). An RDD
DataFrame the function builds from data of its own is taken for the batch too: nothing in the plan tells them
apart.

Jobs that run on RDDs alone (``sc.textFile(a).map(f).saveAsTextFile(b)``) read the same way, and write what
their Hadoop save's configuration names (:func:`rdd_job_lineage`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from spark_lineage import naming
from spark_lineage.handlers.base import NodeHandler
from spark_lineage.handlers.registry import register
from spark_lineage.lineage import (
    AnalysisContext,
    DatasetLineage,
    InputColumn,
    InputStatistics,
    OutputStatistics,
    QueryLineage,
)
from spark_lineage.plan import CapturedNode, JobIo, Probe, RddJobStart, RddRecord

FILE_READING_RDDS = frozenset({"HadoopRDD", "NewHadoopRDD", "FileScanRDD"})


def rdd_inputs(graph: Iterable[RddRecord]) -> list[DatasetLineage]:
    """The datasets the file-reading RDDs of a graph read, each once, in the graph's order; a Delta table's
    transaction log is none (Delta reads it through RDDs of its own, as a streaming source does)."""
    found: dict[naming.DatasetIdentifier, None] = {}
    for record in graph:
        if record.simple_name in FILE_READING_RDDS:
            for directory in naming.read_directories(list(record.paths), record.files):
                if not naming.is_delta_log(directory):
                    found[naming.from_location(directory)] = None
    return [DatasetLineage(identifier) for identifier in found]


def rdd_job_lineage(job: RddJobStart) -> QueryLineage:
    """What a Spark job that is no SQL execution reads (the files its final RDD's lineage reads) and writes
    (the directory of a Hadoop save), and the job-name suffix its RDDs give it."""
    lineage = QueryLineage(
        inputs=rdd_inputs(job.graph), job_suffix=naming.rdd_job_suffix(job.graph), errors=list(job.errors)
    )
    if job.output_path:
        lineage.outputs.append(DatasetLineage(naming.from_location(job.output_path)))
    return lineage


def add_job_statistics(lineage: QueryLineage, io: JobIo) -> None:
    """The statistics of an RDD job's one input and one output, from what its tasks read and wrote. As
    openlineage-spark: a job's task metrics are one dataset's only when it read (or wrote) one dataset."""
    if len(lineage.inputs) == 1 and io.records_read + io.bytes_read > 0:
        lineage.inputs[0].input_statistics = InputStatistics(rows=io.records_read, bytes=io.bytes_read)
    if len(lineage.outputs) == 1 and io.records_written + io.bytes_written > 0:
        lineage.outputs[0].statistics = OutputStatistics(rows=io.records_written, bytes=io.bytes_written)


@register
class RddLeafHandler(NodeHandler):
    """A DataFrame made from an RDD (``createDataFrame(rdd)``, ``rdd.toDF()``, a Dataset of a Scala RDD)."""

    class_names = ("LogicalRDD", "ExternalRDD")
    probes = {"rdd": Probe(("rdd",), "rdd_graph")}

    def inputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        if ctx.stream_sources is not None:
            return [
                DatasetLineage(
                    source.identifier, list(source.symlinks), source.schema, extra_facets=dict(source.extra_facets)
                )
                for source in ctx.stream_sources
            ]
        # A graph that could not be read is a probe error, which the analysis reports.
        return rdd_inputs(node.get("rdd", ()))

    def column_sources(
        self, node: CapturedNode, datasets: list[DatasetLineage]
    ) -> Mapping[str, list[InputColumn]] | None:
        return {}
