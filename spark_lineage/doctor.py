"""``spark-lineage doctor``: will lineage turn on by itself here, and does the backend answer?

It looks at what a ``spark-submit`` from this environment would see: the start-up hook this package installs,
the environment variables that switch it, ``spark-defaults.conf``, ``PYSPARK_SUBMIT_ARGS`` and any
``--conf key=value`` given to it (pass the same ones as to ``spark-submit``). Then it applies the same rule the
hook applies (:func:`spark_lineage.config.auto_activation`), resolves the transport the way ``enable()`` does,
and checks that the transport's target answers: an HTTP backend gets one probe event (a completed run of job
:data:`PROBE_JOB`), sent by the transport itself with its auth, headers and url parameters, and its answer is
classified (accepted, credentials refused, wrong url or endpoint, backend error, unreachable); Kafka brokers
are asked for their topics; a file's directory must be writable. ``--no-backend-check`` contacts nothing.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import sys
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from importlib import metadata
from pathlib import Path
from typing import Any

from spark_lineage import _autoload, config
from spark_lineage.config import keys as config_keys
from spark_lineage.config import transports
from spark_lineage.delivery import create_client
from spark_lineage.delivery.client_internals import children
from spark_lineage.delivery.transports import NO_RETRIES, leave_retries_to_the_spool
from spark_lineage.extras import install_hint
from spark_lineage.facets import PRODUCER
from spark_lineage.redaction import Redactor, protect_logs, public_url


class Level(Enum):
    """How a finding of the diagnosis reads, and the mark it is printed with."""

    OK = "[ok]  "
    INFO = "[--]  "
    PROBLEM = "[!!]  "
    """Something that keeps lineage from working: ``doctor`` exits 1."""


OK, INFO, PROBLEM = Level.OK, Level.INFO, Level.PROBLEM
CHECK_TIMEOUT_SECONDS = 5.0
_PRINTED = Redactor()
"""What doctor prints shows where the backend is, never the credentials in its url (nor, through
:func:`~spark_lineage.redaction.public_url`, the values of its url parameters)."""


@dataclass(frozen=True)
class Finding:
    """One line of the diagnosis."""

    level: Level
    message: str

    def __str__(self) -> str:
        return self.level.value + _PRINTED.text(self.message)


def diagnose(confs: Mapping[str, str], environ: Mapping[str, str], check_backend: bool = True) -> list[Finding]:
    """Everything doctor reports, in reading order. ``confs`` are ``--conf`` values given on the command line."""
    findings = [*_hook_findings(environ)]
    spark_conf, sources = spark_confs(confs, environ)
    findings.append(Finding(INFO, "Spark confs read from: " + (", ".join(sources) if sources else "nowhere")))
    decision = config.auto_activation(spark_conf)
    findings.append(
        Finding(
            OK if decision.on else INFO,
            ("spark-submit jobs here get lineage: " if decision.on else "spark-submit jobs here get no lineage: ")
            + decision.reason,
        )
    )
    if not decision.on and not config.java_agent_configured(spark_conf) and not _mentions_enabled(spark_conf):
        findings.append(
            Finding(
                INFO,
                "to turn it on: --conf spark.openlineage.transport.type=http "
                "--conf spark.openlineage.transport.url=http://<backend>:5000 (or spark.openlineage.enabled=true)",
            )
        )
    findings += _transport_findings(spark_conf, check_backend)
    return findings


def _mentions_enabled(spark_conf: Mapping[str, str]) -> bool:
    return config.CONF_PREFIX + "enabled" in spark_conf or config.CONF_PREFIX + "disabled" in spark_conf


def spark_confs(confs: Mapping[str, str], environ: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """Spark confs in spark-submit's precedence: spark-defaults.conf, then ``PYSPARK_SUBMIT_ARGS``, then
    command-line ``--conf``. Returns them and where they came from."""
    merged: dict[str, str] = {}
    sources = []
    defaults = _defaults_file(environ)
    if defaults is not None:
        merged.update(_read_defaults(defaults))
        sources.append(str(defaults))
    submit_args = environ.get("PYSPARK_SUBMIT_ARGS", "")
    from_env = parse_conf_args(shlex.split(submit_args))
    if from_env:
        merged.update(from_env)
        sources.append("PYSPARK_SUBMIT_ARGS")
    if confs:
        merged.update(confs)
        sources.append("--conf")
    return merged, sources


def parse_conf_args(args: Iterable[str]) -> dict[str, str]:
    """``--conf k=v`` / ``--conf=k=v`` pairs from spark-submit style arguments."""
    confs: dict[str, str] = {}
    items = list(args)
    for index, arg in enumerate(items):
        value = None
        if arg == "--conf" and index + 1 < len(items):
            value = items[index + 1]
        elif arg.startswith("--conf="):
            value = arg.removeprefix("--conf=")
        if value is not None and "=" in value:
            key, _, conf_value = value.partition("=")
            confs[key.strip()] = conf_value.strip()
    return confs


def _hook_findings(environ: Mapping[str, str]) -> list[Finding]:
    findings = []
    pth = _installed_pth()
    if pth is None:
        findings.append(
            Finding(
                PROBLEM,
                f"start-up hook not installed: no spark_lineage.pth in this environment ({sys.prefix}); "
                "reinstall the package with pip into the Python that runs the Spark driver",
            )
        )
    else:
        findings.append(Finding(OK, f"start-up hook installed: {pth}"))
    if environ.get(_autoload.WORKER_ENV):
        findings.append(Finding(INFO, f"{_autoload.WORKER_ENV} is set: this is a Spark Python worker, left alone"))
    opt_out = environ.get(_autoload.OPT_OUT_ENV, "")
    if opt_out.strip().lower() in ("0", "false", "no", "off"):
        findings.append(
            Finding(PROBLEM, f"{_autoload.OPT_OUT_ENV}={opt_out} switches the start-up hook off in this environment")
        )
    return findings


def _installed_pth() -> Path | None:
    try:
        files = metadata.distribution("spark-lineage").files or []
    except metadata.PackageNotFoundError:
        return None
    for file in files:
        if file.name == "spark_lineage.pth":
            path = Path(str(file.locate()))
            return path if path.is_file() else None
    return None


def _defaults_file(environ: Mapping[str, str]) -> Path | None:
    candidates = []
    if environ.get("SPARK_CONF_DIR"):
        candidates.append(Path(environ["SPARK_CONF_DIR"]))
    spark_home = environ.get("SPARK_HOME") or _pyspark_home()
    if spark_home:
        candidates.append(Path(spark_home) / "conf")
    for directory in candidates:
        path = directory / "spark-defaults.conf"
        if path.is_file():
            return path
    return None


def _pyspark_home() -> str | None:
    try:
        distribution = metadata.distribution("pyspark")
    except metadata.PackageNotFoundError:
        return None
    return str(Path(str(distribution.locate_file("pyspark"))))


def _read_defaults(path: Path) -> dict[str, str]:
    """The ``spark.*`` confs of a ``spark-defaults.conf``, read as spark-submit reads them."""
    confs = read_properties(path.read_text(encoding="utf-8", errors="replace"))
    return {key: value for key, value in confs.items() if key.startswith("spark.")}  # spark-submit drops the rest


_PROPERTY_WHITESPACE = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def read_properties(text: str) -> dict[str, str]:
    """A properties file as Spark reads ``spark-defaults.conf`` (``Utils.getPropertiesFromFile``): Java's
    ``Properties.load`` (``key value``, ``key=value``, ``key = value``, ``key:value``; ``#`` and ``!``
    comments; a trailing backslash continues the line; backslash escapes), then each value trimmed of
    whitespace other than line breaks, as Spark's ``trimExceptCRLF`` does."""
    properties: dict[str, str] = {}
    lines = re.split(r"\r\n|\r|\n", text)
    index = 0
    while index < len(lines):
        line = lines[index].lstrip(_PROPERTY_WHITESPACE)
        index += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line):
            line = line[:-1]
            if index < len(lines):
                line += lines[index].lstrip(_PROPERTY_WHITESPACE)
                index += 1
        key, value = _split_property(line)
        properties[_unescape(key)] = _trim_except_crlf(_unescape(value))
    return properties


