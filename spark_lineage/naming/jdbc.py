"""Databases reached over JDBC as datasets.

A table behind a JDBC URL is named as openlineage-spark names it (its ``JdbcDatasetUtils``), so that both
report one dataset: the URL without ``jdbc:`` picks a naming rule by its sub-protocol; the namespace is the
scheme and the lower-cased host(s) and port(s), with the database's default port where the reference adds
one; the name is the table's parts, after the database the URL names:

================================================  ==============================  ==================
URL + table                                       namespace                       name
================================================  ==============================  ==================
``jdbc:postgresql://db:5432/shop`` + ``s.t``      ``postgres://db:5432``          ``shop.s.t``
``jdbc:mysql://db/shop`` + ``t``                  ``mysql://db:3306``             ``shop.t``
``jdbc:sqlserver://db;databaseName=shop`` + ``t``  ``sqlserver://db``              ``shop.t``
``jdbc:oracle:thin:@//db:1521/svc`` + ``s.t``     ``oracle://db:1521``            ``svc.s.t``
``jdbc:sqlite:/data/shop.db`` + ``t``             ``sqlite:/data/shop.db``        ``t``
================================================  ==============================  ==================

Credentials never appear: user and password in the authority, the query string or ``;key=value``
properties are dropped, and so is every other connection parameter (where the reference keeps some, and in
two cases a password; see docs/compared.md's known differences).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from spark_lineage.naming.identifiers import DatasetIdentifier

_JDBC_PREFIX = re.compile(r"^jdbc:", re.IGNORECASE)
_ILLEGAL_URI_CHARS = re.compile(r'[ "<>\\^`{|}]|%(?![0-9A-Fa-f]{2})')
_DOMAIN_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?", re.ASCII)
_TOP_LABEL = re.compile(r"[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?", re.ASCII)
_IPV4 = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}", re.ASCII)
_USER_INFO = re.compile(r"[A-Za-z0-9\-_.!~*'();:&=+$,%]*", re.ASCII)
_MULTI_HOST = re.compile(r"(\w+)://([A-Za-z0-9_.\[\]:,-]+)/?([A-Za-z0-9_.]+)?(\?.*)?", re.ASCII)
_HOST_WITH_PORT = re.compile(r"(\[[^\]]*\]|[^:]+):\d*")


class _UnparsableUrlError(ValueError):
    """The URL does not fit its naming rule: the namespace is then the cleaned URL itself."""


@dataclass(frozen=True)
class _Location:
    scheme: str
    authority: str | None = None
    instance: str | None = None
    database: str | None = None
    database_only_before_one_part: bool = False
    """MySQL and ClickHouse name ``db.t`` for a one-part table ``t``, but ``a.b`` as ``a.b``."""
    path: str | None = None
    """A database that is a local directory (Derby): the namespace is ``file:<path>``."""

    def identifier(self, parts: Sequence[str]) -> DatasetIdentifier:
        if self.path is not None:
            return DatasetIdentifier(f"{self.scheme}:{self.path}", ".".join(parts))
        namespace = self.scheme.lower() + ":"
        if self.authority:
            namespace += "//" + self.authority.lower()
        if self.instance:
            namespace += "/" + self.instance.lstrip("/")
        names = list(parts)
        if self.database and (len(parts) == 1 or not self.database_only_before_one_part):
            names.insert(0, self.database)
        return DatasetIdentifier(namespace, ".".join(names))


def jdbc_dataset(
    url: str, table: str | Sequence[str], properties: Mapping[str, str] | None = None
) -> DatasetIdentifier:
    """The dataset for a table (``db.schema.table`` as written, or its parts) behind a JDBC URL.
    ``properties`` are the connection's properties (SQL Server takes ``databaseName`` from there)."""
    parts = table.split(".") if isinstance(table, str) else list(table)
    uri = _JDBC_PREFIX.sub("", url)
    lowered = {key.lower(): value for key, value in (properties or {}).items()}
    for applies, extract in _RULES:
        if applies(uri):
            try:
                return extract(uri, lowered).identifier(parts)
            except _UnparsableUrlError:
                return DatasetIdentifier(clean_url(uri), ".".join(parts))
    raise AssertionError("the generic rule applies to every URL")


