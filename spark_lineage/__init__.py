"""spark_lineage: OpenLineage lineage for Spark SQL, from a query-execution listener written in Python.

    import spark_lineage
    handle = spark_lineage.enable(spark)           # lineage on for this session
    ...
    handle.disable()                               # and off again

Configuration comes from ``enable()`` keyword overrides, then ``spark.openlineage.*`` confs, then the
openlineage-python client's own configuration; see :mod:`spark_lineage.config`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from spark_lineage._version import __version__
from spark_lineage.config import ConfigError, LineageConfig
from spark_lineage.session import LineageHandle

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "ConfigError",
    "LineageConfig",
    "LineageHandle",
    "SparkConnectNotSupportedError",
    "__version__",
    "enable",
]

log = logging.getLogger("spark_lineage")


class SparkConnectNotSupportedError(ConfigError):
    """``enable()`` was given a Spark Connect session, which has no JVM in this process to listen to."""


def enable(spark: SparkSession, **overrides: Any) -> LineageHandle:
    """Turn lineage on for ``spark`` and return the handle that controls it.

    ``overrides`` take precedence over ``spark.openlineage.*`` confs and use the same keys without the
    prefix, e.g. ``enable(spark, namespace="prod", transport={"type": "http", "url": "http://marquez:5000"})``.
    Calling it again for the same session returns the same handle. With ``spark.openlineage.disabled=true``
    or ``OPENLINEAGE_DISABLED=true`` it does nothing and returns a disabled handle.

    Raises :class:`ConfigError` for a configuration that cannot work, naming the key and what it accepts, and
    :class:`SparkConnectNotSupportedError` for a Spark Connect session.
    """
    from spark_lineage import config as config_module
    from spark_lineage import session as session_module
    from spark_lineage.jvm import JvmBridge

    _reject_spark_connect(spark)
    bridge = JvmBridge(spark)
    existing = session_module.handle_for(bridge.session_key)
    if existing is not None:
        return existing
    session = bridge.session_info()
    if config_module.is_disabled(session.conf, overrides):
        log.info("spark_lineage: lineage is disabled by configuration; enable() does nothing")
        return LineageHandle(None)
    config = config_module.resolve(session.conf, overrides)
    if config.unknown_keys:
        log.debug("spark_lineage: ignoring spark.openlineage keys it does not use: %s", config.unknown_keys)
    client = config.create_client()
    runtime = session_module.LineageRuntime(bridge, config, client, session)
    return session_module.start_runtime(bridge.session_key, runtime, bridge.spark_context)


def _reject_spark_connect(spark: Any) -> None:
    if getattr(spark, "_jsparkSession", None) is not None:
        return
    module = type(spark).__module__
    if "connect" in module:
        raise SparkConnectNotSupportedError(
            "spark_lineage cannot attach to a Spark Connect session: the client process has no Spark JVM, "
            "so there is no query listener to register. Enable lineage where the queries run instead: on the "
            "Spark Connect server, add openlineage-spark (spark.extraListeners="
            "io.openlineage.spark.agent.OpenLineageSparkListener), or use a classic SparkSession "
            "(SparkSession.builder without .remote()) with spark_lineage."
        )
    raise TypeError(f"spark_lineage.enable() needs a pyspark SparkSession, got {type(spark).__name__}")
