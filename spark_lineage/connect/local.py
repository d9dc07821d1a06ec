"""Spark Connect client sessions whose server PySpark started in this very process.

``SparkSession.builder.remote("local[N]")``, and ``spark.api.mode=connect`` with a local master, connect to no
server elsewhere: PySpark starts one here (``pyspark.sql.connect.session.SparkSession._start_connect_server``,
the same on 4.0, 4.1 and 4.3). It creates a classic SparkSession over a real SparkContext whose
``spark.plugins`` start Spark Connect's gRPC service in this driver JVM, keeps it as
``pyspark.sql.session.SparkSession._instantiatedSession``, and hands the user a Connect client session that
talks to it over gRPC on ``localhost``. So the queries run in a JVM this process holds, and lineage can be
turned on there, on the server's classic session.

Where settings go, read from PySpark's sources:

- the builder's options (``.config()``, ``.appName()``) become the server's SparkConf, so the start-up hook
  sees ``spark.openlineage.*`` confs on the hidden classic session as it does for a classic builder; PySpark
  then sets them on the client's session as well;
- what the client sets later with ``spark.conf.set`` lives in its own server-side session only:
  :func:`client_conf` lists those ``spark.openlineage.*`` confs for :func:`spark_lineage.enable` to apply, but
  for the keys a client may set for its own session's run (:data:`~spark_lineage.connect.identity.CLIENT_KEYS`),
  which that run takes (:mod:`spark_lineage.connect.sessions`). In one process the client is the server's
  owner: what a shared server refuses from a client is this server's configuration.

This module imports no PySpark: a Connect session's own objects, and PySpark's modules already loaded, are asked.
"""

from __future__ import annotations

import ipaddress
import socket
import sys
from collections.abc import Mapping
from typing import Any

from spark_lineage.connect.identity import client_settings

CONNECT_SERVICE = "org.apache.spark.sql.connect.service.SparkConnectService$"
"""The Scala object of Spark Connect's gRPC service: ``started()`` and the port it listens on, ``localPort()``
(PySpark's own ``DefaultChannelBuilder.default_port`` asks it the same way under ``SPARK_TESTING``)."""


def is_connect_session(spark: Any) -> bool:
    """A Spark Connect client session (``pyspark.sql.connect.session.SparkSession``), which has no JVM of its
    own."""
    return getattr(spark, "_jsparkSession", None) is None and "connect" in type(spark).__module__


def is_stopped(spark: Any) -> bool:
    """Whether the client session was stopped (its channel closed)."""
    try:
        return bool(spark.is_stopped)
    except Exception:  # noqa: BLE001 - an older client without the property: it is not known to be stopped
        return False


def server_session(spark: Any) -> Any:
    """The classic session of the server behind Connect client session ``spark`` when that server runs in this
    process, else ``None`` (a server in another process or on another host). Never raises.

    Served here means: this process holds a live classic session whose JVM runs Spark Connect's service, and
    the client connects to a local address at the port that service listens on. Whether PySpark or the user
    started that server (a classic session with ``spark.plugins=…SparkConnectPlugin``) does not matter."""
    server = _server_session()
    if server is None:
        return None
    port = _service_port(server)
    endpoint = client_endpoint(spark)
    if port is None or endpoint is None or endpoint[1] != port or not _is_local_host(endpoint[0]):
        return None
    return server


def client_endpoint(spark: Any) -> tuple[str, int] | None:
    """Where the client session connects, as (host, port); ``None`` for a channel PySpark did not build from a
    ``sc://`` URL, whose address it does not tell."""
    try:
        host, _, port = str(spark._client._builder.endpoint).rpartition(":")
        return host.strip("[]"), int(port)
    except Exception:  # noqa: BLE001 - a custom ChannelBuilder
        return None


def _server_session() -> Any:
    """The classic session PySpark keeps for this process (the Connect server's, when it started one), while
    its SparkContext runs."""
    module = sys.modules.get("pyspark.sql.session")
    session = getattr(getattr(module, "SparkSession", None), "_instantiatedSession", None)
    if session is None or getattr(session._sc, "_jsc", None) is None:
        return None
    return session


def _service_port(server: Any) -> int | None:
    """The port Spark Connect's service listens on in ``server``'s JVM; ``None`` when it does not run there
    (no plugin, or PySpark 3.5 without the spark-connect jar)."""
    try:
        service = getattr(getattr(server._jvm, CONNECT_SERVICE), "MODULE$")
        return int(service.localPort()) if service.started() else None
    except Exception:  # noqa: BLE001 - the class is not on the class path: no Connect server here
        return None


def _is_local_host(host: str) -> bool:
    """Whether ``host`` names this machine: ``localhost``, a loopback address, or an address (or a name
    resolving to one) that a socket here can bind."""
    if host.lower() == "localhost":
        return True
    try:
        addresses = {str(info[4][0]) for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)}
    except OSError:
        return False
    return bool(addresses) and all(_is_local_address(address) for address in addresses)


def _is_local_address(address: str) -> bool:
    try:
        parsed = ipaddress.ip_address(address.split("%", maxsplit=1)[0])
    except ValueError:
        return False
    if parsed.is_loopback:
        return True
    family = socket.AF_INET6 if parsed.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((address, 0))
        return True
    except OSError:
        return False


def client_conf(spark: Any, server_conf: Mapping[str, str]) -> dict[str, str]:
    """The ``spark.openlineage.*`` confs the client's session sets, and the server's session (whose confs are
    ``server_conf``) lacks or holds with another value, but for those a client sets for its own session's run;
    one round trip to the server. Empty when the client cannot list its confs (PySpark 3.5's)."""
    try:
        client = {str(key): str(value) for key, value in dict(spark.conf.getAll).items()}
    except Exception:  # noqa: BLE001 - the server session's confs then stand alone
        return {}
    return {key: client[key] for key in client_settings(client, server_conf).refused}
