"""The plan nodes no handler knows, for openlineage-spark's ``spark_unknown`` run facet.

With ``spark.openlineage.facets.spark_unknown.disabled=false``, openlineage-spark lists the root of a query's
optimized plan when none of its visitors made outputs of it, and each of the plan's leaves (Spark's
``collectLeaves``) when none made inputs of it, with the columns each reads and makes, so that a user sees
where lineage may be missing. Here a node is known when a handler claims its class and names datasets with
it (:attr:`~spark_lineage.handlers.base.NodeHandler.names_datasets`): ``LocalRelation``, ``Range`` and the
other leaves that hold no dataset are listed, as the reference lists them.

Each node is described as Spark's ``toJSON`` writes it (read with the plan when the facet is on); the columns
come from the plan's output, read with their data types (:class:`~spark_lineage.jvm.catalyst_tree.TreeDetail`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from spark_lineage.handlers import handler_for
from spark_lineage.lineage import UnknownNode, UnknownNodes
from spark_lineage.plan import Attribute, CatalystNode


def find_unknown(tree: CatalystNode, plan_json: str | None) -> UnknownNodes | None:
    """The root and leaves of ``tree`` no handler knows (``None`` when every one is known), described by the
    nodes of ``plan_json`` (the same plan as Spark's ``toJSON`` writes it) where it was read."""
    leaves = tree.leaves()
    described = _described(plan_json, len(leaves))
    root_json, leaves_json = described if described is not None else (None, [None] * len(leaves))
    output = None if _known(tree) else _entry(tree, root_json)
    inputs = tuple(_entry(leaf, text) for leaf, text in zip(leaves, leaves_json) if not _known(leaf))
    if output is None and not inputs:
        return None
    return UnknownNodes(output, inputs)


def _known(node: CatalystNode) -> bool:
    handler = handler_for(node.simple_name)
    return handler is not None and handler.names_datasets


def _entry(node: CatalystNode, description: Mapping[str, Any] | None) -> UnknownNode:
    read: dict[int, Attribute] = {}
    for child in node.children:
        for attribute in child.output:
            read.setdefault(attribute.expr_id, attribute)
    made = {attribute.expr_id: attribute for attribute in node.output}
    return UnknownNode(
        description if description is not None else {"class": node.class_name},
        tuple(read.values()),
        tuple(made.values()),
    )


def _described(plan_json: str | None, leaf_count: int) -> tuple[Mapping[str, Any], list[Mapping[str, Any]]] | None:
    """The root's and the leaves' objects in a plan's ``toJSON`` (its nodes in pre-order, each with its
    ``num-children``), when it holds as many leaves as the tree read."""
    if not plan_json:
        return None
    try:
        nodes = json.loads(plan_json)
    except ValueError:
        return None
    if not isinstance(nodes, list) or not nodes or not all(isinstance(n, dict) for n in nodes):
        return None
    leaves = [node for node in nodes if node.get("num-children") == 0]
    if len(leaves) != leaf_count:
        return None
    return nodes[0], leaves
