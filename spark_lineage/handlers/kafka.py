"""Kafka topics read and written in batch: ``spark.read.format("kafka")`` (a ``KafkaRelation`` scan) and
``df.write.format("kafka").save()`` (a save through ``KafkaSourceProvider``).

Topics are named by :func:`spark_lineage.naming.kafka_dataset`. Only the options that name servers and topics
are read: the others may hold credentials (``kafka.sasl.jaas.config``).
"""

from __future__ import annotations

from collections.abc import Mapping

from spark_lineage import naming
from spark_lineage.handlers.base import NodeHandler, lowercase_options, schema_fields
from spark_lineage.handlers.datasources import DataSourceProvider, data_source_provider
from spark_lineage.handlers.registry import register
from spark_lineage.lineage import AnalysisContext, DatasetLineage, SchemaField
from spark_lineage.naming import DatasetIdentifier
from spark_lineage.plan import CapturedNode, Probe

_SERVERS = "kafka.bootstrap.servers"
_TOPIC_OPTIONS = frozenset({_SERVERS, "subscribe", "topic", "assign"})
_NO_TOPIC_READ = "a Kafka read that names no topic (subscribePattern): its input is not reported"


def topic_datasets(options: Mapping[str, str], schema: list[SchemaField] | None) -> list[DatasetLineage]:
    """A dataset per topic the (lower-cased) options name, on the cluster they name."""
    return [
        DatasetLineage(naming.kafka_dataset(options.get(_SERVERS), topic), schema=schema)
        for topic in naming.option_topics(options)
    ]


@register
class KafkaRelationHandler(NodeHandler):
    """The topics a batch Kafka read subscribes to or is assigned (probed as a ``LogicalRelation``'s
    relation). A ``subscribePattern`` read reports no topic, as openlineage-spark does."""

    class_names = ("KafkaRelation",)
    probes = {
        # The relation keeps its options in a field with no accessor.
        "options": Probe(("@sourceOptions",), "map", keys=_TOPIC_OPTIONS),
        "schema": Probe(("schema", "json")),
    }

    def inputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        datasets = topic_datasets(lowercase_options(node), schema_fields(node.get("schema")))
        if not datasets:
            ctx.errors.append(_NO_TOPIC_READ)
        return datasets


@data_source_provider
class KafkaProvider(DataSourceProvider):
    """``df.write.format("kafka").option("topic", t).save()``: the topic. Rows that name their own topic (a
    ``topic`` column, no option) go to topics known only to the data: no output then. The job name has no
    suffix, as openlineage-spark names it. For a Spark Connect client, also the topics a Kafka read's options
    name."""

    providers = ("KafkaSourceProvider",)
    formats = ("kafka",)
    option_keys = frozenset({_SERVERS, "topic"})
    read_option_keys = _TOPIC_OPTIONS
    save_mode_is_lifecycle = False  # records are appended to a topic in every save mode

    def dataset(
        self, options: Mapping[str, str], schema: list[SchemaField] | None, errors: list[str]
    ) -> DatasetLineage | None:
        datasets = topic_datasets(options, schema)
        if not datasets:
            errors.append("a Kafka save without a topic option: its output is not reported")
            return None
        return datasets[0]

    def read_datasets(self, options: Mapping[str, str], errors: list[str]) -> list[DatasetIdentifier] | None:
        topics = [dataset.identifier for dataset in topic_datasets(options, None)]
        if not topics:
            errors.append(_NO_TOPIC_READ)
        return topics
