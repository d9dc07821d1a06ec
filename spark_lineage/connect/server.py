"""``spark-lineage connect-server``: a Spark Connect server in a Python driver, with lineage on.

A drop-in for Spark's ``sbin/start-connect-server.sh``. It takes spark-submit's ``--master``, ``--conf``
(repeatable), ``--packages``, ``--jars`` and ``--name``, and ``--port`` (``spark.connect.grpc.binding.port``,
default 15002), and runs in the foreground. The driver is this process's own PySpark: its SparkContext loads
Spark's ``SparkConnectPlugin``, which starts the gRPC server while the context starts, and lineage is turned on
for the driver's session with :func:`spark_lineage.enable`: on with no ``spark.openlineage.*`` conf at all (the
transport then comes from openlineage-python's own configuration, else the console), off only with
``spark.openlineage.disabled=true``, ``OPENLINEAGE_DISABLED`` or openlineage-spark's listener configured, as
for ``enable()``.

PySpark 3.5 ships no Spark Connect server jar: where the Spark that runs has none (``$SPARK_HOME/jars``, else
PySpark's) and the options name none, the module ``org.apache.spark:spark-connect_<scala>`` is added to the
packages, at the newest release Maven Central serves for that line that is not newer than PySpark
(:data:`CONNECT_RELEASES`), and a line says so.

What it prints on stdout, each line starting with ``spark-lineage connect-server:``: that line on 3.5, then one
line once the server listens, with the address clients connect to and where lineage goes, then one when a
stop begins and one when it is done. Errors are one line on stderr, no traceback: a bad option (exit status 2,
naming the option and what it takes), a port in use or a Spark that does not start (exit status 1).

**Stopping.** SIGTERM and SIGINT (Ctrl-C) stop it cleanly, with exit status 0, through ``spark.stop()``:
lineage's shutdown runs first, while the JVM still answers (it ends every open run, the application run
COMPLETE, and spools and sends their events), then Spark stops. All of it within
``spark.openlineage.python.shutdownTimeoutSeconds`` plus :data:`STOP_GRACE_SECONDS`; past that, or at a second
signal, the process exits at once with a non-zero status.

**Signals, and :mod:`spark_lineage.endings`.** This module's handler only asks the main thread to stop. It is
installed first, and again once the SparkContext has started (PySpark's context puts its own SIGINT handler in,
which cancels jobs and raises ``KeyboardInterrupt``), before the session whose creation may turn lineage on
and before ``enable()``. :mod:`spark_lineage.endings`, installed when lineage turns on, then chains it, as it
chains any handler it finds: it notes the signal and calls this handler, which stops the server, instead of
the default action (its ending at once as FAIL, and death by the signal). Noting the signal matters when the
JVM gets it too (a whole process group signalled, as ``tini -g`` and systemd do): the JVM ending then is part
of the stop, not a failure of the application.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import re
import signal
import socket
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn

from spark_lineage.errors import ServerStartError, ServerUsageError

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from spark_lineage.session import SparkLineageHandle

log = logging.getLogger("spark_lineage")

COMMAND = "spark-lineage connect-server"
PLUGIN = "org.apache.spark.sql.connect.SparkConnectPlugin"
PORT_CONF = "spark.connect.grpc.binding.port"
ADDRESS_CONF = "spark.connect.grpc.binding.address"
"""Spark 4's; Spark 3.5's server always listens on every interface."""
DEFAULT_PORT = 15002
DEFAULT_NAME = "Spark Connect server"
"""The application name ``sbin/start-connect-server.sh`` gives."""
STOP_GRACE_SECONDS = 30.0
"""How long Spark may take to stop, beyond lineage's own shutdown timeout."""
WATCH_SECONDS = 2.0
"""How often the main thread checks that the driver's JVM and SparkContext are still there."""
CONNECT_MODULE = "org.apache.spark:spark-connect_{scala}"
CONNECT_RELEASES = {"2.12": ("3.5.0", "3.5.1", "3.5.4", "3.5.5", "3.5.7")}
"""The releases of Spark 3.5's Connect server module Maven Central serves, by Scala version (it serves none for
Scala 2.13 on 3.5, nor 3.5.9's: a patch release changes no API the module uses; tested with 3.5.7 in a PySpark
3.5.9 driver). PySpark 4 ships the module in its jars."""
OPTIONS = "--master, --conf KEY=VALUE, --packages, --jars, --name, --port"


