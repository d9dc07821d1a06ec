"""What configuration changes about a dataset's identity once the naming rules have named it, in
openlineage-spark's order: the namespace by the first ``dataset.namespaceResolvers`` entry that changes it
(so ``postgres://db-replica-2:5432`` can be ``postgres://warehouse:5432``), then the name by
``dataset.removePath.pattern`` (the text its ``remove`` group matched is cut out)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from spark_lineage.config import DatasetNamingConfig, NamespaceResolver
from spark_lineage.naming.identifiers import DatasetIdentifier


@dataclass(frozen=True)
class DatasetRewrites:
    """The ``dataset.*`` settings that rewrite identities, ready to apply."""

    resolvers: tuple[NamespaceResolver, ...] = ()
    remove_path: re.Pattern[str] | None = None

    @classmethod
    def from_config(cls, config: DatasetNamingConfig) -> DatasetRewrites:
        pattern = config.remove_path_pattern
        return cls(config.namespace_resolvers, re.compile(pattern) if pattern else None)

    def __bool__(self) -> bool:
        return bool(self.resolvers) or self.remove_path is not None

    def identifier(self, identifier: DatasetIdentifier) -> DatasetIdentifier:
        return DatasetIdentifier(self.namespace(identifier.namespace), self.name(identifier.name))

    def namespace(self, namespace: str) -> str:
        for resolver in self.resolvers:
            resolved = _resolve(resolver, namespace)
            if resolved != namespace:
                return resolved
        return namespace

    def name(self, name: str) -> str:
        match = self.remove_path.search(name) if self.remove_path is not None else None
        if match is None or not match.group("remove"):
            return name
        return name[: match.start("remove")] + name[match.end("remove") :]


def _resolve(resolver: NamespaceResolver, namespace: str) -> str:
    if resolver.schema and not namespace.startswith(resolver.schema + "://"):
        return namespace
    if resolver.type == "hostList":
        lowered = namespace.lower()
        host = next((host for host in resolver.hosts if host.lower() in lowered), None)
        if host is None:
            return namespace
        return re.sub(re.escape(host), lambda _: resolver.name, namespace, flags=re.IGNORECASE)
    pattern = re.compile(resolver.regex or "")
    match = pattern.search(namespace)
    if match is None:
        return namespace
    # ``pattern`` puts the resolver's name for every match; ``patternGroup`` what its group matched first.
    replacement = resolver.name if resolver.type == "pattern" else (match.group(resolver.matching_group or 0) or "")
    return pattern.sub(lambda _: replacement, namespace)