def _continues(line: str) -> bool:
    """Whether a line ends with an odd number of backslashes: an unescaped one, which continues it."""
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split_property(line: str) -> tuple[str, str]:
    """The key (up to the first unescaped ``=``, ``:`` or whitespace) and the value (after whitespace and at
    most one ``=`` or ``:``), both still escaped."""
    position, escaped = 0, False
    while position < len(line):
        char = line[position]
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in "=:" or char in _PROPERTY_WHITESPACE:
            break
        position += 1
    key, rest = line[:position], line[position:]
    rest = rest.lstrip(_PROPERTY_WHITESPACE)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_PROPERTY_WHITESPACE)
    return key, rest


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out, position = [], 0
    while position < len(text):
        char = text[position]
        position += 1
        if char != "\\" or position == len(text):
            out.append(char)
            continue
        char = text[position]
        position += 1
        if char == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[position : position + 4]):
            out.append(chr(int(text[position : position + 4], 16)))
            position += 4
        else:
            out.append(_ESCAPES.get(char, char))
    return "".join(out)


def _trim_except_crlf(value: str) -> str:
    def kept(char: str) -> bool:
        return char > " " or char in "\r\n"

    start, end = 0, len(value)
    while start < end and not kept(value[start]):
        start += 1
    while end > start and not kept(value[end - 1]):
        end -= 1
    return value[start:end]


