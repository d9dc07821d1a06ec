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

import os
import re
import shlex
import sys
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from openlineage.client.transport.console import ConsoleTransport

from spark_lineage import _autoload, config, transports
from spark_lineage.delivery import create_client
from spark_lineage.facets import PRODUCER
from spark_lineage.findings import INFO, OK, PROBLEM, Finding, Level
from spark_lineage.redaction import Redactor, protect_logs

__all__ = ["INFO", "OK", "PROBE_JOB", "PROBLEM", "Finding", "Level", "diagnose", "main"]


def diagnose(
    confs: Mapping[str, str], environ: Mapping[str, str], check_backend: bool = True, send_test_event: bool = False
) -> list[Finding]:
    """Everything doctor reports, in reading order: first whether lineage will be on, and why not; then what
    that was decided from, the transport, and its backend's answer. ``confs`` are ``--conf`` values given on
    the command line. Nothing is written to the backend unless ``send_test_event``."""
    hook = _hook_findings(environ)
    spark_conf, sources = spark_confs(confs, environ)
    decision = config.auto_activation(spark_conf)
    details = [*hook, Finding(INFO, "Spark confs read from: " + (", ".join(sources) if sources else "nowhere"))]
    nothing_set = not (
        decision.on
        or config.java_agent_configured(spark_conf)
        or _mentions_enabled(spark_conf)
        or _disabled_by(spark_conf) is not None
    )
    if nothing_set:
        details.append(
            Finding(
                INFO,
                "to turn it on: --conf spark.openlineage.transport.type=http "
                "--conf spark.openlineage.transport.url=http://<backend>:5000 (or spark.openlineage.enabled=true)",
            )
        )
    transport, refused = _transport_findings(spark_conf, check_backend, send_test_event)
    no_hook = next((finding.message for finding in hook if finding.level is PROBLEM), None)
    if no_hook is not None:
        verdict = Finding(PROBLEM, f"spark-submit jobs here get no lineage: {no_hook}")
    elif not decision.on:
        verdict = Finding(INFO, f"spark-submit jobs here get no lineage: {decision.reason}")
    elif refused is not None:
        verdict = Finding(PROBLEM, f"spark-submit jobs here get no lineage: their configuration is refused: {refused}")
    else:
        verdict = Finding(OK, f"spark-submit jobs here get lineage: {decision.reason}")
    if refused is not None and (no_hook is not None or not decision.on):  # not said by the verdict
        transport.insert(0, Finding(PROBLEM, f"configuration error: {refused}"))
    return [verdict, *details, *transport]


def _disabled_by(spark_conf: Mapping[str, str]) -> str | None:
    try:
        return config.disabled_by(spark_conf)
    except config.ConfigError:
        return None


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


def _transport_findings(
    spark_conf: Mapping[str, str], check_backend: bool, send_test_event: bool
) -> tuple[list[Finding], str | None]:
    """What the transport is and what its backend answers; and why the configuration is refused, if it is."""
    redactor = Redactor(spark_conf.get("spark.redaction.regex"))
    redactor.learn_from_properties(spark_conf)  # url parameters by name: a short value is redacted too
    protect_logs(redactor)
    try:
        resolved = config.resolve(spark_conf)
        client = create_client(resolved, redactor)
    except (config.ConfigError, ValueError, KeyError, TypeError, ImportError) as error:
        return [], redactor.text(str(error))
    findings = [Finding(PROBLEM, warning) for warning in config.unknown_key_warnings(resolved)]
    findings += [Finding(INFO, warning) for warning in config.not_applicable_warnings(resolved)]
    transport = client.transport
    transports.leave_retries_to_the_spool(transport)  # as the spool sends: one request, its answer as it is
    kind = getattr(transport, "kind", None) or type(transport).__name__
    source = "spark.openlineage.transport.*" if resolved.transport else "the openlineage-python client's configuration"
    target = transports.target(transport)
    findings.append(Finding(INFO, f"transport: {kind}{f' to {target}' if target else ''} (from {source})"))
    if isinstance(transport, ConsoleTransport) and not resolved.transport:
        findings.append(
            Finding(INFO, "no transport configured anywhere: events would be printed to the console (stdout)")
        )
    findings += [Finding(PROBLEM, warning) for warning in transports.warnings(transport)]
    if check_backend:
        keys = transports.ConfKeys(CONF_TRANSPORT if resolved.transport else None)
        probe = _probe_event(resolved.namespace, resolved.producer or PRODUCER) if send_test_event else None
        findings += transports.check(transport, keys, probe)
    # What is printed never shows a configured secret (an api key, a header, a password in the url).
    return [Finding(finding.level, redactor.text(finding.message)) for finding in findings], None


CONF_TRANSPORT = config.CONF_PREFIX + "transport"


PROBE_JOB = "spark_lineage_doctor_test_event"
"""The job of the one event ``doctor --send-test-event`` sends to an HTTP backend: a completed run, with
nothing else in it, named as the test it is."""


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


def main(confs: Mapping[str, str], check_backend: bool, send_test_event: bool = False) -> int:
    """Prints the diagnosis; the exit status is 1 when something needs fixing."""
    findings = diagnose(confs, os.environ, check_backend, send_test_event)
    for finding in findings:
        print(finding)
    return 1 if any(f.level is PROBLEM for f in findings) else 0
