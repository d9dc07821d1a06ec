"""Read an RDD's lineage graph: every RDD it depends on, with what the file-reading ones read.

RDD graphs are small (a handful of RDDs for a DataFrame built from ``sc.textFile``), so they are read with
plain py4j calls: a few per RDD, and a few more per input path. Nothing here knows which RDDs matter for
lineage; the analysis decides that from the records.
"""

from __future__ import annotations

import re
from typing import Any

from spark_lineage.jvm.values import JvmClasses, safe
from spark_lineage.plan import RddRecord

_INPUT_DIRS = "mapreduce.input.fileinputformat.inputdir"
"""Where both Hadoop input APIs keep their input paths (``FileInputFormat.setInputPaths``)."""
_HADOOP_RDDS = frozenset({"org.apache.spark.rdd.HadoopRDD", "org.apache.spark.rdd.NewHadoopRDD"})
_FILE_SCAN_RDD = "org.apache.spark.sql.execution.datasources.FileScanRDD"
_PARTITIONED_FILE = re.compile(r"path: (.+?), range: \d+-\d+, partition values:")
"""How ``PartitionedFile.toString`` names its file (Spark 3.4 to 4.1)."""

MAX_RDDS = 1_000
"""A graph is read up to this many RDDs: iterative jobs can build lineages thousands of RDDs long."""


class RddGraphReader:
    """Reads RDD graphs of one JVM."""

    def __init__(self, classes: JvmClasses) -> None:
        self._classes = classes

    def read(self, rdd: Any) -> tuple[RddRecord, ...]:
        """``rdd`` and the RDDs it depends on, transitively, each once, in depth-first order from ``rdd``."""
        records: list[RddRecord] = []
        seen: set[int] = set()
        stack = [rdd]
        while stack and len(records) < MAX_RDDS:
            current = stack.pop()
            rdd_id = int(current.id())
            if rdd_id in seen:
                continue
            seen.add(rdd_id)
            dependencies = current.dependencies()
            parents = [dependencies.apply(index).rdd() for index in range(int(dependencies.size()))]
            class_name = str(current.getClass().getName())
            name = current.name()
            paths, files = self._inputs(current, class_name)
            records.append(
                RddRecord(
                    id=rdd_id,
                    class_name=class_name,
                    name=None if name is None else str(name),
                    dependencies=tuple(int(parent.id()) for parent in parents),
                    paths=paths,
                    files=files,
                )
            )
            stack.extend(reversed(parents))
        return tuple(records)

    def _inputs(self, rdd: Any, class_name: str) -> tuple[tuple[str, ...], frozenset[str]]:
        if class_name in _HADOOP_RDDS:
            conf = rdd.getJobConf() if class_name.endswith(".HadoopRDD") else rdd.getConf()
            paths = split_input_paths(safe(lambda: conf.get(_INPUT_DIRS)) or "")
            return paths, frozenset(path for path in paths if self._is_file(path, conf))
        if class_name == _FILE_SCAN_RDD:
            # One call per partition: py4j cannot pick among ``Arrays.toString``'s overloads for an array.
            arrays = self._classes("org.apache.commons.lang3.ArrayUtils")
            partitions = rdd.filePartitions()
            found: dict[str, None] = {}
            for index in range(int(partitions.size())):
                text = str(arrays.toString(partitions.apply(index).files()))
                found.update(dict.fromkeys(_PARTITIONED_FILE.findall(text)))
            return tuple(found), frozenset(found)
        return (), frozenset()

    def _is_file(self, path: str, conf: Any) -> bool:
        """Whether ``path`` is a file, as the file system says now (a glob or a missing path is not)."""

        def check() -> bool:
            hadoop_path = self._classes("org.apache.hadoop.fs.Path")(path)
            return bool(hadoop_path.getFileSystem(conf).getFileStatus(hadoop_path).isFile())

        return bool(safe(check))


def split_input_paths(joined: str) -> tuple[str, ...]:
    """Hadoop's comma-joined input paths (``FileInputFormat``: commas inside a path are escaped with ``\\``)."""
    paths: list[str] = []
    current: list[str] = []
    escaped = False
    for char in joined:
        if escaped:
            current.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ",":
            paths.append("".join(current))
            current = []
        else:
            current.append(char)
    paths.append("".join(current))
    return tuple(path for path in paths if path)
