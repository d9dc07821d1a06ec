"""Which SparkSessions get lineage, and turning it on.

Three ways in, one path: :func:`spark_lineage.enable` (the user asks), :func:`session_created` (a session was
just created, seen by the start-up hook in :mod:`spark_lineage._autoload`; the configuration decides, as
:func:`spark_lineage.config.auto_activation` says), and the notebook switch ``%lineage on|off``
(:func:`follow_new_sessions`), which overrides the configuration for sessions created afterwards.

A Spark Connect client session has no JVM of its own: lineage goes on for the classic session of its server
when PySpark runs that server in this process (``remote("local[N]")``, :mod:`spark_lineage.connect.local`),
and for a server elsewhere ``enable()`` returns a disabled handle and says where to turn lineage on instead.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

from spark_lineage import config as config_module
from spark_lineage import logs
from spark_lineage.config import ConfigError
from spark_lineage.connect import local as connect_local
from spark_lineage.errors import StoppedSessionError
from spark_lineage.jvm import JvmBridge
from spark_lineage.redaction import Redactor, protect_logs, rules_for
from spark_lineage.worker import one_line

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from spark_lineage.session import SparkLineageHandle

log = logging.getLogger("spark_lineage")

_decided: dict[str, None] = {}
"""JVM sessions whose configuration was already looked at, oldest first."""
_DECIDED_KEPT = 1000
_starting = threading.RLock()
_warned: set[str] = set()
_follow: bool | None = None
"""``True``: every new session gets lineage; ``False``: none does; ``None``: the configuration decides."""


def enable_session(spark: SparkSession, overrides: dict[str, Any]) -> SparkLineageHandle:
    """What :func:`spark_lineage.enable` does; see there."""
    target = _session_to_enable(spark)
    if target.session is None:
        logs.show_on_stderr(None)
        return _start_remote(spark, overrides)
    bridge = JvmBridge(target.session)
    if bridge.is_stopped():
        raise StoppedSessionError(
            "spark_lineage.enable() was given a SparkSession whose SparkContext is stopped; enable lineage on a "
            "running session (SparkSession.builder.getOrCreate() makes a new one)"
        )
    _protect_logs_before_reading_confs(bridge)
    logs.show_on_stderr(None)  # only with $SPARK_LINEAGE_LOG_LEVEL: a program calling enable() owns its logging
    return _start(bridge, overrides, target.conf(bridge))


def session_created(spark: SparkSession) -> None:
    """A classic SparkSession was just constructed (or the notebook switch hands over the active session, which
    is a Spark Connect client's in Connect mode): turn lineage on if the notebook switch or the configuration
    says so. Never raises: a configuration that cannot work is logged, naming the key to fix.

    PySpark builds new Python wrappers around the same JVM session all the time (``getActiveSession()`` does),
    so each JVM session is decided once; a wrapper costs one JVM call after that. Deciding costs a few JVM calls
    and no import beyond this module's, so a session without lineage configured pays nothing more."""
    if _follow is False:
        return
    try:
        target = _session_to_enable(spark)
    except StoppedSessionError:
        return
    if target.session is None:
        _remote_session_created(spark)
        return
    bridge = JvmBridge(target.session)
    conf = None
    if _follow is None:
        key = bridge.session_key
        if key in _decided:
            return
        _decided[key] = None
        while len(_decided) > _DECIDED_KEPT:
            _decided.pop(next(iter(_decided)))
        _protect_logs_before_reading_confs(bridge)
        conf = target.conf(bridge) or bridge.session_conf()
        decision = config_module.auto_activation(conf)
        if not decision.on:
            java_agent = config_module.java_agent_configured(conf)
            log.log(logging.WARNING if java_agent else logging.DEBUG, "spark_lineage: off: %s", decision.reason)
            return
        # A job turned on by configuration alone configures no logging: the line saying where lineage goes
        # (logged once it is on) must still be seen.
        logs.show_on_stderr("INFO")
        log.debug("spark_lineage: on: %s", decision.reason)
    elif target.client is not None:
        _protect_logs_before_reading_confs(bridge)
        conf = target.conf(bridge)
    try:
        _start(bridge, {}, conf, hold=True)
    except ConfigError as error:
        log.error("spark_lineage: lineage stays off for this session: %s", error)


@dataclass(frozen=True)
class _Target:
    """The classic session lineage goes on for, and the Connect client session it serves, if that is what was
    given."""

    session: SparkSession | None
    """``None``: the client's server runs elsewhere; the client reports its own actions
    (:mod:`spark_lineage.connect.client`)."""
    client: Any = None

    def conf(self, bridge: JvmBridge) -> dict[str, str] | None:
        """For a Connect client session: the server session's confs, and over them the ``spark.openlineage.*``
        confs the client's session sets itself (``spark.conf.set``), as a classic session's own settings go over
        its SparkConf. ``None`` for a classic session: the caller reads its confs when it needs them."""
        if self.client is None:
            return None
        conf = bridge.session_conf()
        return {**conf, **connect_local.client_conf(self.client, conf)}


def _session_to_enable(spark: Any) -> _Target:
    """A classic session is its own target. A Spark Connect client session's is the classic session of its
    server when PySpark runs that server in this process (``remote("local[N]")``); for a server elsewhere there
    is none: the client itself is the target."""
    if not connect_local.is_connect_session(spark):
        if getattr(spark, "_jsparkSession", None) is None:
            raise TypeError(f"spark_lineage.enable() needs a pyspark SparkSession, got {type(spark).__name__}")
        return _Target(spark)
    if connect_local.is_stopped(spark) and connect_local.server_session(spark) is not None:
        raise StoppedSessionError(
            "spark_lineage.enable() was given a Spark Connect session that is stopped; enable lineage on a "
            "running session (SparkSession.builder.getOrCreate() makes a new one)"
        )
    return _Target(connect_local.server_session(spark), spark)


def _remote_session_created(spark: Any) -> None:
    """The notebook switch hands over a Connect session of a server elsewhere: its client reports it when the
    switch says so, or when the session's confs turn lineage on."""
    if _follow is None:
        from spark_lineage.connect.client.runtime import session_conf

        try:
            conf = session_conf(spark)
        except Exception as error:  # noqa: BLE001 - a server that cannot answer: no lineage, said at DEBUG
            log.debug("spark_lineage: could not read the Spark Connect session's confs: %s", error)
            return
        if not config_module.auto_activation(conf).on:
            return
    _start_remote(spark, {})


def _start_remote(spark: Any, overrides: dict[str, Any]) -> SparkLineageHandle:
    """Lineage for a Connect client session whose server runs elsewhere, told by the client
    (:mod:`spark_lineage.connect.client.runtime`). Never raises: where lineage cannot be had, one line says
    why, and the handle is disabled."""
    from spark_lineage import session as session_module
    from spark_lineage.connect.client import runtime as client_runtime
    from spark_lineage.connect.client.servers import server_lineage
    from spark_lineage.process import PROCESS

    off = "spark_lineage: lineage stays off for this Spark Connect session"
    if connect_local.is_stopped(spark):
        log.warning("%s: it is stopped (SparkSession.builder.getOrCreate() makes a running one)", off)
        return session_module.SparkLineageHandle(None)
    with _starting:
        try:
            key = client_runtime.session_key(spark)
            existing = PROCESS.handle_for(key)
            if existing is not None:
                _say_not_applied(overrides)
                return existing
            conf = client_runtime.session_conf(spark)
        except Exception as error:  # noqa: BLE001 - enable() of a remote session never raises
            endpoint = connect_local.client_endpoint(spark)
            server = f"its server (sc://{endpoint[0]}:{endpoint[1]})" if endpoint else "its server"
            log.warning("%s: %s could not be asked for the session's confs (%s)", off, server, one_line(error))
            return session_module.SparkLineageHandle(None)
        try:
            reason = server_lineage(conf)
            if reason is not None:
                client_runtime.set_identity(spark, overrides, reason)
                return session_module.SparkLineageHandle(None)
            session = client_runtime.session_info(spark, conf)
            prepared = _prepare(session.conf, overrides, hold=False)
            if prepared is None:
                return session_module.SparkLineageHandle(None)
            runtime = client_runtime.ClientRuntime(spark, *prepared.runtime_args(session))
            return client_runtime.start(key, runtime)
        except ConfigError as error:
            log.error("%s: %s", off, error)
        except Exception as error:  # noqa: BLE001
            log.warning("%s: %s", off, one_line(error))
        return session_module.SparkLineageHandle(None)


def _protect_logs_before_reading_confs(bridge: JvmBridge) -> None:
    """Reading every conf of a session brings its secrets across py4j, which logs what it receives at DEBUG:
    the session's redaction pattern applies to the logs before that."""
    protect_logs(rules_for(bridge.redaction_regex()))


def follow_new_sessions(on: bool | None) -> None:
    """Enable lineage on every session created from now on (``True``), on none (``False``), or let the
    configuration decide again (``None``)."""
    global _follow
    _follow = on


def _start(
    bridge: JvmBridge, overrides: dict[str, Any], conf: dict[str, str] | None = None, hold: bool = False
) -> SparkLineageHandle:
    """``conf``: the session's confs, when the caller has just read them. ``hold``: refused transport settings
    do not keep lineage off; its events are spooled, for ``spark-lineage replay`` once they are fixed (a job
    turned on by its configuration alone: nobody is there to see an error before its queries run)."""
    # Two threads creating or enabling the same session at once must not both register a listener.
    with _starting:
        return _start_once(bridge, overrides, conf, hold)


def _start_once(
    bridge: JvmBridge, overrides: dict[str, Any], conf: dict[str, str] | None, hold: bool
) -> SparkLineageHandle:
    from spark_lineage import session as session_module
    from spark_lineage.process import PROCESS

    existing = PROCESS.handle_for(bridge.session_key) or _inherited_handle(bridge)
    if existing is not None:
        _say_not_applied(overrides)
        return existing
    session = bridge.session_info(conf)
    prepared = _prepare(session.conf, overrides, hold)
    if prepared is None:
        return session_module.SparkLineageHandle(None)
    runtime = session_module.LineageRuntime(bridge, *prepared.runtime_args(session))
    handle = session_module.start_runtime(bridge.session_key, runtime, bridge.spark_context)
    _collect_setup_garbage()
    return handle


def _say_not_applied(overrides: Mapping[str, Any]) -> None:
    if overrides:
        log.warning(
            "spark_lineage: lineage is already on for this session (by configuration, or an earlier enable()); "
            "the settings given now are not applied: %s. disable() first to apply them.",
            ", ".join(sorted(overrides)),
        )


@dataclass(frozen=True)
class _Prepared:
    """A session's settings, checked, and what delivers its events."""

    config: config_module.LineageConfig
    client: Any
    redactor: Redactor
    held: Any

    def runtime_args(self, session: Any) -> tuple[Any, ...]:
        """``(config, client, session, redactor, held)``, as either runtime takes them."""
        return self.config, self.client, session, self.redactor, self.held


def _prepare(conf: Mapping[str, str], overrides: dict[str, Any], hold: bool) -> _Prepared | None:
    """The settings of a session whose confs are ``conf``, and its delivery's client; ``None`` when lineage is
    switched off for it (said once). Raises :class:`ConfigError` naming the key to fix. ``hold``: see
    :func:`_start`."""
    from spark_lineage.delivery import Held, create_client

    overrides = {**_notebook_overrides(conf), **overrides}
    switch = config_module.disabled_by(conf, overrides)
    if switch is not None:
        log.info("spark_lineage: lineage is disabled (%s); enable() does nothing", switch)
        return None
    if config_module.java_agent_configured(conf):
        log.warning("spark_lineage: off: %s", config_module.JAVA_AGENT_REASON)
        return None
    transport_keys = {key: value for key, value in conf.items() if _is_transport_key(key)}
    refused: ConfigError | None = None
    try:
        config = config_module.resolve(conf, overrides)
    except ConfigError as error:
        if not (hold and transport_keys):
            raise
        # Resolved again without them: a refusal of another key still keeps lineage off, and says why.
        others = {key: value for key, value in conf.items() if key not in transport_keys}
        config, refused = config_module.resolve(others, overrides), error
    _warn_about_keys(config)
    redactor = Redactor(config.redaction_pattern)
    redactor.learn_from_properties(conf)
    protect_logs(redactor)
    held = None
    if refused is None:
        client = create_client(config, redactor)
    else:
        shown = redactor.properties(transport_keys)
        flags = " ".join(f"--conf {key}={shown[key]}" for key in sorted(shown))
        held = Held(redactor.text(str(refused)), flags)
        client = _client_that_sends_nothing()
    return _Prepared(config, client, redactor, held)


def _is_transport_key(key: str) -> bool:
    prefix = config_module.CONF_PREFIX + "transport"
    return key == prefix or key.startswith(prefix + ".")


def _client_that_sends_nothing() -> Any:
    """The client of a held delivery (:class:`~spark_lineage.delivery.Held`): its events are built and
    spooled as any others, and its transport is never asked."""
    from openlineage.client import OpenLineageClient
    from openlineage.client.transport.noop import NoopConfig, NoopTransport

    return OpenLineageClient(transport=NoopTransport(NoopConfig()))


_setup_collected = False


def _collect_setup_garbage() -> None:
    """One full garbage collection, the first time lineage starts in a process, while ``enable()`` (or the
    session's creation) is still setting up.

    Importing lineage's modules and openlineage-python's, and starting the runtime, leave thousands of new
    objects that have outlived the young generations. Python runs a full collection once such survivors reach
    a quarter of the objects it already tracks (a PySpark driver tracks over 100,000): left alone, that
    collection (25 to 65 ms of CPU on a 2-core machine) falls during the job's first queries, on lineage's
    analysis thread. Done here, it costs the same once, before the job's queries, and the next one is as far
    off as it would be without lineage. ``benchmarks/cpu_per_query.py`` reports its cost."""
    global _setup_collected
    if _setup_collected:
        return
    _setup_collected = True
    with contextlib.suppress(Exception):
        gc.collect()


def _inherited_handle(bridge: JvmBridge) -> SparkLineageHandle | None:
    """The handle of the session this one was cloned from, when Spark already calls that session's listener
    for this one's queries: a second listener would report each of them twice, under a second application
    run. The clone then shares the parent's handle."""
    from spark_lineage.process import PROCESS

    try:
        names = bridge.listener_names()
    except Exception:
        log.debug("spark_lineage: could not list the session's listeners", exc_info=True)
        return None
    for name in names:
        handle = PROCESS.handle_of_listener(name)
        if handle is not None:
            PROCESS.share_handle(bridge.session_key, handle)
            return handle
    return None


def notebook_name() -> str | None:
    """The running notebook's file name without ``.ipynb``, when the front end says which it is."""
    candidates = [os.environ.get("JPY_SESSION_NAME")]
    get_ipython = getattr(sys.modules.get("IPython"), "get_ipython", None)
    shell = get_ipython() if get_ipython is not None else None
    if shell is not None:
        candidates += [shell.user_ns.get("__vsc_ipynb_file__"), shell.user_ns.get("__session__")]
    for candidate in candidates:
        if isinstance(candidate, str) and candidate.endswith(".ipynb"):
            return PurePath(candidate).stem
    return None


def _notebook_overrides(conf: Mapping[str, str]) -> dict[str, Any]:
    """In a notebook, its name stands for the application, so jobs of different notebooks stay apart; an
    explicit ``spark.openlineage.appName`` still wins."""
    if "IPython" not in sys.modules or config_module.CONF_PREFIX + "appName" in conf:
        return {}
    name = notebook_name()
    return {"appName": name} if name else {}


def _warn_about_keys(config: config_module.LineageConfig) -> None:
    """Unknown keys, and openlineage-spark keys that do not apply here: each said once per process, not once
    per session."""
    for warning in [*config_module.unknown_key_warnings(config), *config_module.not_applicable_warnings(config)]:
        if warning not in _warned:
            _warned.add(warning)
            log.warning("spark_lineage: %s", warning)
