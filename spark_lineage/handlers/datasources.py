"""``df.write.format(...).save()`` to a data source that is not a file format: ``SaveIntoDataSourceCommand``.

What the command writes depends on its data source. Each provider plugs in as one small
:class:`DataSourceProvider` (the JDBC one lives in :mod:`spark_lineage.handlers.jdbc`), registered with
:func:`data_source_provider`; the command's handler finds it by the provider's class name and reads only the
options it names, so that other options (passwords) never leave the JVM.

A Spark Connect client sees a read's or a save's format and options, not the provider's class: it finds the same
:class:`DataSourceProvider` by format (:func:`provider_for_format`) and names what it reads and writes
through it (:meth:`DataSourceProvider.read_datasets`, :meth:`DataSourceProvider.dataset`), so that both sides name a
table or a topic in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from openlineage.client.generated.lifecycle_state_change_dataset import LifecycleStateChange

from spark_lineage.handlers.base import NodeHandler, lowercase_options, schema_fields
from spark_lineage.handlers.registry import register
from spark_lineage.lineage import AnalysisContext, DatasetLineage, SchemaField
from spark_lineage.naming import DatasetIdentifier
from spark_lineage.plan import CapturedNode, CatalystNode, Probe, simple_class_name
from spark_lineage.registry import Registrar, Registry


class DataSourceProvider:
    """What one data source provider writes, from the options of its save (and what a read through it names,
    from the read's options, for a Spark Connect client: the driver side reads the read's relation)."""

    providers: tuple[str, ...] = ()
    """Simple class names of the ``CreatableRelationProvider`` classes this serves."""
    formats: tuple[str, ...] = ()
    """The names (lower case) a user gives ``DataFrameWriter.format()`` for these providers: how a Spark Connect
    client, which sees the format and not the class, finds the same source."""
    option_keys: frozenset[str] = frozenset()
    """The options (lower case) it reads."""
    read_option_keys: frozenset[str] = frozenset()
    """The options (lower case) :meth:`read_datasets` reads."""
    save_mode_is_lifecycle: bool = True
    """Whether the save mode says what happens to the target (OVERWRITE, CREATE); a sink that only appends,
    whatever the mode, says False."""

    def dataset(
        self, options: Mapping[str, str], schema: list[SchemaField] | None, errors: list[str]
    ) -> DatasetLineage | None:
        """The dataset written; ``None`` (with a reason in ``errors``) when the options do not say."""
        return None

    def job_suffix(self, options: Mapping[str, str]) -> str | None:
        return None

    def read_datasets(self, options: Mapping[str, str], errors: list[str]) -> list[DatasetIdentifier] | None:
        """The datasets a read through this provider names, from its options alone (keys in lower case), as the
        driver side's handler of the read's relation names them; why some are not named goes into ``errors``.
        ``None``: its reads name the paths they read."""
        return None


SOURCES: Registry[DataSourceProvider] = Registry("data source provider")


data_source_provider = Registrar(SOURCES, "providers")
"""Class decorator: serve saves through every provider the class lists (``@data_source_provider(replace=True)`` in
a built-in one's place)."""


def provider_for_format(name: str) -> DataSourceProvider | None:
    """The source a save with ``format(name)`` goes through (any case), if one answers to that name."""
    return SOURCES.derived(_by_format).get(name.lower())


def _by_format(sources: list[DataSourceProvider]) -> dict[str, DataSourceProvider]:
    """Each format's source (the first registered that answers to it)."""
    by_format: dict[str, DataSourceProvider] = {}
    for source in sources:
        for name in source.formats:
            by_format.setdefault(name, source)
    return by_format


def naming_option_keys() -> frozenset[str]:
    """Every option (lower case) a source's reads and saves are named by, and ``path``: all a client keeps of
    a request's options."""
    return SOURCES.derived(_option_keys)


def _option_keys(sources: list[DataSourceProvider]) -> frozenset[str]:
    keys = {"path"}
    for source in sources:
        keys |= source.option_keys | source.read_option_keys
    return frozenset(keys)


_LIFECYCLE_BY_MODE = {
    "Overwrite": LifecycleStateChange.OVERWRITE,
    "ErrorIfExists": LifecycleStateChange.CREATE,
    "Ignore": LifecycleStateChange.CREATE,
}


def save_mode_lifecycle(mode: str) -> LifecycleStateChange | None:
    """What a save in Spark's ``SaveMode`` ``mode`` (``Overwrite``, ``Append``...) does to the target of a source
    whose save mode says so (:attr:`DataSourceProvider.save_mode_is_lifecycle`)."""
    return _LIFECYCLE_BY_MODE.get(mode)


@register
class SaveIntoDataSourceCommandHandler(NodeHandler):
    """``df.write.format(provider).save()``, ``df.write.jdbc(...)``: the provider's dataset. Overwriting saves
    are OVERWRITE, saves that may create the target CREATE; appends change nothing about it."""

    class_names = ("SaveIntoDataSourceCommand",)
    _fixed_probes: ClassVar[dict[str, Probe]] = {
        "provider": Probe(("dataSource", "getClass", "getName")),
        "mode": Probe(("mode",)),
        "schema": Probe(("query", "schema", "json")),
    }

    @property
    def probes(self) -> Mapping[str, Probe]:  # type: ignore[override]  # computed: providers register later
        keys = frozenset(key for source in SOURCES.values() for key in source.option_keys)
        return {**self._fixed_probes, "options": Probe(("options",), "map", keys=keys)}

    def outputs(self, node: CapturedNode, ctx: AnalysisContext) -> list[DatasetLineage]:
        source = self._source(node)
        if source is None:
            provider = node.get("provider", "an unknown provider")
            ctx.errors.append(f"no lineage for saves to {provider}: the output is not reported")
            return []
        dataset = source.dataset(lowercase_options(node), schema_fields(node.get("schema")), ctx.errors)
        if dataset is None:
            return []
        if source.save_mode_is_lifecycle:
            dataset.lifecycle = save_mode_lifecycle(str(node.get("mode")))
        return [dataset]

    def job_suffix(self, node: CapturedNode, ctx: AnalysisContext) -> str | None:
        source = self._source(node)
        return source.job_suffix(lowercase_options(node)) if source is not None else None

    def written_plan(self, node: CapturedNode) -> CatalystNode | None:
        return node.plan_field("query")

    @staticmethod
    def _source(node: CapturedNode) -> DataSourceProvider | None:
        provider = node.get("provider")
        return SOURCES.get(simple_class_name(provider)) if provider else None