def clean_url(uri: str) -> str:
    """A JDBC URL (without ``jdbc:``) with credentials, properties and query string removed, for URLs no
    naming rule can take apart."""
    uri = re.sub(r"[A-Za-z0-9_%]+//?[A-Za-z0-9_%]*@", "@", uri)  # Oracle's user/password@
    uri = re.sub(r"([/,|])[A-Za-z0-9_%]+:?[A-Za-z0-9_%]*@", r"\1", uri)  # user:password@ in an authority
    uri = re.sub(r"[,;&:]?(?:user|username|password)=[^,;&:()]*[,;&:]?", "", uri, flags=re.IGNORECASE)
    uri = re.sub(r"[,;&:]{2,}", "", uri)
    uri = re.sub(r"(?:\(\)){2,}", "", uri)
    return re.split(r"[?;]", uri, maxsplit=1)[0]


def jdbc_uri(uri: str) -> str:
    """A database's JDBC URL, without user, password or parameters, from a JDBC URL or a SQLAlchemy URL:
    ``sqlite:////abs/cat.db`` and ``jdbc:sqlite:file:/abs/cat.db`` are both ``jdbc:sqlite:/abs/cat.db``;
    ``postgresql+psycopg2://u:p@db:5432/cat`` and ``jdbc:postgresql://db:5432/cat?user=u`` are both
    ``jdbc:postgresql://db:5432/cat``. This is how an Iceberg JDBC catalog is identified."""
    is_jdbc = uri.startswith("jdbc:")
    dialect, _, rest = (uri[len("jdbc:") :] if is_jdbc else uri).partition(":")
    dialect = dialect.split("+", 1)[0].lower()
    if dialect == "sqlite":
        path = rest.split("?", 1)[0]
        if not is_jdbc:  # SQLAlchemy: sqlite:///relative/path, sqlite:////absolute/path
            return f"jdbc:sqlite:{path[3:] if path.startswith('///') else path}"
        path = path[len("file:") :] if path.startswith("file:") else path
        return f"jdbc:sqlite:{path[2:] if path.startswith('///') else path}"
    parts = urlsplit(f"{dialect}:{rest}")
    host = parts.hostname or ""
    authority = f"{host}:{parts.port}" if parts.port else host
    return f"jdbc:{dialect}://{authority}{parts.path}"


# --- URL parsing as java.net.URI does it (hosts it rejects make the reference fall back, so must ours) --


def _server_uri(uri: str) -> tuple[str, str, int, str]:
    """``(scheme, host, port, path)`` of a hierarchical URL with a server authority."""
    if _ILLEGAL_URI_CHARS.search(uri):
        raise _UnparsableUrlError(uri)
    match = re.fullmatch(r"([A-Za-z][A-Za-z0-9+.-]*)://([^/?#]*)([^?#]*)(?:\?[^#]*)?(?:#.*)?", uri)
    if match is None:
        raise _UnparsableUrlError(uri)  # opaque (h2:mem:x, sqlite:/x) or no authority: Java finds no host
    scheme, authority, path = match.groups()
    user_info, _, host_port = authority.rpartition("@")
    if user_info and not _USER_INFO.fullmatch(user_info):
        raise _UnparsableUrlError(uri)
    host, port = _host_and_port(host_port)
    return scheme, host, port, path


def _host_and_port(text: str) -> tuple[str, int]:
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise _UnparsableUrlError(text)
        host, rest = text[: end + 1], text[end + 1 :]
    else:
        host, colon, port_text = text.partition(":")
        rest = colon + port_text
    if rest and not re.fullmatch(r":\d*", rest):
        raise _UnparsableUrlError(text)
    if not host.startswith("[") and not _is_host_name(host):
        raise _UnparsableUrlError(text)
    return host, int(rest[1:]) if len(rest) > 1 else -1


def _is_host_name(host: str) -> bool:
    if not host:
        return False
    if _IPV4.fullmatch(host):
        return True
    labels = host[:-1].split(".") if host.endswith(".") else host.split(".")
    if len(labels) == 1:
        return _DOMAIN_LABEL.fullmatch(labels[0]) is not None
    return all(_DOMAIN_LABEL.fullmatch(label) for label in labels[:-1]) and bool(_TOP_LABEL.fullmatch(labels[-1]))


