"""spark_lineage: OpenLineage lineage for Spark SQL, from a query-execution listener written in Python.

    import spark_lineage
    handle = spark_lineage.enable(spark)           # lineage on for this session
    ...
    handle.disable()                               # and off again

Without any code: ``spark-submit --conf spark.openlineage.transport.type=http --conf
spark.openlineage.transport.url=...`` turns it on for every session of a job (see :mod:`spark_lineage._autoload`),
and ``%load_ext spark_lineage`` does so in a notebook (see :mod:`spark_lineage.notebook`).

Configuration comes from ``enable()`` keyword overrides, then ``spark.openlineage.*`` confs, then the
openlineage-python client's own configuration; see :mod:`spark_lineage.config`.

This module imports nothing heavy: the start-up hook imports the package in every interpreter of its
environment, so the rest loads only when used.
"""

from __future__ import annotations

from spark_lineage._version import __version__

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing would cost every interpreter start-up
if TYPE_CHECKING:
    from typing import Any

    from pyspark.sql import SparkSession

    from spark_lineage.config import LineageConfig
    from spark_lineage.errors import ConfigError, LineageError, StoppedSessionError
    from spark_lineage.handles import LineageHandle
    from spark_lineage.session import SparkLineageHandle

__all__ = [
    "ConfigError",
    "LineageConfig",
    "LineageError",
    "LineageHandle",
    "SparkLineageHandle",
    "StoppedSessionError",
    "__version__",
    "enable",
    "load_ipython_extension",
    "unload_ipython_extension",
]

_LAZY = {
    "ConfigError": "spark_lineage.errors",
    "LineageConfig": "spark_lineage.config",
    "LineageError": "spark_lineage.errors",
    "LineageHandle": "spark_lineage.handles",
    "SparkLineageHandle": "spark_lineage.session",
    "StoppedSessionError": "spark_lineage.errors",
}


def enable(spark: SparkSession, **overrides: Any) -> SparkLineageHandle:
    """Turn lineage on for ``spark`` and return the handle that controls it.

    ``overrides`` take precedence over ``spark.openlineage.*`` confs and use the same keys without the
    prefix, e.g. ``enable(spark, namespace="prod", transport={"type": "http", "url": "http://marquez:5000"})``.
    Calling it again for the same session returns the same handle. With ``spark.openlineage.disabled=true``
    or ``OPENLINEAGE_DISABLED=true``, or when openlineage-spark's Java listener is configured too
    (``spark.extraListeners``), it does nothing and returns a disabled handle.

    A Spark Connect session (``pyspark.sql.connect``) whose server PySpark runs in this process
    (``SparkSession.builder.remote("local[N]")``, or ``spark.api.mode=connect`` with a local master) turns
    lineage on for that server's session, and its handle is returned; the ``spark.openlineage.*`` confs the
    client session sets itself (``spark.conf.set``) apply as a classic session's own confs do, but for those
    that name the Connect session's own run (appName, namespace, parents, tags, owners). For a Connect session
    of a server in another process, the client reports its own actions (:mod:`spark_lineage.connect.client`),
    unless the server reports its sessions itself: then only the client's identity keys are set on the session.
    Such an ``enable()`` never raises: what keeps lineage off is said in one line, and the handle is disabled.

    Raises :class:`ConfigError` for a configuration that cannot work, naming the key and what it accepts, and
    :class:`StoppedSessionError` for a session that is stopped (a classic session's SparkContext, or a Connect
    session).
    """
    from spark_lineage.activation import enable_session

    return enable_session(spark, overrides)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext spark_lineage``: lineage on for the active SparkSession and the ones created later, and the
    ``%lineage`` magic."""
    from spark_lineage.notebook import load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext spark_lineage``: lineage off, and new sessions decided by configuration again."""
    from spark_lineage.notebook import unload

    unload(ipython)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'spark_lineage' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
