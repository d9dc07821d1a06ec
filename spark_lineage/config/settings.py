"""The settings of one ``enable()``, typed and validated: what the readers and the key table produce, and what
the rest of the library reads. Nothing here knows where a value came from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from spark_lineage.errors import ConfigError

if TYPE_CHECKING:
    from openlineage.client import OpenLineageClient
    from openlineage.client.transport.transport import TransportFactory

CONF_PREFIX = "spark.openlineage."
DEFAULT_CAPTURED_PROPERTIES = ("spark.master", "spark.app.name")


DISABLED_BY_DEFAULT: frozenset[str] = frozenset({"spark_unknown", "spark.logicalPlan", "debug"})
"""The facets openlineage-spark leaves out unless ``facets.<name>.disabled=false`` turns them on."""


@dataclass(frozen=True)
class ParentJob:
    """A run that is a parent of ours (``parentJob*`` / ``rootParentJob*`` keys)."""

    namespace: str
    name: str
    run_id: str


@dataclass(frozen=True)
class Tag:
    """One entry of the ``tags`` job or run facet (``job.tags`` / ``run.tags``): ``key``, or ``key:value``, or
    ``key:value:source``, as openlineage-spark reads them."""

    key: str
    value: str = "true"
    source: str = "CONFIG"


@dataclass(frozen=True)
class JobOwner:
    """One ``job.owners.<type>=<name>`` key: an entry of the ``ownership`` job facet."""

    type: str
    name: str


@dataclass(frozen=True)
class NamespaceResolver:
    """One ``dataset.namespaceResolvers.<name>.*`` group: dataset namespaces it matches are rewritten to
    ``name`` (``hostList``, ``pattern``), or to the regex group ``matching_group`` (``patternGroup``)."""

    name: str
    type: str
    hosts: tuple[str, ...] = ()
    regex: str | None = None
    """A Python regular expression (a Java one as written in the key, its named groups translated)."""
    matching_group: str | None = None
    schema: str | None = None
    """When set, only namespaces starting with ``<schema>://`` are rewritten."""


@dataclass(frozen=True)
class DatasetNamingConfig:
    """openlineage-spark's ``dataset.*`` keys: what is changed about dataset identities after the naming rules."""

    remove_path_pattern: str | None = None
    """``dataset.removePath.pattern``, as a Python regex: the text its ``remove`` group matched leaves names."""
    namespace_resolvers: tuple[NamespaceResolver, ...] = ()
    disabled_trimmers: tuple[str, ...] = ()
    """``dataset.disabledTrimmers``: openlineage-python trimmer classes (dotted paths) not applied."""
    extra_trimmers: tuple[str, ...] = ()
    """``dataset.extraTrimmers``: more openlineage-python trimmer classes (dotted paths) to apply."""


@dataclass(frozen=True)
class ColumnLineageConfig:
    """Column lineage settings: openlineage-spark's ``columnLineage.*`` keys, and this library's budget."""

    dataset_lineage: bool = True
    """``columnLineage.datasetLineageEnabled``: joins, filters, grouping and sorting go into the facet's
    ``dataset`` list (true), or into every field's input fields (false)."""
    descriptions: bool = False
    """``columnLineage.descriptionsEnabled``: each transformation is described by Spark's SQL of the expression
    or clause it comes from (``t1.a AS ident``, ``INNER JOIN ON (t1.a = t2.a)``), as in openlineage-spark."""
    schema_size_limit: int = 1000
    """``columnLineage.schemaSizeLimit``: outputs with more columns get no column lineage."""
    max_plan_chars: int = 2_000_000
    """``python.columnLineage.maxPlanChars``: a plan larger than this (as the py4j edge writes it) is read as
    its shape only; its datasets are reported without column lineage."""
    budget_millis: float = 1000.0
    """``python.columnLineage.budgetMillis``: analysis time a query's column lineage may take."""