# --- naming rules, tried in the reference's order ------------------------------------------------------


def _generic(uri: str, properties: Mapping[str, str]) -> _Location:
    if "," in uri:
        match = _MULTI_HOST.fullmatch(uri)
        if match is None:
            raise _UnparsableUrlError(uri)
        return _Location(match.group(1), match.group(2), database=match.group(3))
    scheme, host, port, path = _server_uri(uri)
    authority = f"{host}:{port}" if port > 0 else host
    # A database in the path ends where driver properties begin (Db2's `:k=v;`, Databricks' `;k=v`).
    database = re.split(r"[;:]", unquote(path[1:]), maxsplit=1)[0] if path.startswith("/") else ""
    return _Location(scheme, authority, database=database or None)


def _with_scheme(scheme: str, default_port: int | None, one_part: bool = False) -> Callable[..., _Location]:
    """The generic rule, with a fixed scheme and the database's default port on every host lacking one."""

    def extract(uri: str, properties: Mapping[str, str]) -> _Location:
        location = _generic(uri, properties)
        authority = location.authority
        if default_port is not None and authority:
            authority = ",".join(
                host if _HOST_WITH_PORT.fullmatch(host) else f"{host}:{default_port}" for host in authority.split(",")
            )
        return _Location(scheme, authority, location.instance, location.database, one_part)

    return extract


def _mysql(uri: str, properties: Mapping[str, str]) -> _Location:
    uri = re.sub(r"^mysql(?::loadbalance|:replication|\+srv(?::loadbalance)?)?://", "mysql://", uri, flags=re.I)
    return _with_scheme("mysql", 3306, one_part=True)(uri, properties)


def _clickhouse(uri: str, properties: Mapping[str, str]) -> _Location:
    uri = re.sub(r"^ch:", "clickhouse:", uri)
    uri = re.sub(r"^clickhouse:(?:https?|grpc)://", "clickhouse://", uri)
    return _with_scheme("clickhouse", 8123, one_part=True)(uri, properties)


def _oceanbase(uri: str, properties: Mapping[str, str]) -> _Location:
    return _with_scheme("oceanbase", 2881)(re.sub(r"^oceanbase:hamode", "oceanbase", uri, flags=re.I), properties)


def _cassandra(uri: str, properties: Mapping[str, str]) -> _Location:
    return _with_scheme("cassandra", 9042)(uri.replace("--", ","), properties)


def _sqlserver(uri: str, properties: Mapping[str, str]) -> _Location:
    match = re.fullmatch(r"[\w:]+://([\w.-]*)(?:\\(\w+))?(?::(\d+))?(?:/(\w+))?(;.*)?", uri, re.ASCII)
    if match is None:
        raise _UnparsableUrlError(uri)
    host, instance, port, database, params = match.groups()
    found = {"servername": host, "portnumber": port, "instance": instance, "database": database}
    for item in (params or "").split(";"):
        pieces = item.split("=")
        if len(pieces) == 2:
            found[pieces[0].lower()] = pieces[1]
    for key, value in properties.items():
        found.setdefault(key, value)
        if found[key] is None:
            found[key] = value
    server = found.get("servername")
    if not server:
        raise _UnparsableUrlError(uri)
    if ":" in server and not server.startswith("["):
        server = f"[{server}]"
    port_number = found.get("portnumber")
    return _Location(
        "sqlserver",
        f"{server}:{port_number}" if port_number else server,
        instance=found.get("instance") or found.get("instancename"),
        database=found.get("databasename") or found.get("database"),
    )


def _oracle(uri: str, properties: Mapping[str, str]) -> _Location:
    rest = uri[uri.rfind("@") + 1 :] if "@" in uri else uri
    rest = rest[2:] if rest.startswith("//") else rest
    rest = rest.split("?", 1)[0]
    if "(" in rest:
        return _with_scheme("oracle", 1521)(_oracle_descriptor(rest), properties)
    if "ldap" in rest:
        ldap = re.search(r"ldaps?://([^/\s]+)/([^,\s]*)", rest)
        if ldap:
            rest = f"{ldap.group(1)}/{ldap.group(2)}"
    rest = re.sub(r"^\w+://", "", rest)
    head, colon, last = rest.rpartition(":")
    if colon and not last.isdigit() and "]" not in last and "/" not in last:
        rest = f"{head}/{last}"
    return _with_scheme("oracle", 1521)("oracle://" + rest, properties)


