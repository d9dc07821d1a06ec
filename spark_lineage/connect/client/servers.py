"""Whether lineage already runs on a Spark Connect server, from the confs the server shows its client.

A client's own lineage is for servers nobody lets you touch. Where the server reports its sessions already,
with openlineage-spark's listener or with this library (``spark-lineage connect-server``, or a Python driver
whose ``spark.openlineage.*`` confs turn it on), the client reports nothing itself, so that no run is
reported twice: it only sets its session's identity (``appName``, parent, tags), which the server's lineage
reads (:mod:`spark_lineage.connect.identity`).
"""

from __future__ import annotations

from collections.abc import Mapping

from spark_lineage.config import JAVA_AGENT_LISTENER, auto_activation, java_agent_configured


def server_lineage(server_conf: Mapping[str, str]) -> str | None:
    """Why the server reports its sessions itself, ``None`` when it does not (as far as its confs say)."""
    if java_agent_configured(server_conf):
        return f"the server runs openlineage-spark ({JAVA_AGENT_LISTENER} in spark.extraListeners)"
    activation = auto_activation(server_conf)
    if activation.on:
        return f"the server runs spark_lineage ({activation.reason})"
    return None
