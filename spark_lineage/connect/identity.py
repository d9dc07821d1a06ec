"""What a Spark Connect client may set for its own lineage, and the settings its session's runs are built with.

A client's ``spark.conf.set`` values reach the server as its session's confs, and nothing there is trusted:
only the keys of :data:`CLIENT_KEYS` (names, namespace, parents, tags, owners) are taken from it. Transport,
facet switches, captured properties and redaction stay the server's. A key counts as the client's when its
value differs from the server's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from spark_lineage.config import CONF_PREFIX, ConfigError, LineageConfig, ParentJob, Tag, resolve
from spark_lineage.config.keys import PARENT_KEYS

CLIENT_KEYS = frozenset({"appName", "overriddenAppName", "namespace", "job.tags", "run.tags", *PARENT_KEYS})
"""The ``spark.openlineage.*`` keys (without the prefix) a client may set; and ``job.owners.<type>``."""
_CLIENT_KEY_PREFIXES = ("job.owners.",)


@dataclass(frozen=True)
class ClientSettings:
    """The ``spark.openlineage.*`` keys a client set on its session, taken or refused."""

    taken: tuple[tuple[str, str], ...] = ()
    """``(key without the prefix, value)``, sorted."""
    refused: tuple[str, ...] = ()
    """Full key names, sorted."""


def client_settings(session_conf: Mapping[str, str], server_conf: Mapping[str, str]) -> ClientSettings:
    """Split what a client set (``session_conf``'s ``spark.openlineage.*`` keys whose values the server's
    ``server_conf`` does not have) into the keys taken and those refused."""
    taken: list[tuple[str, str]] = []
    refused: list[str] = []
    for key, value in session_conf.items():
        if not key.startswith(CONF_PREFIX) or server_conf.get(key) == value:
            continue
        short = key[len(CONF_PREFIX) :]
        if short in CLIENT_KEYS or short.startswith(_CLIENT_KEY_PREFIXES):
            taken.append((short, value))
        else:
            refused.append(key)
    return ClientSettings(tuple(sorted(taken)), tuple(sorted(refused)))


def session_config(server: LineageConfig, taken: tuple[tuple[str, str], ...], server_app: ParentJob) -> LineageConfig:
    """The settings a Connect session's runs are built with: the server's, with the client's names, namespace,
    parents, tags and owners. The session's run is a child of the client's parent, else of the server's
    application run (``server_app``). Raises :class:`ConfigError`, naming the key, for a client value that
    cannot be read."""
    client_keys = dict(taken)
    flat = {CONF_PREFIX + key: value for key, value in client_keys.items()}
    flat.setdefault(CONF_PREFIX + "namespace", server.namespace)
    client = resolve(flat)
    if client.parent is not None:
        parent, root = client.parent, client.root_parent
    else:
        parent, root = server_app, server.root_parent or server.parent or server_app
    return replace(
        server,
        namespace=client.namespace,
        app_name=client.app_name or server.app_name,
        parent=parent,
        root_parent=root,
        job_tags=_merged(server.job_tags, client.job_tags),
        run_tags=_merged(server.run_tags, client.run_tags),
        job_owners=client.job_owners or server.job_owners,
    )


def _merged(server: tuple[Tag, ...], client: tuple[Tag, ...]) -> tuple[Tag, ...]:
    """The server's tags, then the client's (a client's tag of the same key wins)."""
    keys = {tag.key for tag in client}
    return tuple(tag for tag in server if tag.key not in keys) + client


__all__ = ["CLIENT_KEYS", "ClientSettings", "ConfigError", "client_settings", "session_config"]
