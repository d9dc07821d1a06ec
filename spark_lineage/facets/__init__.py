"""Facet classes this library emits beyond openlineage-python's generated ones, and the producer URI.

Custom facets follow openlineage-python's pattern: attrs subclasses of its facet base classes that override
``_get_schema()``. Facets defined by an OpenLineage spec file point at that file; Spark-specific facets that
openlineage-spark emits without a spec file of their own point at the core ``RunFacet`` definition, as the
reference does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attr
from openlineage.client.facet_v2 import catalog_dataset
from openlineage.client.generated.base import RunFacet

from spark_lineage._version import SOURCE_REPOSITORY, __version__
from spark_lineage.lineage import UnknownNode, UnknownNodes
from spark_lineage.plan import Attribute

PRODUCER = f"{SOURCE_REPOSITORY}/tree/{__version__}"
"""Identifies this library in every event's ``producer`` and every facet's ``_producer``: the source of this
release (its tag), as OpenLineage's own integrations name theirs. ``spark.openlineage.python.producer``
replaces it in what is sent (see :func:`spark_lineage.delivery.payloads.to_payload`)."""

_RUN_FACET_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunFacet"


@attr.define
class SparkPropertiesRunFacet(RunFacet):
    """``spark_properties``: the Spark confs named by ``spark.openlineage.capturedProperties``."""

    properties: dict[str, str] = attr.field(factory=dict)

    @staticmethod
    def _get_schema() -> str:
        return _RUN_FACET_SCHEMA


@attr.define
class SparkApplicationDetailsRunFacet(RunFacet):
    """``spark_applicationDetails``: which Spark application ran the job."""

    master: str | None = None
    appName: str | None = None
    applicationId: str | None = None
    deployMode: str | None = None
    driverHost: str | None = None
    userName: str | None = None
    uiWebUrl: str | None = None
    proxyUrl: str | None = None
    historyUrl: str | None = None

    @staticmethod
    def _get_schema() -> str:
        return _RUN_FACET_SCHEMA


LOGICAL_PLAN_FACET = "spark.logicalPlan"
"""The run facet with the query's optimized logical plan; off unless ``facets.spark.logicalPlan.disabled=false``,
as in openlineage-spark."""


@attr.define
class LogicalPlanRunFacet(RunFacet):
    """``spark.logicalPlan``: the optimized logical plan as Spark's ``toJSON`` writes it (a list of nodes, each
    with its class, ``num-children`` and fields), as openlineage-spark sends it."""

    plan: Any = None

    @staticmethod
    def _get_schema() -> str:
        return _RUN_FACET_SCHEMA


UNKNOWN_FACET = "spark_unknown"
"""The run facet listing the plan nodes no handler knows; off unless ``facets.spark_unknown.disabled=false``, as
in openlineage-spark."""


@attr.define
class UnknownAttribute:
    """A column of a ``spark_unknown`` entry: its name, data type name and metadata."""

    name: str
    type: str | None = None
    metadata: dict[str, Any] = attr.field(factory=dict)


@attr.define
class UnknownEntry:
    """A plan node no handler knows: the node (as Spark's ``toJSON`` writes it), the columns it reads and those
    it makes."""

    description: Any
    inputAttributes: list[UnknownAttribute] = attr.field(factory=list)
    outputAttributes: list[UnknownAttribute] = attr.field(factory=list)


@attr.define
class UnknownEntryRunFacet(RunFacet):
    """``spark_unknown``: the plan's root if no handler knows it (``output``), and each of its leaves no handler
    knows (``inputs``), as openlineage-spark sends them."""

    output: UnknownEntry | None = None
    inputs: list[UnknownEntry] = attr.field(factory=list)

    @staticmethod
    def _get_schema() -> str:
        return _RUN_FACET_SCHEMA


def unknown_facet(nodes: UnknownNodes) -> UnknownEntryRunFacet:
    """The facet for the plan nodes the analysis found no handler for."""

    def entry(node: UnknownNode) -> UnknownEntry:
        return UnknownEntry(dict(node.description), _attributes(node.inputs), _attributes(node.outputs))

    output = entry(nodes.output) if nodes.output is not None else None
    return UnknownEntryRunFacet(output=output, inputs=[entry(node) for node in nodes.inputs], producer=PRODUCER)


def _attributes(attributes: tuple[Attribute, ...]) -> list[UnknownAttribute]:
    return [UnknownAttribute(a.name, a.type, _metadata(a.metadata)) for a in attributes]


def _metadata(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


@attr.define
class SparkJobDetailsRunFacet(RunFacet):
    """``spark_jobDetails``: the Spark job whose start an event reports (a query run's RUNNING event, an RDD
    job run's START), with the properties it was submitted with, as openlineage-spark sends it."""

    jobId: int
    jobDescription: str | None = None
    jobGroup: str | None = None
    jobCallSite: str | None = None

    @staticmethod
    def _get_schema() -> str:
        return _RUN_FACET_SCHEMA


SPARK_CONNECT_FACET = "spark_connect"
SCHEMAS_URL = f"{SOURCE_REPOSITORY}/tree/main/spark_lineage/schemas/"
"""Where the schemas of this library's own facets are published; the files ship in ``spark_lineage/schemas``."""


@attr.define
class SparkConnectRunFacet(RunFacet):
    """``spark_connect``: the Spark Connect session of a session's run or a query's run (see the schema)."""

    sessionId: str
    userId: str
    userAgent: str | None = None
    operationId: str | None = None
    tags: list[str] | None = None
    derivedOnClient: bool | None = None
    """``True`` when the client reported the run, from what it sent (no server-side lineage)."""

    @staticmethod
    def _get_schema() -> str:
        return SCHEMAS_URL + "SparkConnectRunFacet.json#/$defs/SparkConnectRunFacet"


def logical_plan_facet(plan_json: str | None) -> LogicalPlanRunFacet | None:
    """The facet for a plan read as JSON; ``None`` without one, or when it is no JSON (it is never sent as
    text)."""
    if not plan_json:
        return None
    try:
        return LogicalPlanRunFacet(plan=json.loads(plan_json), producer=PRODUCER)
    except ValueError:
        return None


def environment_properties_facet(values: Mapping[str, str | None]) -> dict[str, Any]:
    """``environment-properties``: the environment variables named by
    ``spark.openlineage.facets.custom_environment_variables`` and their values (an unset one is left out).

    A plain mapping, not an attrs class: the reference names its one field ``environment-properties``, which no
    attrs field can be called, and openlineage-python serializes a mapping in a facet as it is."""
    return {
        "_producer": PRODUCER,
        "_schemaURL": _RUN_FACET_SCHEMA,
        "environment-properties": {name: value for name, value in values.items() if value is not None},
    }


def catalog_facet(
    *, framework: str, type: str, name: str, source: str, warehouse: str | None = None, metadata: str | None = None
) -> catalog_dataset.CatalogDatasetFacet:
    """The ``catalog`` dataset facet, without ``catalogProperties``: openlineage-spark sends none, where
    openlineage-python's class would send an empty map."""
    return catalog_dataset.CatalogDatasetFacet(
        framework=framework,
        type=type,
        name=name,
        warehouseUri=warehouse,
        metadataUri=metadata,
        source=source,
        catalogProperties=None,
        producer=PRODUCER,
    )
