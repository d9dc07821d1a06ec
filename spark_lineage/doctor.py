"""``spark-lineage doctor``: will lineage turn on by itself here, and does the backend answer?

It looks at what a ``spark-submit`` from this environment would see: the start-up hook this package installs,
the environment variables that switch it, ``spark-defaults.conf``, ``PYSPARK_SUBMIT_ARGS`` and any
``--conf key=value`` given to it (pass the same ones as to ``spark-submit``). Then it applies the same rule the
hook applies (:func:`spark_lineage.config.auto_activation`), resolves the transport the way ``enable()`` does,
and checks that the transport's target answers. Nothing is sent.
"""

from __future__ import annotations

import os
import shlex
import socket
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from spark_lineage import _autoload, config
from spark_lineage.delivery import create_client
from spark_lineage.redaction import Redactor, protect_logs

OK, INFO, PROBLEM = "ok", "info", "problem"
_MARKS = {OK: "[ok]  ", INFO: "[--]  ", PROBLEM: "[!!]  "}
CHECK_TIMEOUT_SECONDS = 5.0
_PRINTED = Redactor()
"""What doctor prints shows where the backend is, never the credentials in its url."""


@dataclass(frozen=True)
class Finding:
    """One line of the diagnosis."""

    level: str
    message: str

    def __str__(self) -> str:
        return _MARKS[self.level] + _PRINTED.text(self.message)


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
    confs = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, _, value = line.replace("\t", " ").partition(" ")
        if "=" in key and not value:
            key, _, value = key.partition("=")
        confs[key.strip()] = value.strip()
    return confs


def _transport_findings(spark_conf: Mapping[str, str], check_backend: bool) -> list[Finding]:
    try:
        resolved = config.resolve(spark_conf)
        redactor = Redactor(resolved.redaction_pattern)
        protect_logs(redactor)
        client = create_client(resolved, redactor)
    except config.ConfigError as error:
        return [Finding(PROBLEM, f"configuration error: {error}")]
    unknown = [Finding(PROBLEM, warning) for warning in config.unknown_key_warnings(resolved)]
    unknown += [Finding(INFO, warning) for warning in config.not_applicable_warnings(resolved)]
    transport = client.transport
    kind = getattr(transport, "kind", None) or type(transport).__name__
    source = "spark.openlineage.transport.*" if resolved.transport else "the openlineage-python client's configuration"
    target = _target(transport)
    findings = [*unknown, Finding(INFO, f"transport: {kind}{f' to {target}' if target else ''} (from {source})")]
    if kind == "console" and not resolved.transport:
        findings.append(
            Finding(INFO, "no transport configured anywhere: events would be printed to the console (stdout)")
        )
    if check_backend:
        findings.append(_check_target(kind, transport, target))
    return findings


def _target(transport: Any) -> str | None:
    settings = getattr(transport, "config", None)
    for attribute in ("url", "log_file_path", "location", "bootstrap_servers"):
        value = getattr(settings, attribute, None)
        if value:
            return str(value)
    for attribute in ("config", "properties"):  # kafka: the producer's own settings
        properties = getattr(settings, attribute, None)
        if isinstance(properties, Mapping) and properties.get("bootstrap.servers"):
            return str(properties["bootstrap.servers"])
    return None


def _check_target(kind: str, transport: Any, target: str | None) -> Finding:
    if kind in ("http", "async_http") and target:
        return _check_http(urllib.parse.urljoin(target, str(getattr(transport.config, "endpoint", ""))))
    if kind == "file" and target:
        directory = Path(target).expanduser().resolve().parent
        if directory.is_dir() and os.access(directory, os.W_OK):
            return Finding(OK, f"backend: {directory} is a writable directory")
        return Finding(PROBLEM, f"backend: {directory} is not a writable directory")
    if kind == "kafka" and target:
        return _check_tcp(target.split(",")[0].strip())
    return Finding(INFO, f"backend: nothing to check for a {kind} transport")


def _check_http(url: str) -> Finding:
    request = urllib.request.Request(url, method="GET", headers={"User-Agent": "spark-lineage-doctor"})
    try:
        with urllib.request.urlopen(request, timeout=CHECK_TIMEOUT_SECONDS) as response:
            status = response.status
    except urllib.error.HTTPError as error:  # an answer all the same: the server is there
        status = error.code
    except (urllib.error.URLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", error)
        return Finding(PROBLEM, f"backend: {url} does not answer ({reason})")
    return Finding(OK, f"backend: {url} answers (HTTP {status} to a GET; events are POSTed there)")


def _check_tcp(address: str) -> Finding:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host or "localhost", int(port or 9092)), timeout=CHECK_TIMEOUT_SECONDS):
            pass
    except (OSError, ValueError) as error:
        return Finding(PROBLEM, f"backend: {address} does not accept connections ({error})")
    return Finding(OK, f"backend: {address} accepts connections")


def main(confs: Mapping[str, str], check_backend: bool) -> int:
    """Prints the diagnosis; the exit status is 1 when something needs fixing."""
    findings = diagnose(confs, os.environ, check_backend)
    for finding in findings:
        print(finding)
    return 1 if any(f.level == PROBLEM for f in findings) else 0
