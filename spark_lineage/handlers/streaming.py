"""Structured Streaming: the sources and the sink of a micro-batch, read from its analyzed plan, where the sink
is the root (``WriteToMicroBatchDataSource`` for DataSource V2 sinks, ``WriteToMicroBatchDataSourceV1`` for
the others) and the sources are leaves.

File and Delta sources are ``LogicalRelation`` leaves, named by their usual handlers; an Iceberg table's stream
by its table, as a batch read of it is. Kafka sources are named
as openlineage-spark names them: the servers the stream's consumers use, and the topics of the batch's end
offsets (so a ``subscribePattern`` names the topics it matched). Sinks go past the reference, which names
only a Kafka sink and a ``toTable`` file sink: file and Delta directories, Kafka topics, catalog tables and V2
tables are outputs here.
"""

from __future__ import annotations

import json

from spark_lineage import naming
from spark_lineage.handlers.base import NodeHandler, lowercase_options, schema_fields, table_dataset
from spark_lineage.handlers.iceberg import v2_dataset
from spark_lineage.handlers.kafka import topic_datasets
from spark_lineage.handlers.registry import register
from spark_lineage.lineage import AnalysisContext, DatasetLineage
from spark_lineage.plan import CapturedNode, Opaque, Probe

_KAFKA_OPTIONS = frozenset({"kafka.bootstrap.servers", "topic"})

# Sinks that write no dataset: foreachBatch's writes are queries of their own, reported as such.
_NO_DATASET_SINKS = frozenset(
    {"ForeachBatchSink", "ConsoleTable", "MemorySink", "ForeachWriterTable", "NoopTable", "MemorySinkV2"}
)


@register
class StreamingV2RelationHandler(NodeHandler):
    """A DataSource V2 stream in a micro-batch: ``StreamingDataSourceV2Relation`` on Spark 3.5,
    ``StreamingDataSourceV2ScanRelation`` on 4.x; both hold the stream and the batch's end offset."""

    class_names = ("StreamingDataSourceV2Relation", "StreamingDataSourceV2ScanRelation")
    probes = {
        # On 4.x the scan relation wraps a relation that holds neither: it is no leaf, and is not probed.
        "stream": Probe(("stream",), "node", if_field="stream"),
        "endOffset": Probe(("endOffset", "?", "json"), if_field="endOffset"),
        "schema": Probe(("schema", "json")),
        # An Iceberg table's stream: on 4.x its relation's table (its location), beside the stream's own name.
        "table": Probe(("relation", "table"), "node", if_field="relation"),
    }

    def inputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        stream: CapturedNode | None = node.get("stream")
        table_name = stream.get("table") if stream is not None else None
        if table_name and "." in table_name:
            # Spark keeps no catalog or identifier for a stream loaded by name: the table's own name has both.
            catalog, identifier = table_name.split(".", 1)
            table = CapturedNode(node.class_name, {**node.props, "catalog": catalog, "identifier": identifier})
            dataset = v2_dataset(table, ctx, role="input")
            return [dataset] if dataset else []
        if stream is None or stream.simple_name != "KafkaMicroBatchStream":
            kind = stream.simple_name if stream is not None else "unknown"
            ctx.errors.append(f"a {kind} streaming source: its input is not reported")
            return []
        topics = _offset_topics(node.get("endOffset"))
        options = {"kafka.bootstrap.servers": stream.get("servers") or "", "subscribe": ",".join(topics)}
        return topic_datasets(options, schema_fields(node.get("schema")))


@register
class IcebergMicroBatchStreamHandler(NodeHandler):
    """An Iceberg stream: the name of the table it reads (``catalog.namespace.table``)."""

    class_names = ("SparkMicroBatchStream",)
    probes = {"table": Probe(("@table", "name"))}