@dataclass(frozen=True)
class LineageConfig:
    """Resolved, validated settings for one ``enable()``."""

    namespace: str = "default"
    app_name: str | None = None
    """``appName`` (or its other spelling ``overriddenAppName``): the application job's name."""
    application_run_id: str | None = None
    """``applicationRunId``: the application run's id, instead of a new UUID."""
    replace_dot_with_underscore: bool = False
    """``jobName.replaceDotWithUnderscore``: dots in the plan-node part of query job names become ``_``."""
    job_owners: tuple[JobOwner, ...] = ()
    job_tags: tuple[Tag, ...] = ()
    run_tags: tuple[Tag, ...] = ()
    environment_variables: tuple[str, ...] = ()
    """``facets.custom_environment_variables``: variables whose values go into the ``environment-properties``
    run facet."""
    allowed_spark_nodes: frozenset[str] = frozenset()
    """``filter.allowedSparkNodes``, as simple class names: plan roots reported though filtered by default."""
    denied_spark_nodes: frozenset[str] = frozenset()
    """``filter.deniedSparkNodes``, as simple class names: plan roots not reported."""
    dataset_naming: DatasetNamingConfig = DatasetNamingConfig()
    parent: ParentJob | None = None
    root_parent: ParentJob | None = None
    transport: dict[str, Any] | None = field(default=None, repr=False)
    """openlineage-python transport settings from ``enable()`` keywords or Spark confs; ``None`` lets the client
    resolve its own (``openlineage.yml``, ``OPENLINEAGE__*``, ``OPENLINEAGE_URL``). Not in ``repr()``: it may
    hold an api key."""
    disabled_facets: frozenset[str] = DISABLED_BY_DEFAULT
    """Facets left out: openlineage-spark's defaults (:data:`DISABLED_BY_DEFAULT`) unless
    ``facets.<name>.disabled=false``, and those configured."""
    captured_properties: tuple[str, ...] = DEFAULT_CAPTURED_PROPERTIES
    append_dataset_name: bool = True
    filter_read_only_actions: bool = True
    all_sessions: bool = True
    """``python.allSessions``: also report the queries of the driver's other sessions (Spark Connect clients',
    sessions made with ``newSession()``), heard on the listener bus; ``false``: only the enabled session's."""
    queue_size: int = 1000
    shutdown_timeout: float = 10.0
    disabled: bool = False
    enabled: bool = False
    """``spark.openlineage.enabled``: turns lineage on from configuration alone; see ``auto_activation``."""
    iceberg_metrics_reporter_disabled: bool = False
    rdd_events_disabled: bool = False
    """``filter.rddEventsDisabled``: no runs for Spark jobs that are no SQL execution (RDD actions); DataFrames
    over RDDs still report what their RDDs read."""
    spool_dir: str | None = None
    """``python.spool.dir`` (or ``$SPARK_LINEAGE_SPOOL_DIR``, else the user's state directory)."""
    spool_disabled: bool = False
    """``python.spool.disabled``: events are held in memory only, and lost with the process."""
    spool_max_bytes: int = 256 * 1024 * 1024
    """``python.spool.maxBytes``: when full, the oldest query-run events are dropped first."""
    delivery_concurrency: int = 4
    """``python.delivery.concurrency``: how many requests may be in flight at once per HTTP backend (each run's
    events still go in order; see :class:`spark_lineage.delivery.sender.Sender`)."""
    console_every_event: bool = False
    """``python.console.everyEvent``: the console transport prints a line for every event (START, each RUNNING),
    not only the one that ends each run."""
    connect_resolve_schemas: bool = False
    """``python.connect.resolveSchemas``: a Spark Connect client reporting its own actions asks the server for
    the schema of what each write writes (one round trip per write, on lineage's worker thread)."""
    connect_start_delay_millis: float = 1000.0
    """``python.connect.startDelayMillis`` (with no spool delay: ``connect_spool_delay_millis`` 0): how long a
    Spark Connect client reporting its own actions may hold an action's START (its time stays the request's) to
    spool and send it with the action's end, in one transaction and one send: an action that ends sooner costs
    one of each instead of two; ``0`` sends each START at once."""
    connect_send_delay_millis: float = 1000.0
    """``python.connect.sendDelayMillis``: how long the sender of a Spark Connect client reporting its own actions
    lets spooled events wait for more before it sends them (the events are on disk meanwhile): the events of the
    actions that end within that time go in one batch, read back in one lease; ``flush()`` sends at once; ``0``
    sends each action's events as they are spooled."""
    connect_spool_delay_millis: float = 1000.0
    """``python.connect.spoolDelayMillis``: how long a Spark Connect client reporting its own actions keeps an
    action's events (its START from when it is sent, its end's), to spool them with what the next actions keep
    in one transaction (written to a journal meanwhile, which the next process to open the spool recovers should
    this one be killed: see :mod:`spark_lineage.delivery.journal`); ``0`` spools each action's end as it comes."""
    column_lineage: ColumnLineageConfig | None = ColumnLineageConfig()
    """``None`` when the ``columnLineage`` facet is disabled: plans are then read without expressions."""
    producer: str | None = None
    """``python.producer``: the URI events and this library's facets name as their producer instead of
    :data:`spark_lineage.facets.PRODUCER` (e.g. a fork's repository, or a platform's own build); ``None`` keeps
    the default."""
    redaction_pattern: str | None = None
    """``spark.redaction.regex`` as the session has it: what else, beyond Spark's defaults, counts as secret."""
    unknown_keys: tuple[str, ...] = ()
    """``spark.openlineage.*`` keys no setting reads (warned about once, with what may have been meant)."""
    not_applicable_keys: tuple[str, ...] = ()
    """openlineage-spark keys that were set but cannot apply to a Python listener (warned about once, with
    why)."""
    unknown_transport_keys: tuple[str, ...] = ()
    """``spark.openlineage.transport.*`` keys the configured transport does not read, each as its warning line
    (with what may have been meant): openlineage-python would ignore them without a word."""

    def facet_enabled(self, name: str) -> bool:
        return name not in self.disabled_facets

    def create_client(self, factory: TransportFactory | None = None) -> OpenLineageClient:
        """An openlineage-python client for this configuration. Its settings are given as the client's own
        ``config``, so that ``openlineage.yml`` and ``OPENLINEAGE__*`` variables merge in beneath them (facets,
        filters, tags, and transport settings these did not name). ``factory`` makes the transport (see
        :func:`spark_lineage.delivery.create_client`, which teaches the redactor its secrets)."""
        from openlineage.client import OpenLineageClient

        if self.transport is None:
            return OpenLineageClient(factory=factory)
        try:
            return OpenLineageClient(config={"transport": dict(self.transport)}, factory=factory)
        except Exception as error:  # the factory raises several types; all mean the same to a user
            raise ConfigError(
                f"{CONF_PREFIX}transport.* does not make a working '{self.transport.get('type')}' transport: {error}"
            ) from error
