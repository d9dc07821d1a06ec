"""The ``spark-lineage`` command."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

from spark_lineage._version import __version__


class _Parser(argparse.ArgumentParser):
    """argparse's parser; with ``one_line_errors``, a bad option is one line on stderr, without the usage."""

    def __init__(self, *args: Any, one_line_errors: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.one_line_errors = one_line_errors

    def error(self, message: str) -> NoReturn:
        if not self.one_line_errors:
            super().error(message)
        self.exit(2, f"{self.prog}: {message}\n")


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog="spark-lineage", description="OpenLineage lineage for Spark, from Python.")
    parser.add_argument("--version", action="version", version=f"spark-lineage {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    demo = commands.add_parser("demo", help="run a small local pipeline with lineage on and summarize its events")
    demo.add_argument(
        "--dir",
        type=Path,
        default=Path("lineage-demo"),
        help="directory for the demo's data and events (default: lineage-demo): a new or empty one, or one an "
        "earlier demo made (marked by a .spark-lineage-demo file), whose demo files are then replaced; any other "
        "directory is refused, untouched",
    )
    show = commands.add_parser(
        "events",
        help="summarize the OpenLineage events in a file",
        description="Summarize the OpenLineage run, job and dataset events in FILE: JSON lines, or pretty-printed "
        "JSON (one event, several, or an array of them). A record that cannot be read is named by its line on "
        "stderr and skipped; the exit status is then 1, with the rest summarized all the same. Its output cut "
        "short (as by head), it stops quietly with exit status 141.",
    )
    show.add_argument("file", type=Path, metavar="FILE", help="the file to read, or - for standard input")
    doctor = commands.add_parser(
        "doctor",
        help="explain whether spark-submit jobs here get lineage by themselves, and check that the backend answers",
    )
    doctor.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark conf, as given to spark-submit (repeatable)",
    )
    doctor.add_argument("--no-backend-check", action="store_true", help="do not contact the configured backend")
    doctor.add_argument(
        "--send-test-event",
        action="store_true",
        help="send the HTTP backend one test event (a completed run of job spark_lineage_doctor_test_event), to "
        "check that it accepts events; without it, the backend is only asked whether it answers, and nothing is "
        "written there",
    )
    replay = commands.add_parser(
        "replay",
        help="deliver the lineage events waiting in the spool (left by a backend that was down or slow)",
    )
    replay.add_argument("--spool", type=Path, help="the spool directory (default: $SPARK_LINEAGE_SPOOL_DIR, else "
                        "the user's state directory)")  # fmt: skip
    replay.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a spark.openlineage.transport.* conf naming where to send (repeatable); without one, the "
        "openlineage-python configuration (openlineage.yml, OPENLINEAGE_URL) or each event's own destination, "
        "whose secrets the spool does not keep: give them as spark.openlineage.transport.urlParams.<name>, "
        "headers.<name> or auth.apiKey confs",
    )
    replay.add_argument("--timeout", type=float, default=60.0, help="seconds to keep trying each backend")
    replay.add_argument(
        "--salvage",
        type=Path,
        metavar="FILE",
        help="a damaged spool file (one spark-lineage moved aside: spool.sqlite.damaged-<time>): recover what can "
        "still be read into FILE.salvaged, and deliver it",
    )
    from spark_lineage.connect.server import add_arguments as connect_server_arguments

    connect_server = commands.add_parser(
        "connect-server",
        help="run a Spark Connect server with lineage on, in the foreground (a drop-in for start-connect-server.sh)",
        description="Run a Spark Connect server in this Python process's Spark driver, with lineage on for the "
        "queries its clients run, until SIGTERM or Ctrl-C: a drop-in for Spark's sbin/start-connect-server.sh. "
        "spark.openlineage.* confs say where lineage goes, as for spark-submit.",
        one_line_errors=True,
    )
    connect_server_arguments(connect_server)
    args, extra = parser.parse_known_args(argv)

    if args.command == "connect-server":
        from spark_lineage.connect.server import command as connect_server_command

        return connect_server_command(args, extra)
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")

    if args.command == "replay":
        from spark_lineage.delivery.cli import replay_command

        bad = [item for item in args.conf if "=" not in item]
        if bad:
            parser.error(f"--conf expects KEY=VALUE, got {bad[0]!r}")
        confs = dict(item.split("=", 1) for item in args.conf)
        return replay_command(args.spool, confs, args.timeout, salvaged=args.salvage)

    if args.command == "doctor":
        from spark_lineage import doctor as doctor_module

        bad = [item for item in args.conf if "=" not in item]
        if bad:
            parser.error(f"--conf expects KEY=VALUE, got {bad[0]!r}")
        confs = doctor_module.parse_conf_args(arg for item in args.conf for arg in ("--conf", item))
        return doctor_module.main(confs, check_backend=not args.no_backend_check, send_test_event=args.send_test_event)

    if args.command == "events":
        from spark_lineage.demo import summarize_text

        stdin = str(args.file) == "-"
        name = "standard input" if stdin else str(args.file)
        if not stdin and not args.file.is_file():
            print(f"spark-lineage events: no file {args.file}", file=sys.stderr)
            return 2
        problems: list[str] = []
        try:
            text = sys.stdin.read() if stdin else args.file.read_text(encoding="utf-8-sig", errors="replace")
        except (OSError, UnicodeDecodeError) as error:
            reason = getattr(error, "strerror", None) or error
            print(f"spark-lineage events: cannot read {name}: {reason}", file=sys.stderr)
            return 2
        status = _print(summarize_text(text, f"read from {name}", problems))
        for problem in problems:
            print(f"spark-lineage events: {name}, {problem}", file=sys.stderr)
        return status or (1 if problems else 0)

    if args.command == "demo":
        from spark_lineage.demo import run_pipeline, summarize
        from spark_lineage.errors import DemoDirError

        try:
            import pyspark  # noqa: F401
        except ImportError:
            from spark_lineage.extras import install_hint

            print(f"spark-lineage demo needs PySpark: {install_hint('spark')}", file=sys.stderr)
            return 2
        try:
            events_file = run_pipeline(args.dir.resolve())
        except DemoDirError as error:
            print(f"spark-lineage demo: {error}", file=sys.stderr)
            return 2
        return _print(summarize(events_file))
    return 0


def _print(text: str) -> int:
    """Print ``text``: 0, or 141 (as for a process that SIGPIPE ends) when the reader has gone, as ``head`` does.

    As the Python documentation advises (the signal module's note on SIGPIPE), standard output then points at
    devnull, so that the flush at exit does not fail again with a traceback.
    """
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    return 0


if __name__ == "__main__":
    sys.exit(main())
