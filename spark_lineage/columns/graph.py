"""The dependency graph of one query's columns, and walking it from an output column to its sources.

Nodes are expression ids (Spark's ``ExprId``): every column a plan node produces has one. An edge says
"evaluating this column reads that one, through this transformation". Leaf columns are tied to the input
columns they stand for. Dataset-level dependencies (a join condition, a filter, the grouping keys, the sort
keys) are pseudo nodes with negative ids.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable

from spark_lineage.columns.transformations import IDENTITY, compose, sort_key
from spark_lineage.errors import BudgetExceededError
from spark_lineage.lineage import ColumnSource, InputColumn, Transformation

MAX_EDGES = 1_000_000
"""Beyond this many dependencies a plan gets no column lineage (openlineage-spark's limit too)."""


class ColumnGraph:
    """Column dependencies of one query."""

    def __init__(self, deadline: float | None = None) -> None:
        self.inputs: dict[int, set[InputColumn]] = defaultdict(set)
        self.edges: dict[int, dict[tuple[int, Transformation], None]] = defaultdict(dict)
        self.dataset_nodes: list[int] = []
        self._edge_count = 0
        self._next_pseudo = -1
        self._deadline = deadline

    def add_input(self, expr_id: int, column: InputColumn) -> None:
        self.inputs[expr_id].add(column)

    def add_edge(self, target: int, source: int, transformation: Transformation) -> None:
        """``target`` reads ``source`` through ``transformation``."""
        if target == source:
            return
        edges = self.edges[target]
        if (source, transformation) not in edges:
            self._edge_count += 1
            if self._edge_count > MAX_EDGES:
                raise BudgetExceededError(f"more than {MAX_EDGES} column dependencies")
            edges[(source, transformation)] = None

    def new_dataset_node(self) -> int:
        """A pseudo column standing for the whole result (a join condition, a filter, ...)."""
        node = self._next_pseudo
        self._next_pseudo -= 1
        self.dataset_nodes.append(node)
        return node

    def check_time(self) -> None:
        if self._deadline is not None and time.monotonic() > self._deadline:
            raise BudgetExceededError("the column lineage time budget ran out")

    def sources(self, expr_id: int) -> list[ColumnSource]:
        """The input columns ``expr_id`` depends on, each with every transformation through which it does."""
        start = (expr_id, IDENTITY)
        seen = {start}
        frontier = [start]
        found: dict[InputColumn, dict[Transformation, None]] = {}
        steps = 0
        while frontier:
            node, path = frontier.pop()
            for column in self.inputs.get(node, ()):
                found.setdefault(column, {})[path] = None
            for (source, step), _ in self.edges.get(node, {}).items():
                walked = (source, compose(path, step))
                if walked not in seen:
                    seen.add(walked)
                    frontier.append(walked)
            steps += 1
            if steps % 4096 == 0:
                self.check_time()
        return _sorted(found)

    def dataset_sources(self) -> list[ColumnSource]:
        """The input columns the whole result depends on."""
        merged: dict[InputColumn, dict[Transformation, None]] = {}
        for node in self.dataset_nodes:
            for source in self.sources(node):
                merged.setdefault(source.column, {}).update(dict.fromkeys(source.transformations))
        return _sorted(merged)


def merge_sources(*groups: Iterable[ColumnSource]) -> list[ColumnSource]:
    merged: dict[InputColumn, dict[Transformation, None]] = {}
    for group in groups:
        for source in group:
            merged.setdefault(source.column, {}).update(dict.fromkeys(source.transformations))
    return _sorted(merged)


def _sorted(found: dict[InputColumn, dict[Transformation, None]]) -> list[ColumnSource]:
    return [
        ColumnSource(column, tuple(sorted(transformations, key=sort_key)))
        for column, transformations in sorted(found.items(), key=lambda item: item[0])
    ]