def _oracle_descriptor(text: str) -> str:
    """A TNS descriptor ``(DESCRIPTION=(ADDRESS=(HOST=h)(PORT=p))(CONNECT_DATA=(SERVICE_NAME=s)))`` as
    ``oracle://h:p/s``."""
    position = 0
    opening, key_part, closing = re.compile(r"\s*\("), re.compile(r"\s*\(\s*([^=()\s]+)\s*=\s*"), re.compile(r"\s*\)")

    def group() -> tuple[str, object]:
        nonlocal position
        match = key_part.match(text, position)
        if match is None:
            raise _UnparsableUrlError(text)
        position = match.end()
        value: object
        if opening.match(text, position):
            items = []
            while opening.match(text, position):
                items.append(group())
            value = items
        else:
            end = text.find(")", position)
            if end < 0:
                raise _UnparsableUrlError(text)
            value, position = text[position:end].strip(), end
        close = closing.match(text, position)
        if close is None:
            raise _UnparsableUrlError(text)
        position = close.end()
        return match.group(1).upper(), value

    root = group()
    if text[position:].strip():
        raise _UnparsableUrlError(text)
    addresses: list[str] = []
    service: str | None = None

    def visit(key: str, value: object) -> None:
        nonlocal service
        if isinstance(value, list):
            fields = {k: v for k, v in value if isinstance(v, str)}
            if key == "ADDRESS" and "HOST" in fields:
                addresses.append(f"{fields['HOST']}:{fields.get('PORT', '1521')}")
            if key == "CONNECT_DATA" and service is None:
                service = fields.get("SERVICE_NAME") or fields.get("SID") or fields.get("INSTANCE_NAME")
            for child_key, child_value in value:
                visit(child_key, child_value)

    visit(*root)
    if not addresses:
        raise _UnparsableUrlError(text)
    return f"oracle://{','.join(addresses)}" + (f"/{service}" if service else "")


def _teradata(uri: str, properties: Mapping[str, str]) -> _Location:
    match = re.fullmatch(r"\w+://([\w.\[\]:-]+)/?(.*)", uri, re.ASCII)
    if match is None:
        raise _UnparsableUrlError(uri)
    params = {}
    for item in match.group(2).split(","):
        key, _, value = item.partition("=")
        params[key.strip().upper()] = value
    return _Location("teradata", f"{match.group(1)}:{params.get('DBS_PORT') or 1025}", database=params.get("DATABASE"))


def _derby(uri: str, properties: Mapping[str, str]) -> _Location:
    """An embedded Derby database is a directory (under ``derby.system.home``, else the working directory)."""
    found = re.search(r"databaseName=([^;]*)", uri)
    database = found.group(1) if found else "metastore_db"
    home = os.environ.get("DERBY_SYSTEM_HOME") or os.getcwd()
    return _Location("file", path=os.path.normpath(f"{home}/{database}"))


def _prefix(prefix: str, *, case_sensitive: bool = False) -> Callable[[str], bool]:
    if case_sensitive:
        return lambda uri: uri.startswith(prefix)
    return lambda uri: uri.lower().startswith(prefix)


_RULES: list[tuple[Callable[[str], bool], Callable[[str, Mapping[str, str]], _Location]]] = [
    (_prefix("postgres"), _with_scheme("postgres", 5432)),
    (_prefix("oracle"), _oracle),
    (_prefix("mysql"), _mysql),
    (lambda uri: uri.lower().startswith(("sqlserver", "jtds:sqlserver")), _sqlserver),
    (_prefix("teradata"), _teradata),
    (_prefix("derby:", case_sensitive=True), _derby),
    (_prefix("crate"), _with_scheme("crate", 5432)),
    (_prefix("db2"), _with_scheme("db2", 6789)),
    (_prefix("trino"), _with_scheme("trino", 443)),
    (_prefix("oceanbase"), _oceanbase),
    (lambda uri: uri.startswith(("ch:", "clickhouse:")), _clickhouse),
    (_prefix("cassandra"), _cassandra),
    (lambda uri: True, _generic),
]