@register
class KafkaMicroBatchStreamHandler(NodeHandler):
    """A Kafka stream: only the servers its consumers use (its other parameters may hold credentials)."""

    class_names = ("KafkaMicroBatchStream",)
    probes = {"servers": Probe(("@executorKafkaParams", "get(bootstrap.servers)"))}


def _offset_topics(offsets_json: str | None) -> list[str]:
    """The topics of a Kafka offset (``{"topic": {"partition": offset}}``)."""
    try:
        offsets = json.loads(offsets_json or "{}")
    except ValueError:
        return []
    return sorted(offsets) if isinstance(offsets, dict) else []


@register
class MicroBatchV2WriteHandler(NodeHandler):
    """A micro-batch written to a DataSource V2 sink: a Kafka topic, or a V2 table (Iceberg, Delta)."""

    class_names = ("WriteToMicroBatchDataSource",)
    probes = {
        "options": Probe(("writeOptions",), "map", keys=_KAFKA_OPTIONS),
        "schema": Probe(("query", "schema", "json")),
    }

    def outputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        relation = node.probed_field("relation")
        table = naming_of_class(sink_table_class(node, relation))
        if table == "KafkaTable":
            datasets = topic_datasets(lowercase_options(node), schema_fields(node.get("schema")))
            if not datasets:
                ctx.errors.append("a Kafka streaming sink without a topic option: its output is not reported")
            return datasets[:1]
        if relation is not None:
            dataset = v2_dataset(relation, ctx, role="output")
            return [dataset] if dataset else []
        if table not in _NO_DATASET_SINKS:
            ctx.errors.append(f"a {table} streaming sink: its output is not reported")
        return []


def sink_table_class(node: CapturedNode, relation: CapturedNode | None) -> str | None:
    """The class of the table a micro-batch writes to. Up to Spark 4.1 the node holds it as ``table`` beside an
    optional relation, on 4.2 as ``sinkTable``; from 4.3 on, ``relation`` is always set and holds it."""
    for field_name in ("table", "sinkTable"):
        value = node.tree.fields.get(field_name) if node.tree is not None else None
        if isinstance(value, Opaque):
            return value.class_name
    table = relation.get("table") if relation is not None else None
    return table.class_name if isinstance(table, CapturedNode) else None


@register
class MicroBatchV1WriteHandler(NodeHandler):
    """A micro-batch written to a V1 sink: files (a path or a ``toTable`` table), Delta, or foreachBatch."""

    class_names = ("WriteToMicroBatchDataSourceV1",)
    probes = {
        "sink": Probe(("sink",), "node"),
        "catalogTable": Probe(("catalogTable", "?"), "node", if_field="catalogTable"),
        "schema": Probe(("query", "schema", "json")),
    }

    def outputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        sink: CapturedNode | None = node.get("sink")
        path = sink.get("path") if sink is not None else None
        table = node.get("catalogTable")
        if table is not None or path is not None:
            dataset = table_dataset(table, ctx, location=path, schema_json=node.get("schema"))
            return [dataset] if dataset else []
        kind = sink.simple_name if sink is not None else "unknown"
        if kind not in _NO_DATASET_SINKS:
            ctx.errors.append(f"a {kind} streaming sink: its output is not reported")
        return []

    def job_suffix(self, node: CapturedNode, ctx: AnalysisContext) -> str | None:
        sink: CapturedNode | None = node.get("sink")
        path = sink.get("path") if sink is not None else None
        return naming.path_job_suffix(naming.from_location(path).name) if path else None


@register
class DirectorySinkHandler(NodeHandler):
    """The directory a file or Delta sink writes, qualified as Spark writes to it."""

    class_names = ("FileStreamSink", "DeltaSink")
    probes = {"path": Probe(("@path",), "qualified_path")}


def naming_of_class(class_name: str | None) -> str:
    """A JVM class's simple name, nested classes (``Provider$Table``) by their own name."""
    return (class_name or "unknown").rsplit(".", 1)[-1].rstrip("$").rsplit("$", 1)[-1]
