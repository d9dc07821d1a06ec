"""Job names, normalized as openlineage-spark normalizes them."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

from spark_lineage.plan import RddRecord


@lru_cache(maxsize=1024)
def normalize_job_name(text: str | None) -> str:
    """openlineage-spark's name normalizer: ``"My App"`` -> ``my_app``, ``"InsertIntoHadoopFsRelationCommand"``
    -> ``insert_into_hadoop_fs_relation_command``. Each name once (a job names the same few nodes query after
    query)."""
    if not text:
        return ""
    trimmed = re.sub(r"[^\w]+$", "", re.sub(r"^[^\w]+", "", text, flags=re.ASCII), flags=re.ASCII)
    decomposed = unicodedata.normalize("NFKD", trimmed)
    stripped = "".join(ch for ch in decomposed if not unicodedata.category(ch).startswith("M"))
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", stripped)
    spaced = re.sub(r"(?<!^)([A-Z])([a-z])", r" \1\2", spaced)
    spaced = re.sub(r"(\d)([A-Z])", r"\1 \2", spaced)
    return re.sub(r"[^a-zA-Z0-9]+", "_", spaced.lower())


_COMMANDS_NOT_NAMED_COMMAND = frozenset({"InsertIntoHiveTable"})
"""V1 commands (``RunnableCommand``, ``DataWritingCommand``) whose class name does not end in ``Command``."""


def planned_root_name(logical_root: str) -> str:
    """The name of the physical node Spark plans a logical root into, for a query that failed before it was
    planned (the optimizer threw): a V1 command runs as ``Execute <command>``, which is how its successful runs
    are named, so that a failure is filed under the same job. Other roots keep their own name."""
    if logical_root.endswith("Command") or logical_root in _COMMANDS_NOT_NAMED_COMMAND:
        return f"Execute {logical_root}"
    return logical_root


def path_job_suffix(name: str) -> str:
    """The job-name suffix openlineage-spark derives from an output path: the last two segments of its dataset's
    name, ``name``, as naming made it (partition-like directories trimmed already: :func:`trim_name` of a path
    that is no dataset's name yet)."""
    if name.rfind("/") <= 0:
        return name
    parts = name.split("/")
    while parts and parts[-1] == "":
        parts.pop()
    return f"{parts[-2]}_{parts[-1]}" if len(parts) >= 2 else parts[-1]


_CAMEL_TO_SNAKE = re.compile(r"[\s\-_]?((?<=.)[A-Z](?=[a-z\s\-_])|(?<=[^A-Z])[A-Z]|((?<=[\s\-_])[a-z\d]))")
_RDD_CLASS_SUFFIX = re.compile(r"RDD\d*$")
_MAX_RDD_NAME = 100


def rdd_job_suffix(graph: Sequence[RddRecord]) -> str | None:
    """The job-name suffix openlineage-spark derives from a job's final RDD (the first record of ``graph``):
    each RDD by its name, or by its class when it has none or is named after the path it reads, joined with
    what it depends on. ``None`` for an empty graph."""
    if not graph:
        return None
    by_id = {record.id: record for record in graph}

    def own_name(record: RddRecord) -> str:
        name = record.name
        prev = by_id.get(record.dependencies[0]) if record.dependencies else None
        if (
            name is None
            or (record.simple_name == "HadoopRDD" and any(name in path for path in record.paths))
            or (record.simple_name == "MapPartitionsRDD" and prev is not None and prev.name == name)
        ):
            name = _CAMEL_TO_SNAKE.sub(r"_\1", _RDD_CLASS_SUFFIX.sub("", record.simple_name)).lower()
        return name

    def name_of(record: RddRecord, depth: int) -> str:
        name = own_name(record)
        parents = [by_id[i] for i in record.dependencies if i in by_id]
        if not parents or depth > _MAX_RDD_NAME:
            return name
        joined = "_".join(name_of(parent, depth + 1) for parent in parents)[:_MAX_RDD_NAME]
        return joined if joined.startswith(name) else f"{name}_{joined}"

    return name_of(graph[0], 0)
