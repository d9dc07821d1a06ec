"""The column graph's walk with descriptions, as openlineage-spark describes a path: from the output column's
name, each step's description written in place of the text it defines."""

from __future__ import annotations

from spark_lineage.columns.graph import ColumnGraph
from spark_lineage.columns.transformations import FILTER, IDENTITY, TRANSFORMATION, described
from spark_lineage.lineage import InputColumn
from spark_lineage.naming import DatasetIdentifier

SOURCE = InputColumn(DatasetIdentifier("file", "/data/t"), "a")


def _chain(descriptions: bool) -> ColumnGraph:
    # y = x AS y over x = (a + 1) AS x over the input column a (ids 3, 2, 1); a filter on a.
    graph = ColumnGraph(descriptions=descriptions)
    graph.add_input(1, SOURCE)
    graph.add_edge(3, 2, described(IDENTITY, graph.text("x AS y")), graph.text("y"))
    graph.add_edge(2, 1, described(TRANSFORMATION, graph.text("(a + 1) AS x")), graph.text("x"))
    where = graph.new_dataset_node("WHERE (a > 1)")
    graph.add_edge(where, 1, described(FILTER, graph.text("(a > 1)")), graph.text("(a > 1)"))
    return graph


def test_a_path_is_described_by_each_step_in_place_of_what_it_defines() -> None:
    graph = _chain(descriptions=True)
    ((source, (transformation,)),) = [(s.column, s.transformations) for s in graph.sources(3, "y")]
    assert source == SOURCE
    assert (transformation.subtype, transformation.description) == ("TRANSFORMATION", "(a + 1) AS x AS y")
    ((dataset,),) = [s.transformations for s in graph.dataset_sources()]
    assert (dataset.type, dataset.subtype, dataset.description) == ("INDIRECT", "FILTER", "WHERE (a > 1)")


def test_without_descriptions_nothing_is_described() -> None:
    graph = _chain(descriptions=False)
    ((transformation,),) = [s.transformations for s in graph.sources(3, "y")]
    assert transformation == TRANSFORMATION
    ((dataset,),) = [s.transformations for s in graph.dataset_sources()]
    assert dataset == FILTER


def test_a_step_that_names_no_output_is_not_described() -> None:
    """An edge with a description but no text it defines would write its description between every character
    of the path's (``str.replace`` of the empty string): it is kept undescribed instead."""
    graph = ColumnGraph(descriptions=True)
    graph.add_input(1, SOURCE)
    graph.add_edge(2, 1, described(IDENTITY, "a AS b"), "")
    ((transformation,),) = [s.transformations for s in graph.sources(2, "b")]
    assert transformation.description == "b"
