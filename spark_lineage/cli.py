"""The ``spark-lineage`` command."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from spark_lineage._version import __version__


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="spark-lineage", description="OpenLineage lineage for Spark, from Python.")
    parser.add_argument("--version", action="version", version=f"spark-lineage {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run a small local pipeline with lineage on and summarize its events")
    demo.add_argument(
        "--dir", type=Path, default=Path("lineage-demo"), help="working directory for data and events (replaced)"
    )
    show = commands.add_parser("events", help="summarize the OpenLineage events in a file (one JSON event per line)")
    show.add_argument("file", type=Path)
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
    args = parser.parse_args(argv)

    if args.command == "doctor":
        from spark_lineage import doctor as doctor_module

        bad = [item for item in args.conf if "=" not in item]
        if bad:
            parser.error(f"--conf expects KEY=VALUE, got {bad[0]!r}")
        confs = doctor_module.parse_conf_args(arg for item in args.conf for arg in ("--conf", item))
        return doctor_module.main(confs, check_backend=not args.no_backend_check)

    if args.command == "events":
        from spark_lineage.demo import summarize

        if not args.file.is_file():
            print(f"spark-lineage events: no file {args.file}", file=sys.stderr)
            return 2
        print(summarize(args.file))
        return 0

    if args.command == "demo":
        from spark_lineage.demo import run_pipeline, summarize

        try:
            import pyspark  # noqa: F401
        except ImportError:
            print("spark-lineage demo needs PySpark: pip install 'spark-lineage[spark]'", file=sys.stderr)
            return 2
        events_file = run_pipeline(args.dir.resolve())
        print(summarize(events_file))
    return 0


if __name__ == "__main__":
    sys.exit(main())