def _transport_findings(spark_conf: Mapping[str, str], check_backend: bool) -> list[Finding]:
    redactor = Redactor(spark_conf.get("spark.redaction.regex"))
    redactor.learn_from_properties(spark_conf)  # url parameters by name: a short value is redacted too
    protect_logs(redactor)
    try:
        resolved = config.resolve(spark_conf)
        client = create_client(resolved, redactor)
    except (config.ConfigError, ValueError, KeyError, TypeError, ImportError) as error:
        return [Finding(PROBLEM, redactor.text(f"configuration error: {error}"))]
    unknown = [Finding(PROBLEM, warning) for warning in config.unknown_key_warnings(resolved)]
    unknown += _unknown_transport_keys(spark_conf)
    unknown += [Finding(INFO, warning) for warning in config.not_applicable_warnings(resolved)]
    transport = client.transport
    leave_retries_to_the_spool(transport)  # as the spool sends: one request, its answer as it is
    kind = getattr(transport, "kind", None) or type(transport).__name__
    source = "spark.openlineage.transport.*" if resolved.transport else "the openlineage-python client's configuration"
    target = _target(transport)
    findings = [*unknown, Finding(INFO, f"transport: {kind}{f' to {target}' if target else ''} (from {source})")]
    if kind == "console" and not resolved.transport:
        findings.append(
            Finding(INFO, "no transport configured anywhere: events would be printed to the console (stdout)")
        )
    if check_backend:
        keys = _Keys(CONF_TRANSPORT if resolved.transport else None)
        findings += _check_target(transport, keys, _probe_event(resolved.namespace, resolved.producer or PRODUCER))
    # What is printed never shows a configured secret (an api key, a header, a password in the url).
    return [Finding(finding.level, redactor.text(finding.message)) for finding in findings]


CONF_TRANSPORT = config.CONF_PREFIX + "transport"


def _unknown_transport_keys(spark_conf: Mapping[str, str]) -> list[Finding]:
    """``spark.openlineage.transport.*`` keys the configured transport type does not read: openlineage-python
    ignores them without a word, so a misspelt ``endpoint`` or ``timeoutInMillis`` would go unnoticed."""
    prefix = CONF_TRANSPORT + "."
    flat = {
        key[len(prefix) :]: value
        for key, value in spark_conf.items()
        if key.startswith(prefix) and not config_keys.not_applicable(key[len(config.CONF_PREFIX) :])
    }
    kind = flat.get("type") or ("http" if "url" in flat else "?")
    return [
        Finding(
            PROBLEM,
            f"{prefix}{key} is not a key the {kind} transport reads: it is ignored"
            + (f"; did you mean {prefix}{close}?" if close else ""),
        )
        for key, close in transports.unknown_keys(flat)
    ]


@dataclass(frozen=True)
class _Keys:
    """What the user set a transport with, to name what to fix: ``spark.openlineage.transport`` (or a part of
    a composite transport), or ``None`` for the openlineage-python client's own configuration."""

    prefix: str | None

    def of(self, *settings: str) -> str:
        if self.prefix is None:
            client_keys = {"url": "OPENLINEAGE_URL", "endpoint": "OPENLINEAGE_ENDPOINT", "auth": "OPENLINEAGE_API_KEY"}
            names = [client_keys.get(setting.split(".")[0], f"transport.{setting}") for setting in settings]
            return " / ".join(dict.fromkeys(names)) + " (or transport.* in openlineage.yml)"
        return " and ".join(f"{self.prefix}.{setting}" for setting in settings)

    def child(self, name: str) -> _Keys:
        """A part of a composite transport."""
        return _Keys(None if self.prefix is None else f"{self.prefix}.transports.{name}")

    def inner(self) -> _Keys:
        """The transport a transform transport wraps."""
        return _Keys(None if self.prefix is None else f"{self.prefix}.transport")


def _target(transport: Any) -> str | None:
    settings = getattr(transport, "config", None)
    for attribute in ("url", "log_file_path", "location", "bootstrap_servers"):
        value = getattr(settings, attribute, None)
        if value:
            return public_url(str(value)) if attribute == "url" else str(value)
    servers = _kafka_settings(transport).get("bootstrap.servers")
    return str(servers) if servers else None