@dataclass(frozen=True)
class ServerOptions:
    """The command line, checked."""

    confs: dict[str, str]
    """``--conf`` settings, the options' own folded in as spark-submit folds them (``--master`` is
    ``spark.master``...), ``spark.plugins`` and the port included."""
    port: int
    address: str | None = None

    @property
    def host(self) -> str | None:
        """The one address the server listens on; ``None``: every interface."""
        return None if not self.address or self.address in ("0.0.0.0", "::") else self.address

    @property
    def url(self) -> str:
        return f"sc://{self.host or 'localhost'}:{self.port}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``spark-lineage connect-server``, as spark-submit spells them."""
    parser.add_argument("--master", help="the master URL, as spark-submit takes it (default: Spark's, local[*])")
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark conf (repeatable): spark.openlineage.* say where lineage goes, as for spark-submit",
    )
    parser.add_argument("--packages", help="Maven coordinates of jars for the driver and executors, comma-separated")
    parser.add_argument("--jars", help="jars for the driver and executors, comma-separated")
    parser.add_argument("--name", help=f"the application name (default: {DEFAULT_NAME!r}, as start-connect-server.sh)")
    parser.add_argument(
        "--port",
        type=_port,
        help=f"the port clients connect to (default: {PORT_CONF}, else {DEFAULT_PORT})",
    )


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expects a port number from 1 to 65535, got {text!r}")
    return port


def command(args: argparse.Namespace, extra: Sequence[str]) -> int:
    """Run ``spark-lineage connect-server`` with its parsed options (``extra``: what argparse did not know)."""
    try:
        options = server_options(args, extra, os.environ)
        return serve(options)
    except ServerUsageError as error:
        print(f"{COMMAND}: {error}", file=sys.stderr)
        return 2
    except ServerStartError as error:
        print(f"{COMMAND}: {error}", file=sys.stderr)
        return 1


def server_options(args: argparse.Namespace, extra: Sequence[str], environ: Mapping[str, str]) -> ServerOptions:
    """The options, checked, as Spark confs; raises :class:`ServerUsageError` naming what to fix."""
    if extra:
        unknown = next((word for word in extra if word.startswith("-")), extra[0])
        raise ServerUsageError(
            f"unrecognized argument {unknown!r}: it takes {OPTIONS}; give other Spark settings as --conf "
            "KEY=VALUE (spark-submit's --driver-memory 4g is --conf spark.driver.memory=4g)"
        )
    confs: dict[str, str] = {}
    for item in args.conf:
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            raise ServerUsageError(f"--conf expects KEY=VALUE, got {item!r}")
        confs[key.strip()] = value
    for option, key in (("master", "spark.master"), ("name", "spark.app.name"), ("packages", "spark.jars.packages"),
                        ("jars", "spark.jars")):  # fmt: skip
        value = getattr(args, option)
        if value is not None:
            if not value.strip():
                raise ServerUsageError(f"--{option} expects a value, got an empty one")
            confs[key] = value  # the option wins over the conf, as in spark-submit
    if confs.get("spark.remote") or confs.get("spark.api.mode", "classic").strip().lower() != "classic":
        raise ServerUsageError(
            "--conf spark.remote and spark.api.mode=connect make a Spark Connect client; connect-server runs the "
            "server: leave them out"
        )
    from spark_lineage import config
    from spark_lineage.doctor import spark_confs

    effective, _ = spark_confs(confs, environ)  # spark-defaults.conf, PYSPARK_SUBMIT_ARGS, then --conf
    if not config.is_disabled(effective):
        try:  # before Spark starts, which takes seconds: enable() would say the same then
            config.resolve(effective)
        except config.ConfigError as error:
            raise ServerUsageError(str(error)) from None
    port = args.port
    if PORT_CONF in effective:
        try:
            configured = _port(effective[PORT_CONF].strip())
        except argparse.ArgumentTypeError as error:
            raise ServerUsageError(f"{PORT_CONF} {error}") from None
        if port is not None and PORT_CONF in confs and port != configured:
            raise ServerUsageError(f"--port {port} and --conf {PORT_CONF}={configured} disagree: give one of them")
        port = configured if port is None else port  # --port wins over spark-defaults.conf, as a --conf does
    if port is None:
        port = DEFAULT_PORT
    confs[PORT_CONF] = str(port)
    for key in ("spark.jars.packages", "spark.jars"):  # from spark-defaults.conf too: a 3.5 server adds to them
        if effective.get(key):
            confs[key] = effective[key]
    plugins = [name.strip() for name in effective.get("spark.plugins", "").split(",") if name.strip()]
    confs["spark.plugins"] = ",".join(dict.fromkeys([*plugins, PLUGIN]))
    confs.setdefault("spark.app.name", effective.get("spark.app.name", DEFAULT_NAME))
    return ServerOptions(confs=confs, port=port, address=effective.get(ADDRESS_CONF) or None)


