"""The shape of the Spark SQL the generator writes, read from its text (no Spark needed).

Spark types a `transform` from its lambda's body and a `[0]` from both the type and the nullability of
what it indexes: values bound one inside another's lambda body cost Spark time exponential in their
number, at planning and at each interpreted `[0]` (export/spark/bindings.py). So the lambda bodies
must nest no deeper than a bound the number of layers, of stacked GRUs or of steps does not change."""

from __future__ import annotations

import re

import keras
import pytest

from nnsql.export.compile import to_ir
from nnsql.export.spark.generator import SparkGenerator

# The input's binding, a group of nested bindings (bindings.GROUP, 6 nodes), a scan's aggregate, a group
# of the step's bindings, and a node's own lambdas (a unit's `_u` and its sum; a softmax nests 4, outside
# any scan).
DEEPEST = 1 + 6 + 1 + 6 + 2
TOKENS = re.compile(r"'(?:[^'\\]|\\.)*'|->|[(),]")  # string literals (the weights' JSON) are skipped


def lambda_depth(sql: str) -> int:
    """The deepest nesting of lambda bodies: a body runs from its `->` to the `,` or `)` that ends
    the argument it is in."""
    depth = deepest = 0
    bodies = [0]  # per open parenthesis: the lambda bodies begun at its level
    for token in TOKENS.findall(sql):
        if token == "(":
            bodies.append(0)
        elif token == "->":
            bodies[-1] += 1
            depth += 1
            deepest = max(deepest, depth)
        elif token in ",)":
            depth -= bodies[-1]
            bodies[-1] = 0
            if token == ")":
                bodies.pop()
    return deepest


def test_lambda_depth_reads_nesting_in_bodies_not_in_arguments():
    nested = "transform(array(1), a -> transform(array(a), b -> b)[0])[0]"
    composed = "transform(array(transform(array(1), a -> a)[0]), b -> b)[0]"
    literal = "transform(x, a -> 'b -> (c -> d')"
    assert (lambda_depth(nested), lambda_depth(composed), lambda_depth(literal)) == (2, 1, 1)


def dense_stack(layers: int) -> keras.Model:
    keras.utils.set_random_seed(1)
    x = features = keras.Input((6,), name="features")
    for _ in range(layers):
        x = keras.layers.Dense(5, activation="tanh")(x)
    return keras.Model(features, keras.layers.Dense(3, activation="softmax")(x))


def gru_stack(layers: int, steps: int) -> keras.Model:
    keras.utils.set_random_seed(1)
    x = readings = keras.Input((steps, 3), name="readings")
    for layer in range(layers):
        x = keras.layers.GRU(4, return_sequences=layer < layers - 1)(x)
    x = keras.layers.Dense(4, activation="relu")(x)
    return keras.Model(readings, keras.layers.Dense(3, activation="softmax")(x))


def deepest(model: keras.Model) -> int:
    graph = to_ir(model, target="spark", classes=("a", "b", "c"))
    return max(lambda_depth(statement) for statement in SparkGenerator(graph, "m", 1).statements())


@pytest.mark.parametrize(
    ("family", "sizes"),
    [
        ("dense layers", [dense_stack(layers) for layers in (8, 30)]),
        ("stacked GRUs, steps", [gru_stack(4, 10), gru_stack(10, 10), gru_stack(4, 800)]),
    ],
)
def test_lambda_bodies_nest_no_deeper_as_the_model_grows(family, sizes):
    depths = [deepest(model) for model in sizes]
    assert max(depths) <= DEEPEST, f"{family}: lambda bodies nest {depths} deep"