def _kafka_settings(transport: Any) -> dict[str, Any]:
    """The producer settings of a kafka transport (confluent-kafka's keys), else ``{}``."""
    for holder in (getattr(transport, "kafka_config", None), getattr(transport, "config", None)):
        for attribute in ("config", "properties"):
            settings = getattr(holder, attribute, None)
            if isinstance(settings, Mapping) and settings:
                return dict(settings)
    return {}


def _check_target(transport: Any, keys: _Keys, probe: Any) -> list[Finding]:
    kind = getattr(transport, "kind", None) or type(transport).__name__
    target = _target(transport)
    if kind in ("http", "async_http") and target:
        return [_check_http(transport, keys, probe)]
    if kind == "file" and target:
        directory = Path(target).expanduser().resolve().parent
        if directory.is_dir() and os.access(directory, os.W_OK):
            return [Finding(OK, f"backend: {directory} is a writable directory")]
        return [Finding(PROBLEM, f"backend: {directory} is not a writable directory")]
    if kind == "kafka":
        return [_check_kafka(transport, keys)]
    inside = children(transport)
    if kind == "composite":
        return [
            finding
            for index, child in enumerate(inside)
            for finding in _check_target(child, keys.child(str(getattr(child, "name", index))), probe)
        ]
    if kind == "transform" and inside:
        return _check_target(inside[0], keys.inner(), probe)
    return [Finding(INFO, f"backend: nothing to check for a {kind} transport")]


PROBE_JOB = "spark_lineage_doctor"
"""The job of the one event ``doctor`` sends to an HTTP backend: a completed run, with nothing else in it."""
_AUTH_SETTINGS = {
    "ApiKeyTokenProvider": ("auth.type", "auth.apiKey"),
    "JwtTokenProvider": ("auth.apiKey", "auth.tokenEndpoint"),
    "OAuth2ClientCredentialsTokenProvider": ("auth.clientId", "auth.clientSecret", "auth.tokenEndpoint"),
}


def _check_http(transport: Any, keys: _Keys, probe: Any) -> Finding:
    """Sends one probe event through the transport itself: its url and endpoint (with any url parameters),
    auth, headers, compression and TLS settings, as every event is sent."""
    import requests

    if transport.kind != "http":  # async_http: the same request, sent and answered synchronously
        transport = _synchronous(transport)
    url = public_url(urllib.parse.urljoin(transport.url, transport.endpoint))  # no url parameter's value
    try:
        with _quiet("openlineage", "urllib3"):
            response = transport.emit(probe)
    except requests.HTTPError as error:
        response = error.response
        if response is None:
            return Finding(PROBLEM, f"backend: {url} does not answer ({_short_reason(error)})")
    except requests.Timeout:
        return Finding(PROBLEM, f"backend: {url} does not answer within {transport.timeout:g} s")
    except requests.RequestException as error:
        return Finding(PROBLEM, f"backend: {url} does not answer ({_short_reason(error)})")
    except (RuntimeError, KeyError, ValueError) as error:  # a token provider that could not get a token
        auth = _AUTH_SETTINGS.get(type(transport.config.auth).__name__, ("auth.type",))
        return Finding(
            PROBLEM,
            f"backend: no event sent to {url}: getting a token failed ({_short_reason(error)}); check {keys.of(*auth)}",
        )
    return _classify(url, response.status_code, response.reason, transport, keys, probe.job.namespace)


def _classify(url: str, status: int, reason: str | None, transport: Any, keys: _Keys, namespace: str) -> Finding:
    answer = f"HTTP {status}{f' {reason}' if reason else ''}"
    if 200 <= status < 300:
        return Finding(
            OK, f"backend: {url} accepted a probe event ({answer}): job {PROBE_JOB} in namespace {namespace}"
        )
    if status in (401, 403):
        auth = _AUTH_SETTINGS.get(type(transport.config.auth).__name__)
        headers = f" (and the headers in {keys.of('headers.*')})" if transport.config.custom_headers else ""
        if auth is None:
            what = f"no credentials are configured: set {keys.of('auth.type', 'auth.apiKey')}{headers}"
        else:
            what = f"check {keys.of(*auth)}{headers}"
        return Finding(PROBLEM, f"backend: {url} refused the credentials ({answer}): {what}")
    if 400 <= status < 500:
        return Finding(
            PROBLEM,
            f"backend: {url} rejected a probe event ({answer}): the url or endpoint is wrong, or no OpenLineage "
            f"backend listens there; check {keys.of('url', 'endpoint')}",
        )
    if status >= 500:
        return Finding(
            PROBLEM, f"backend: {url} failed on a probe event ({answer}): the backend is in error, see its logs"
        )
    return Finding(PROBLEM, f"backend: {url} answered {answer} to a probe event; check {keys.of('url', 'endpoint')}")