def connect_package(pyspark_version: str, jars_dir: Path, confs: Mapping[str, str]) -> str | None:
    """The Maven coordinate of Spark's Connect server module to add, ``None`` where the Spark that runs ships
    it (PySpark 4) or the options name it already. Raises :class:`ServerStartError` where Maven Central has none."""
    if list(jars_dir.glob("spark-connect_*.jar")):
        return None
    named = f"{confs.get('spark.jars.packages', '')},{confs.get('spark.jars', '')}"
    if re.search(r"(^|[,:/])spark-connect_2\.1\d", named):
        return None
    scala = _scala_version(jars_dir, pyspark_version)
    line = _release(pyspark_version)[:2]
    served = [v for v in CONNECT_RELEASES.get(scala, ()) if _release(v)[:2] == line]
    fitting = [v for v in served if _release(v) <= _release(pyspark_version)] or served[:1]
    if not fitting:
        raise ServerStartError(
            f"Spark {pyspark_version} (Scala {scala}) in {jars_dir.parent} has no Spark Connect server, and Maven "
            f"Central serves none for it: add one with --packages or --jars (spark-connect_{scala})"
        )
    return f"{CONNECT_MODULE.format(scala=scala)}:{max(fitting, key=_release)}"


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


def _scala_version(jars_dir: Path, pyspark_version: str) -> str:
    for jar in jars_dir.glob("scala-library-*.jar"):
        found = re.match(r"scala-library-(2\.1\d)\.", jar.name)
        if found:
            return found.group(1)
    return "2.12" if pyspark_version.startswith("3.") else "2.13"


def spark_jars_dir(environ: Mapping[str, str]) -> Path:
    """Where the jars of the Spark PySpark starts are: ``$SPARK_HOME/jars``, else PySpark's own."""
    import pyspark

    home = environ.get("SPARK_HOME") or str(Path(pyspark.__file__).parent)
    return Path(home) / "jars"


def check_port_free(options: ServerOptions) -> None:
    """Raise :class:`ServerStartError` when something listens on ``port`` already: found in a millisecond, where Spark
    would start for seconds and then fail with a page of stack trace. Bound as the server binds (every
    interface, or its binding address) and, like it, with SO_REUSEADDR: a port a stopped server left in
    TIME_WAIT is free."""
    host, port = options.host, options.port
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as error:
        raise ServerStartError(f"{ADDRESS_CONF}={host}: cannot bind to it ({error.strerror or error})") from None
    family, kind, proto, _, where = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(where)
        except OSError as error:
            holder = f"{host}:{port}" if host else f"port {port}"
            if error.errno == errno.EADDRINUSE:
                raise ServerStartError(
                    f"{holder} is in use: stop what listens there, or give another port with --port"
                ) from None
            raise ServerStartError(
                f"{holder} cannot be bound ({error.strerror or error}): give another port with --port"
            ) from None


class StopSignals:
    """SIGTERM and SIGINT, turned into a request the main thread waits for; a second one exits at once."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        self.name: str | None = None

    def install(self) -> None:
        for number in (signal.SIGTERM, signal.SIGINT):
            signal.signal(number, self._on_signal)

    def _on_signal(self, number: int, frame: FrameType | None) -> None:
        name = signal.Signals(number).name
        if self.requested.is_set():
            _say(f"{name} again: exiting without waiting for the stop", err=True)
            os._exit(128 + number)
        self.name = name
        self.requested.set()


def serve(options: ServerOptions) -> int:
    """Start the server, wait for a stop signal, stop; the exit status."""
    import pyspark

    jars_dir = spark_jars_dir(os.environ)
    if not jars_dir.is_dir():
        raise ServerStartError(
            f"no Spark jars in {jars_dir}: connect-server runs Spark itself and needs the full pyspark package "
            "(not pyspark-client), or SPARK_HOME set to a Spark distribution"
        )
    confs = dict(options.confs)
    package = connect_package(pyspark.__version__, jars_dir, confs)
    check_port_free(options)
    if package is not None:
        confs["spark.jars.packages"] = ",".join(filter(None, [confs.get("spark.jars.packages"), package]))
        _say(f"Spark {pyspark.__version__} has no Spark Connect server jar: adding {package} from Maven Central")
    # A client's settings in this environment would make PySpark build a Connect client instead of a driver.
    for variable in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED"):
        os.environ.pop(variable, None)

    stop = StopSignals()
    stop.install()
    sc = _start_context(confs, options)
    stop.install()  # PySpark's context put its own SIGINT handler in: this one goes back before lineage is on
    spark, handle = _start_lineage(sc)
    lineage = f"lineage goes to {', '.join(_destinations())}" if handle.enabled else _off(sc)
    everywhere = "" if options.host else " (every interface)"
    _say(f"Spark Connect server listening on {options.url}{everywhere}; {lineage}")
    ended = _wait(sc, options, stop)
    if ended is not None:
        _say(ended, err=True)
        return 1
    return _stop(spark, handle, stop.name or "stop")


def _start_context(confs: Mapping[str, str], options: ServerOptions) -> SparkContext:
    from pyspark import SparkConf, SparkContext

    conf = SparkConf().setAll(list(confs.items()))
    try:
        return SparkContext(conf=conf)
    except Exception as error:  # noqa: BLE001 - one line for whatever stops Spark, not a traceback
        text = _java_error(error)
        if "BindException" in text or "Failed to bind" in text:
            raise ServerStartError(
                f"port {options.port} is in use: stop what listens there, or give another port with --port"
            ) from None
        raise ServerStartError(f"Spark did not start: {text}") from None


def _java_error(error: BaseException) -> str:
    """The first line that says what went wrong: the Java exception's, when there is one."""
    java = getattr(error, "java_exception", None)
    text = str(java) if java is not None else str(error)
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("at ")]
    first = lines[0] if lines else type(error).__name__
    if "JAVA_GATEWAY_EXITED" in text or "Java gateway process exited" in text:
        first += " (Spark's own output above says why)"
    return first[:400]


