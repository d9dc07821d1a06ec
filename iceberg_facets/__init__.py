"""iceberg_facets: Iceberg commit and scan metrics as OpenLineage facets, for Spark and for pyiceberg.

In a plain Python process, with no Spark anywhere::

    import iceberg_facets
    handle = iceberg_facets.enable()                # every pyiceberg catalog in the process
    table.append(df)                                # a run: icebergCommitReport on the output
    with iceberg_facets.run("daily_load"):          # one run: tables scanned in, tables committed out
        dst.append(src.scan(row_filter="day = 3").to_arrow())
    handle.disable()

Events go through the openlineage-python client: its own configuration (``openlineage.yml``,
``OPENLINEAGE__*``, ``OPENLINEAGE_URL``) applies unless a client is passed. Each event is spooled on disk
before it is sent (:mod:`spark_lineage.delivery`), so a backend that is down loses nothing that
``spark-lineage replay`` cannot deliver later. Datasets are named exactly as the Spark side
(:mod:`spark_lineage`) names the same tables, so both engines meet in one lineage graph.
"""

from __future__ import annotations

import logging
from typing import Any

from openlineage.client import OpenLineageClient

from iceberg_facets.runtime import IcebergLineage, LineageRun
from spark_lineage.config import ConfigError, LineageConfig, is_disabled, resolve_options
from spark_lineage.delivery import create_client, open_spool, where_events_go
from spark_lineage.extras import install_hint
from spark_lineage.redaction import Redactor, protect_logs
from spark_lineage.transports import learn_secrets

__all__ = ["ConfigError", "IcebergLineageHandle", "LineageRun", "enable", "run"]

log = logging.getLogger("iceberg_facets")

OPTIONS = {
    "namespace": "namespace",
    "job_name": "appName",
    "transport": "transport",
    "disabled": "disabled",
    "disabled_facets": "facets.disabled",
    "append_dataset_name": "jobName.appendDatasetName",
    "parent_job_namespace": "parentJobNamespace",
    "parent_job_name": "parentJobName",
    "parent_run_id": "parentRunId",
    "root_parent_job_namespace": "rootParentJobNamespace",
    "root_parent_job_name": "rootParentJobName",
    "root_parent_run_id": "rootParentRunId",
    "queue_size": "python.queueSize",
    "shutdown_timeout": "python.shutdownTimeoutSeconds",
    "spool_dir": "python.spool.dir",
    "spool_disabled": "python.spool.disabled",
    "spool_max_bytes": "python.spool.maxBytes",
    "delivery_concurrency": "python.delivery.concurrency",
    "producer": "python.producer",
}
"""``enable()`` options and the ``spark.openlineage.*`` key each one means on the Spark side."""
SPOOL_DIR_OPTION = "iceberg_facets.enable() option spool_dir"