def _probe_event(namespace: str, producer: str) -> Any:
    """The one event ``doctor`` sends, named as the job's events are (namespace, ``python.producer``)."""
    from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
    from openlineage.client.uuid import generate_new_uuid

    return RunEvent(
        eventType=RunState.COMPLETE,
        eventTime=datetime.now(timezone.utc).isoformat(),
        run=Run(runId=str(generate_new_uuid())),
        job=Job(namespace=namespace, name=PROBE_JOB),
        producer=producer,
    )


def _synchronous(transport: Any) -> Any:
    """An async_http transport's settings as the (synchronous) http transport, which answers with a status."""
    from openlineage.client.transport.http import HttpConfig, HttpTransport

    settings = transport.config
    return HttpTransport(
        HttpConfig(
            url=settings.url,
            endpoint=settings.endpoint,
            timeout=settings.timeout,
            verify=settings.verify,
            auth=settings.auth,
            compression=settings.compression,
            custom_headers=dict(settings.custom_headers),
            retry=dict(NO_RETRIES),
        )
    )


@contextmanager
def _quiet(*loggers: str) -> Iterator[None]:
    """The answer is reported once, by doctor: the libraries' own log lines about it are held back."""
    previous = [(logging.getLogger(name), logging.getLogger(name).level) for name in loggers]
    for logger, _ in previous:
        logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for logger, level in previous:
            logger.setLevel(level)


def _short_reason(error: BaseException) -> str:
    """The cause, without the chain of wrappers requests and urllib3 put around it."""
    text = str(error)
    for pattern in (r"\[Errno -?\d+\][^'\")]*", r"\[SSL[^\]]*\][^'\")]*", r"Read timed out[^'\")]*"):
        match = re.search(pattern, text)
        if match:
            return match.group(0).strip().rstrip(".")
    return text


def _check_kafka(transport: Any, keys: _Keys) -> Finding:
    """Asks the brokers for their topics (confluent-kafka's AdminClient, with the transport's own settings:
    servers, security, SASL), within :data:`CHECK_TIMEOUT_SECONDS`."""
    settings = _kafka_settings(transport)
    servers = settings.get("bootstrap.servers") or settings.get("metadata.broker.list") or "?"
    topic = getattr(transport, "topic", None)
    try:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient
    except ImportError:
        return Finding(
            PROBLEM,
            f"backend: kafka {servers} cannot be checked: confluent-kafka is not installed here, and the kafka "
            f"transport needs it ({install_hint('kafka')})",
        )
    errors: list[str] = []
    silent = logging.getLogger("spark_lineage.doctor.librdkafka")
    silent.propagate, silent.disabled = False, True
    admin_settings = {key: value for key, value in settings.items() if not callable(value)}
    admin_settings.update({"logger": silent, "error_cb": lambda error: errors.append(error.str())})
    try:
        admin = AdminClient(admin_settings)
    except (KafkaException, ValueError, TypeError) as error:
        return Finding(PROBLEM, f"backend: kafka {servers}: confluent-kafka does not take the settings ({error})")
    try:
        cluster = admin.list_topics(timeout=CHECK_TIMEOUT_SECONDS)
    except KafkaException as error:
        cause: Any = error.args[0] if error.args else None
        reason = errors[0] if errors else cause.str() if hasattr(cause, "str") else _short_reason(error)
        return Finding(
            PROBLEM,
            f"backend: kafka {servers} does not answer within {CHECK_TIMEOUT_SECONDS:g} s ({reason}); "
            f"check {keys.of('properties.bootstrap.servers')}",
        )
    brokers = len(cluster.brokers)
    if not topic:
        found = ""
    elif topic in cluster.topics:
        found = f"; topic {topic} exists"
    else:
        found = (
            f"; topic {topic} does not exist yet (the first event creates it only if the brokers auto-create topics)"
        )
    return Finding(OK, f"backend: kafka {servers} answers ({brokers} broker{'s' if brokers != 1 else ''}){found}")


def main(confs: Mapping[str, str], check_backend: bool) -> int:
    """Prints the diagnosis; the exit status is 1 when something needs fixing."""
    findings = diagnose(confs, os.environ, check_backend)
    for finding in findings:
        print(finding)
    return 1 if any(f.level is PROBLEM for f in findings) else 0
