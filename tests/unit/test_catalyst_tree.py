"""The text the JVM-side tree walker writes, decoded into records without a JVM (the walker itself is tested
on real Spark by every integration test)."""

from __future__ import annotations

import pytest

from spark_lineage.errors import DecodeError
from spark_lineage.jvm.catalyst_tree import decode
from spark_lineage.plan import SKIPPED_EXPRESSION, Attribute, CatalystNode, Opaque

FIELDS = {
    "org.apache.spark.sql.catalyst.plans.logical.Project": ("projectList", "child"),
    "org.apache.spark.sql.catalyst.plans.logical.Join": ("left", "right", "joinType", "condition", "hint"),
    "org.apache.spark.sql.catalyst.expressions.Alias": ("child", "name"),
    "org.apache.spark.sql.catalyst.expressions.Literal": ("value", "dataType"),
}


def _names(class_name: str) -> tuple[str, ...]:
    return FIELDS.get(class_name, ())


def test_plan_nodes_with_outputs_children_and_expressions() -> None:
    # Join(left=R1, right=R2, Inner, Some(condition)); the children are its first two fields.
    text = (
        "{~l.Join;7;@1:1:a2:1:b;"
        "{~x.LogicalRDD;11;@1:1:a;[(~e.AttributeReference;#1;s1:a)]|}"
        "{~x.LogicalRDD;12;@2:1:b;[(~e.AttributeReference;#2;s1:b)]|}"
        "o~c.plans.Inner$;"
        "(~e.EqualTo;(~e.AttributeReference;#1;s1:a)(~e.AttributeReference;#2;s1:b))"
        "o~c.plans.logical.JoinHint;"
        "|11;12;}"
    )
    join = decode(text, _names)
    assert isinstance(join, CatalystNode) and join.is_plan
    assert join.simple_name == "Join"
    assert join.output == (Attribute(1, "a"), Attribute(2, "b"))
    left, right = join.children
    assert (left.index, right.index, join.index) == (1, 2, 0)  # numbered in the order the walk opened them
    assert join.fields["left"] is left and join.fields["right"] is right
    assert join.fields["joinType"] == Opaque("org.apache.spark.sql.catalyst.plans.Inner$")
    condition = join.node("condition")
    assert condition is not None and [n.expr_id for n in condition.sub_nodes()] == [1, 2]
    assert [leaf.simple_name for leaf in join.leaves()] == ["LogicalRDD", "LogicalRDD"]


def test_strings_are_counted_in_code_points_and_may_hold_anything() -> None:
    name = "a;b}) #1 😀\n"
    text = f"(~e.Alias;#9;(~e.Literal;v1;o~t.IntegerType$;)s{len(name)}:{name})"
    alias = decode(text, _names)
    assert isinstance(alias, CatalystNode) and alias.expr_id == 9
    assert alias.fields["name"] == name
    assert alias.node("child") is not None and alias.node("child").fields["value"] == 1  # type: ignore[union-attr]


def test_the_expressions_a_plan_node_holds_may_carry_their_sql() -> None:
    """With descriptions on, the walker writes ``qs<n>:<sql>`` after the class and id of each expression a plan
    node holds; the sub-expressions within carry none."""
    sql = "(t1.a + 1) AS `x;y`"
    text = (
        f"{{~l.Project;3;@9:3:x;y;[(~e.Alias;#9;qs{len(sql)}:{sql}(~e.Add;(~e.AttributeReference;#1;s1:a)"
        "(~e.Literal;v1;o~t.IntegerType$;)vfalse;)s3:x;y)]{~l.OneRowRelation;4;|}|4;}"
    )
    project = decode(text, _names)
    assert isinstance(project, CatalystNode)
    (alias,) = project.nodes("projectList")
    assert (alias.expr_id, alias.sql, alias.fields["name"]) == (9, sql, "x;y")
    assert [node.sql for node in alias.sub_nodes()] == [None]
    assert CatalystNode.from_dict(alias.to_dict()).sql == sql  # kept in recorded fixtures


def test_output_columns_may_carry_their_types_and_metadata() -> None:
    """``&`` instead of ``@``: each output column's data type name and metadata JSON follow its name."""
    metadata = '{"comment":"a;b:c"}'
    text = f"{{~l.OneRowRelation;4;&1:1:a7:integer2:{{}}2:3:d;e13:decimal(10,2){len(metadata)}:{metadata};|}}"
    relation = decode(text, _names)
    assert isinstance(relation, CatalystNode)
    assert relation.output == (
        Attribute(1, "a", "integer", "{}"),
        Attribute(2, "d;e", "decimal(10,2)", metadata),
    )
    again = CatalystNode.from_dict(relation.to_dict())
    assert again.output == relation.output


@pytest.mark.parametrize("text", ["(~e.Alias;#9;q1:x)", "(~e.Alias;#9;qs9:x)"])
def test_sql_text_that_is_not_a_counted_string_is_refused(text: str) -> None:
    with pytest.raises(DecodeError):
        decode(text, _names)


def test_values_tuples_options_and_sequences_that_are_not_walked() -> None:
    text = "(~e.Literal;<v2.5;vtrue;NEOverwrite;e42;>z~x.UnsafeRow;1000000;)"
    literal = decode(text, lambda name: ("value", "rows"))
    assert isinstance(literal, CatalystNode)
    assert literal.fields == {
        "value": (2.5, True, None, "Overwrite", 42),
        "rows": Opaque("org.apache.spark.sql.execution.UnsafeRow", 1000000),
    }


def test_a_plan_read_for_its_shape_only_has_no_expressions() -> None:
    project = decode("{~l.Project;3;[xx]{~l.OneRowRelation;4;|}|4;}", _names)
    assert isinstance(project, CatalystNode)
    assert project.fields["projectList"] == [SKIPPED_EXPRESSION, SKIPPED_EXPRESSION]
    assert project.output == () and [c.simple_name for c in project.children] == ["OneRowRelation"]


@pytest.mark.parametrize(
    "text",
    [
        "{~l.Project;3;[]",  # ends early
        "{~l.Project;3;|9;}",  # a child that is not among the fields
        "(~e.Alias;#1;)extra",  # text after the value
        "?",  # an unknown tag
    ],
)
def test_text_that_is_not_the_walkers_is_refused(text: str) -> None:
    with pytest.raises(DecodeError):
        decode(text, _names)


def test_nodes_held_in_nested_sequences_and_tuples_are_found_in_order() -> None:
    def attribute(expr_id: int) -> CatalystNode:
        return CatalystNode("org.apache.spark.sql.catalyst.expressions.AttributeReference", {}, expr_id=expr_id)

    first, second, third, fourth, fifth = (attribute(expr_id) for expr_id in range(1, 6))
    node = CatalystNode(
        "org.apache.spark.sql.catalyst.expressions.CaseWhen",
        {
            "branches": [(first, second), [None, "text", 7, (third,)]],
            "elseValue": fourth,
            "nothing": [],
            "last": (Opaque("scala.None$"), [[fifth]]),
        },
    )
    assert node.sub_nodes() == (first, second, third, fourth, fifth)
    assert node.nodes("branches") == [first, second, third]
    assert node.nodes("elseValue") == [fourth]
    assert node.nodes("nothing") == [] and node.nodes("missing") == []
    assert [n.expr_id for n in node.walk()] == [None, 1, 2, 3, 4, 5]