class IcebergLineageHandle:
    """Controls lineage for pyiceberg in this process. Returned by :func:`enable`. Keeps the
    :class:`~spark_lineage.handles.LineageHandle` protocol, as a SparkSession's handle does."""

    def __init__(self, runtime: IcebergLineage | None) -> None:
        self._runtime = runtime

    @property
    def enabled(self) -> bool:
        return self._runtime is not None and not self._runtime.closed

    @property
    def config(self) -> LineageConfig | None:
        return self._runtime.config if self._runtime is not None else None

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Wait until every event captured so far has been sent. True if they were within ``timeout``."""
        return self._runtime.flush(timeout) if self.enabled else True  # type: ignore[union-attr]

    def disable(self, timeout: float | None = None) -> bool:
        """Remove the instrumentation from pyiceberg at once, then send what was captured, waiting at most
        ``timeout`` seconds (default: the ``shutdown_timeout`` option, 10 s). True if everything was sent;
        what was not waits in the spool, and a warning says how to send it (``spark-lineage replay``)."""
        from iceberg_facets import runtime

        if self._runtime is None:
            return True
        return runtime.stop(self._runtime, timeout)

    def __enter__(self) -> IcebergLineageHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.disable()

    def __repr__(self) -> str:
        return f"IcebergLineageHandle(enabled={self.enabled})"


def enable(client: OpenLineageClient | None = None, **options: Any) -> IcebergLineageHandle:
    """Instrument every pyiceberg catalog in this process (created before or after this call, loaded with
    ``load_catalog`` or constructed directly) and return the handle that turns it off again.

    ``client`` sends the events; by default one is made from openlineage-python's own configuration, or from
    the ``transport`` option (``{"type": "http", "url": "http://marquez:5000"}``). Options:

    - ``namespace``: the job namespace (default ``$OPENLINEAGE_NAMESPACE``, else ``default``);
    - ``job_name``: the job, and the prefix of each standalone run's job (default: the script's name);
    - ``transport``, ``disabled``, ``disabled_facets``, ``append_dataset_name``, ``parent_job_namespace`` /
      ``parent_job_name`` / ``parent_run_id`` (and ``root_parent_*``), ``queue_size`` (events waiting, 1000),
      ``shutdown_timeout`` (seconds to deliver at exit, 10), ``spool_dir`` (default
      ``$SPARK_LINEAGE_SPOOL_DIR``, else the user's state directory), ``spool_disabled``, ``spool_max_bytes``,
      ``delivery_concurrency`` (requests in flight per HTTP backend, 4), ``producer``: as ``spark.openlineage.*``
      means them on Spark;
    - ``delivery``: ``"process"`` (default) builds, spools and sends events in a helper process, so that their
      Python work never competes with the job's threads for the GIL; ``"thread"`` does it in a thread of this
      process. A passed ``client`` is always used from a thread here, its transport sending.

    Calling it again while enabled returns the same handle. With ``disabled=True`` or
    ``OPENLINEAGE_DISABLED=true`` it does nothing. A bad option or a transport that cannot be made raises
    :class:`ConfigError` naming it; a spool directory that cannot be written is a warning, and events are then held
    in memory until sent.
    """
    from iceberg_facets import runtime
    from iceberg_facets.delivery import DeliveryMode

    delivery = options.pop("delivery", DeliveryMode.PROCESS.value)
    try:
        mode = DeliveryMode(delivery)
    except ValueError:
        accepted = ", ".join(m.value for m in DeliveryMode)
        raise ConfigError(
            f"iceberg_facets.enable() option delivery={delivery!r} is not valid; accepted: {accepted}"
        ) from None
    config = resolve_options(options, OPTIONS, "iceberg_facets.enable()")
    if config.disabled or is_disabled({}):
        log.info("iceberg_facets: lineage is disabled by configuration; enable() does nothing")
        return IcebergLineageHandle(None)
    existing = runtime.active()
    if existing is not None:
        return IcebergLineageHandle(existing)
    try:
        import pyiceberg  # noqa: F401
    except ImportError:
        raise ConfigError(
            f"iceberg_facets.enable() instruments pyiceberg, which is not installed: {install_hint('pyiceberg')}"
        ) from None
    job_name = config.app_name or runtime.default_job_name()
    redactor = Redactor(config.redaction_pattern)
    protect_logs(redactor)
    # A transport that cannot work is refused here, not in the helper process; a spool that cannot be kept on
    # disk is said here once, and events are held in memory (see spark_lineage.delivery.failover).
    transport = (client or create_client(config, redactor)).transport
    learn_secrets(redactor, transport)  # a client passed in: its url parameters, headers and api key
    spool = open_spool(config, SPOOL_DIR_OPTION, label="iceberg_facets")
    spool.close()
    handle = IcebergLineageHandle(runtime.start(config, client, job_name, mode, redactor))
    log.info(
        "iceberg_facets: lineage on for pyiceberg in job %s (namespace %s); %s",
        job_name,
        config.namespace,
        where_events_go(transport, spool),
    )
    return handle


def run(job_name: str) -> LineageRun:
    """A block whose pyiceberg scans and commits are one run of job ``job_name``, in this thread (or asyncio
    task): START at entry, COMPLETE at exit, FAIL if the block raises. Inputs are the tables scanned in it,
    outputs the tables committed, created or dropped. A block inside another is a run of its own, with the
    outer run as its parent. Without :func:`enable`, it does nothing."""
    return LineageRun(job_name)
