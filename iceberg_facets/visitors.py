"""pyiceberg's trees as this library's plain data, through pyiceberg's own visitors: a schema as the columns
of a ``schema`` facet with Spark's type names, and a row filter as Iceberg's expression JSON, as Iceberg's
scan reports write it (values masked), so that both engines describe one table and one scan alike.

Imported where pyiceberg is (:mod:`iceberg_facets.instrument` asks for it only when converting pyiceberg's
objects).
"""

from __future__ import annotations

import zlib
from typing import Any, Union, get_origin

from pyiceberg.expressions import (
    BooleanExpression,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNaN,
    IsNull,
    LessThan,
    LessThanOrEqual,
    NotEqualTo,
    NotIn,
    NotNaN,
    NotNull,
    NotStartsWith,
    StartsWith,
)
from pyiceberg.expressions.visitors import BooleanExpressionVisitor
from pyiceberg.expressions.visitors import visit as visit_expression
from pyiceberg.schema import Schema, SchemaVisitor
from pyiceberg.schema import visit as visit_schema
from pyiceberg.types import (
    DecimalType,
    FixedType,
    IcebergType,
    ListType,
    MapType,
    NestedField,
    PrimitiveType,
    StructType,
)

from spark_lineage.lineage import SchemaField

# Iceberg primitive type -> the name Spark gives it, so that a table's schema facet reads the same from Spark
# and from pyiceberg.
_SPARK_TYPE_NAMES = {
    "boolean": "boolean",
    "int": "integer",
    "long": "long",
    "float": "float",
    "double": "double",
    "date": "date",
    "time": "long",
    "timestamp": "timestamp_ntz",
    "timestamp_ns": "timestamp_ntz",
    "timestamptz": "timestamp",
    "timestamptz_ns": "timestamp",
    "string": "string",
    "uuid": "string",
    "binary": "binary",
}


_Type = tuple[str, tuple[SchemaField, ...]]
"""A type as a schema field has it, before the field's name: its Spark name and its nested fields."""


class _SparkSchema(SchemaVisitor[Union[list[SchemaField], SchemaField, _Type]]):
    """An Iceberg schema's columns with Spark's type names (``int`` is ``integer``, ``list`` is ``array``)."""

    def schema(self, schema: Schema, struct_result: Any) -> list[SchemaField]:
        return list(struct_result)

    def struct(self, struct: StructType, field_results: list[Any]) -> list[SchemaField]:
        return list(field_results)

    def field(self, field: NestedField, field_result: Any) -> SchemaField:
        return _named(field.name, field_result)

    def list(self, list_type: ListType, element_result: Any) -> _Type:
        return "array", (_named("_element", element_result),)

    def map(self, map_type: MapType, key_result: Any, value_result: Any) -> _Type:
        return "map", (_named("key", key_result), _named("value", value_result))

    def primitive(self, primitive: PrimitiveType) -> _Type:
        if isinstance(primitive, DecimalType):
            return "decimal", ()
        if isinstance(primitive, FixedType):
            return "binary", ()
        text = str(primitive)
        return _SPARK_TYPE_NAMES.get(text, text), ()


def _named(name: str, result: Any) -> SchemaField:
    """A field of a visited type: a struct's fields, or a list's, map's or primitive's ``(type, nested)``."""
    if isinstance(result, list):
        return SchemaField(name, "struct", tuple(result))
    kind, nested = result
    return SchemaField(name, kind, nested)


def spark_schema(schema: Schema | IcebergType) -> list[SchemaField]:
    """An Iceberg schema's columns with the names Spark gives their types."""
    result = visit_schema(schema, _SparkSchema())
    return result if isinstance(result, list) else [_named("value", result)]


_PREDICATE_TYPES: dict[type[Any], str] = {
    EqualTo: "eq",
    NotEqualTo: "not-eq",
    LessThan: "lt",
    LessThanOrEqual: "lt-eq",
    GreaterThan: "gt",
    GreaterThanOrEqual: "gt-eq",
    StartsWith: "starts-with",
    NotStartsWith: "not-starts-with",
    In: "in",
    NotIn: "not-in",
    IsNull: "is-null",
    NotNull: "not-null",
    IsNaN: "is-nan",
    NotNaN: "not-nan",
}
"""Each predicate (unbound; a bound one by its ``as_unbound``) and its type in Iceberg's expression JSON."""


class _ExpressionJson(BooleanExpressionVisitor[Any]):
    """A row filter in Iceberg's expression JSON layout, its values masked as Iceberg masks them in scan reports
    (``(2-digit-int)``), so that no data values leave the process in lineage."""

    def visit_true(self) -> Any:
        return True

    def visit_false(self) -> Any:
        return False

    def visit_not(self, child_result: Any) -> Any:
        return {"type": "not", "child": child_result}

    def visit_and(self, left_result: Any, right_result: Any) -> Any:
        return {"type": "and", "left": left_result, "right": right_result}

    def visit_or(self, left_result: Any, right_result: Any) -> Any:
        return {"type": "or", "left": left_result, "right": right_result}

    def visit_unbound_predicate(self, predicate: Any) -> Any:
        return _predicate(predicate, type(predicate))

    def visit_bound_predicate(self, predicate: Any) -> Any:
        return _predicate(predicate, predicate.as_unbound)


def _predicate(predicate: Any, kind: Any) -> Any:
    name = _PREDICATE_TYPES.get(get_origin(kind) or kind)  # pyiceberg 0.10's as_unbound is LessThan[L]
    if name is None:
        return str(predicate)
    term = predicate.term
    column = getattr(term, "name", None) or getattr(getattr(term, "field", None), "name", None) or str(term)
    result: dict[str, Any] = {"type": name, "term": column}
    if hasattr(predicate, "literals"):
        result["values"] = sorted(_masked(literal.value) for literal in predicate.literals)
    elif hasattr(predicate, "literal"):
        result["value"] = _masked(predicate.literal.value)
    return result


def expression_json(expression: BooleanExpression) -> Any:
    """A pyiceberg row filter in Iceberg's expression JSON layout, its values masked."""
    return visit_expression(expression, _ExpressionJson())


def _masked(value: Any) -> str:
    if isinstance(value, bool):
        return "(boolean)"
    if isinstance(value, int):
        return f"({len(str(abs(value)))}-digit-int)"
    if isinstance(value, float):
        return f"({len(str(int(abs(value))))}-digit-float)"
    return f"(hash-{zlib.crc32(str(value).encode()):08x})"
