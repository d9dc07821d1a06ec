"""Kafka topics: namespace ``kafka://<host:port of the first bootstrap server>``, name the topic.

openlineage-spark names a topic by the first server of ``kafka.bootstrap.servers``, read as a URI (a server
without a scheme is taken as ``PLAINTEXT://``, and one whose listener name has an underscore, like
``SASL_SSL://``, is no URI to it, where it is the server here); the spec's Kafka naming (openlineage-python's
:class:`~openlineage.client.naming.dataset.Kafka`) builds the identity from its host and port.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from urllib.parse import urlsplit

from openlineage.client.naming import dataset as ol_naming

from spark_lineage.naming.identifiers import DatasetIdentifier

_NO_SERVER = "kafka://"
_LISTENER = re.compile(r"^\w+://")


def kafka_dataset(bootstrap_servers: str | None, topic: str) -> DatasetIdentifier:
    """The identity of ``topic`` on the cluster ``bootstrap_servers`` (a comma-separated server list) names."""
    first = (bootstrap_servers or "").split(",", 1)[0].strip()
    if not first:
        return DatasetIdentifier(_NO_SERVER, topic)
    # A listener name may prefix the server (SASL_SSL://host:9093); it is no part of the identity.
    parts = urlsplit("//" + _LISTENER.sub("", first))
    try:
        port = parts.port
    except ValueError:  # not a number: the reference's URI parser gives -1 too
        port = None
    if not parts.hostname:
        return DatasetIdentifier(_NO_SERVER, topic)
    naming = ol_naming.Kafka(bootstrap_server_host=parts.hostname, port=str(port or -1), topic=topic)
    return DatasetIdentifier(naming.get_namespace(), naming.get_name())


def option_topics(options: Mapping[str, str]) -> list[str]:
    """The topics Kafka source or sink options name (keys in lower case): ``subscribe`` (a comma-separated
    list), ``topic``, and the topics of an ``assign`` JSON. A ``subscribePattern`` names none: which topics
    it matched is not known, and a dataset for the pattern would be one that does not exist."""
    topics = [topic.strip() for topic in options.get("subscribe", "").split(",") if topic.strip()]
    if options.get("topic"):
        topics.append(options["topic"].strip())
    assign = options.get("assign")
    if assign:
        try:
            assigned = json.loads(assign)
        except ValueError:
            assigned = {}
        if isinstance(assigned, dict):
            topics.extend(str(topic) for topic in assigned)
    return list(dict.fromkeys(topics))
