"""The transformation vocabulary of column lineage, and how transformations compose.

Composition follows openlineage-spark: along one path from an output column to an input column, the first
``INDIRECT`` transformation met wins; otherwise the strongest ``DIRECT`` one does (``AGGREGATION`` over
``TRANSFORMATION`` over ``IDENTITY``); masking is kept once any step masks. Within one expression the
description stays the expression's (:func:`compose`); from one expression to the next, the next one's
description is written in place of the text it defines (:func:`follow`), as openlineage-spark does.
"""

from __future__ import annotations

from dataclasses import replace

from spark_lineage.lineage import Transformation

DIRECT = "DIRECT"
INDIRECT = "INDIRECT"

IDENTITY = Transformation(DIRECT, "IDENTITY")
TRANSFORMATION = Transformation(DIRECT, "TRANSFORMATION")
MASKED_TRANSFORMATION = Transformation(DIRECT, "TRANSFORMATION", masking=True)
AGGREGATION = Transformation(DIRECT, "AGGREGATION")
CONDITIONAL = Transformation(INDIRECT, "CONDITIONAL")
SORT = Transformation(INDIRECT, "SORT")
GROUP_BY = Transformation(INDIRECT, "GROUP_BY")
JOIN = Transformation(INDIRECT, "JOIN")
FILTER = Transformation(INDIRECT, "FILTER")
WINDOW = Transformation(INDIRECT, "WINDOW")

# The order openlineage-spark ranks subtypes in; for DIRECT ones, earlier is stronger.
SUBTYPE_ORDER = {
    name: rank
    for rank, name in enumerate(
        ("AGGREGATION", "TRANSFORMATION", "IDENTITY", "CONDITIONAL", "SORT", "GROUP_BY", "JOIN", "FILTER", "WINDOW")
    )
}


def compose(outer: Transformation, inner: Transformation) -> Transformation:
    """What a step ``inner`` makes of a path that so far is ``outer``."""
    if outer.type == INDIRECT:
        picked = outer
    elif inner.type == INDIRECT or SUBTYPE_ORDER[inner.subtype] < SUBTYPE_ORDER[outer.subtype]:
        picked = inner
    else:
        picked = outer
    masking = outer.masking or inner.masking
    if picked.masking == masking and picked.description == outer.description:
        return picked
    return Transformation(picked.type, picked.subtype, masking, outer.description)


def described(transformation: Transformation, description: str) -> Transformation:
    """``transformation`` with this description."""
    if transformation.description == description:
        return transformation
    return replace(transformation, description=description)


def follow(path: Transformation, step: Transformation, output: str) -> Transformation:
    """What a walk's ``path`` becomes through an edge ``step`` that defines the text ``output``: typed as
    :func:`compose` types it, and described by the path's description with ``output`` replaced by the step's
    description (every occurrence, as text: ``ident`` through ``t1.a AS ident`` becomes ``t1.a AS ident``;
    with descriptions off all three are empty)."""
    composed = compose(path, step)
    return described(composed, path.description.replace(output, step.description))


def sort_key(transformation: Transformation) -> tuple[int, int, bool, str]:
    """A stable order for transformations in events: DIRECT before INDIRECT, then by subtype."""
    return (
        transformation.type != DIRECT,
        SUBTYPE_ORDER.get(transformation.subtype, len(SUBTYPE_ORDER)),
        transformation.masking,
        transformation.description,
    )