def _start_lineage(sc: SparkContext) -> tuple[SparkSession, SparkLineageHandle]:
    """The driver's session, and lineage on for it (the handle is disabled where configuration keeps it off)."""
    from pyspark.sql import SparkSession

    import spark_lineage
    from spark_lineage import logs
    from spark_lineage.config import ConfigError

    # A server's log is its terminal: lineage's own lines (on, and what became of the events) go to stderr.
    logs.show_on_stderr("INFO")
    spark = SparkSession.builder.getOrCreate()  # the session the start-up hook may turn lineage on for already
    try:
        handle = spark_lineage.enable(spark)
    except ConfigError as error:
        spark.stop()
        raise ServerUsageError(str(error)) from None
    except Exception as error:  # a server without the lineage it was started for is of no use
        log.debug("spark_lineage: turning lineage on", exc_info=True)
        spark.stop()
        raise ServerStartError(f"lineage could not be turned on: {_java_error(error)}") from None
    return spark, handle


def _off(sc: SparkContext) -> str:
    from spark_lineage.config import disabled_by, java_agent_configured

    conf = dict(sc.getConf().getAll())
    if java_agent_configured(conf):
        return "lineage is off here: openlineage-spark's listener (spark.extraListeners) reports it"
    return f"lineage is off ({disabled_by(conf) or 'spark.openlineage.disabled=true or OPENLINEAGE_DISABLED'})"


def _destinations() -> list[str]:
    from spark_lineage.process import PROCESS

    return PROCESS.destinations()


def _wait(sc: SparkContext, options: ServerOptions, stop: StopSignals) -> str | None:
    """Wait for a stop signal; or the message to exit with, when Spark ends by itself first."""
    process = getattr(getattr(sc, "_gateway", None), "proc", None)
    refused = 0
    while not stop.requested.wait(WATCH_SECONDS):
        if process is not None and process.poll() is not None:
            return "the Spark driver's JVM ended: the server is gone"
        # Asked over TCP, not the JVM: a py4j call racing the JVM's end logs a traceback of py4j's own.
        refused = 0 if _answers(options) else refused + 1
        if refused >= 2:
            return f"nothing listens on port {options.port} any more (Spark stopped; its log says why): exiting"
    return None


def _answers(options: ServerOptions) -> bool:
    try:
        socket.create_connection((options.host or "localhost", options.port), timeout=WATCH_SECONDS).close()
    except OSError:
        return False
    return True


def _stop(spark: SparkSession, handle: SparkLineageHandle, signal_name: str) -> int:
    within = (handle.config.shutdown_timeout if handle.config is not None else 10.0) + STOP_GRACE_SECONDS
    first = "lineage ends first; " if handle.enabled else ""
    _say(f"{signal_name}: stopping ({first}{within:.0f} s at most)")
    watchdog = threading.Timer(within, _give_up, args=(within,))
    watchdog.daemon = True
    watchdog.start()
    try:
        spark.stop()  # lineage's shutdown first (spark_lineage.session wraps the context's stop), then Spark's
    except Exception as error:  # the JVM may be ending with us (a whole process group signalled)
        log.debug("spark_lineage: stopping Spark", exc_info=True)
        _say(f"Spark did not stop cleanly: {_java_error(error)}", err=True)
    finally:
        watchdog.cancel()
    _say("stopped")
    return 0


def _give_up(within: float) -> NoReturn:
    _say(f"did not stop within {within:.0f} s: exiting without waiting further", err=True)
    os._exit(1)


def _say(text: str, err: bool = False) -> None:
    stream: Any = sys.stderr if err else sys.stdout
    print(f"{COMMAND}: {text}", file=stream, flush=True)
