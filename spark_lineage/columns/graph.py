"""The dependency graph of one query's columns, and walking it from an output column to its sources.

Nodes are expression ids (Spark's ``ExprId``): every column a plan node produces has one. An edge says
"evaluating this column reads that one, through this transformation". Leaf columns are tied to the input
columns they stand for. Dataset-level dependencies (a join condition, a filter, the grouping keys, the sort
keys) are pseudo nodes with negative ids.

With descriptions on (``columnLineage.descriptionsEnabled``), an edge also names, as text, the column or
condition it defines (its *output*: ``ident`` for ``t1.a AS ident``), and its transformation carries the
SQL of the expression it comes from. A walk describes its path as openlineage-spark does: it starts from the
output column's name (or the dataset dependency's clause, ``INNER JOIN ON ...``), and each step writes its
own description in place of its output's text (:func:`~spark_lineage.columns.transformations.follow`).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable

from spark_lineage.columns.transformations import IDENTITY, described, follow, sort_key
from spark_lineage.errors import BudgetExceededError
from spark_lineage.lineage import ColumnSource, InputColumn, Transformation

MAX_EDGES = 1_000_000
"""Beyond this many dependencies a plan gets no column lineage (openlineage-spark's limit too)."""


class ColumnGraph:
    """Column dependencies of one query."""

    def __init__(self, deadline: float | None = None, *, descriptions: bool = False) -> None:
        self.inputs: dict[int, set[InputColumn]] = defaultdict(set)
        self.edges: dict[int, dict[tuple[int, Transformation, str], None]] = defaultdict(dict)
        self.dataset_nodes: dict[int, str] = {}
        """The pseudo columns, each with the clause it stands for (with descriptions on)."""
        self.descriptions = descriptions
        """Whether edges carry descriptions (the rules ask, so that without them nothing is described)."""
        self._edge_count = 0
        self._next_pseudo = -1
        self._deadline = deadline

    def add_input(self, expr_id: int, column: InputColumn) -> None:
        self.inputs[expr_id].add(column)

    def add_edge(self, target: int, source: int, transformation: Transformation, output: str = "") -> None:
        """``target`` reads ``source`` through ``transformation``; ``output`` is the text ``target`` stands
        for in descriptions."""
        if target == source:
            return
        if not output and transformation.description:  # nothing to write it in place of: not described
            transformation = described(transformation, "")
        edges = self.edges[target]
        key = (source, transformation, output)
        if key not in edges:
            self._edge_count += 1
            if self._edge_count > MAX_EDGES:
                raise BudgetExceededError(f"more than {MAX_EDGES} column dependencies")
            edges[key] = None

    def new_dataset_node(self, clause: str = "") -> int:
        """A pseudo column standing for the whole result (a join condition, a filter, ...); ``clause`` is how
        descriptions write it (``WHERE (a > 1)``)."""
        node = self._next_pseudo
        self._next_pseudo -= 1
        self.dataset_nodes[node] = clause if self.descriptions else ""
        return node

    def text(self, text: str | None) -> str:
        """``text`` where descriptions are on, else the empty description."""
        return (text or "") if self.descriptions else ""

    def check_time(self) -> None:
        if self._deadline is not None and time.monotonic() > self._deadline:
            raise BudgetExceededError("the column lineage time budget ran out")

    def sources(self, expr_id: int, name: str = "") -> list[ColumnSource]:
        """The input columns ``expr_id`` depends on, each with every transformation through which it does;
        ``name`` is the output column's (or the dataset dependency's) text, where descriptions start."""
        name = self.text(name)
        start = (expr_id, described(IDENTITY, name), name)
        seen = {start}
        frontier = [start]
        found: dict[InputColumn, dict[Transformation, None]] = {}
        steps = 0
        while frontier:
            node, path, _ = frontier.pop()
            for column in self.inputs.get(node, ()):
                found.setdefault(column, {})[path] = None
            for (source, step, output), _ in self.edges.get(node, {}).items():
                walked = (source, follow(path, step, output), output)
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
        for node, clause in self.dataset_nodes.items():
            for source in self.sources(node, clause):
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
