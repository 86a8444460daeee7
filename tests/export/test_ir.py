import numpy as np

from nnsql.export.ir import graph as ir


def dense(name: str, kernel: np.ndarray, activation: str = "linear") -> ir.Dense:
    return ir.Dense(name=name, inputs=("x",), kernel=ir.Weights(kernel), activation=activation)


def test_weights_compare_by_value_and_are_read_only():
    a = ir.Weights(np.arange(6.0).reshape(2, 3))
    b = ir.Weights(np.arange(6.0).reshape(2, 3))
    assert a == b and hash(a) == hash(b)
    assert a != ir.Weights(np.zeros((2, 3)))
    assert a.array.dtype == np.float32 and not a.array.flags.writeable


def test_nodes_are_frozen_values():
    first = dense("d", np.ones((2, 2)))
    assert first == dense("d", np.ones((2, 2)))
    assert first != dense("d", np.ones((2, 2)), "relu")
    assert (first.in_features, first.units) == (2, 2)


def test_sha256_changes_with_any_weight_or_activation():
    spec = (ir.TensorSpec("x", (2,)),)
    base = ir.Graph(spec, (dense("d", np.ones((2, 3))),), "d", ("a", "b", "c"))
    same = ir.Graph(spec, (dense("d", np.ones((2, 3))),), "d", ("a", "b", "c"))
    changed_weight = np.ones((2, 3))
    changed_weight[1, 2] = 1.0001
    assert base.sha256() == same.sha256()
    assert base.sha256() != ir.Graph(spec, (dense("d", changed_weight),), "d").sha256()
    assert base.sha256() != ir.Graph(spec, (dense("d", np.ones((2, 3)), "relu"),), "d").sha256()


def test_named_weights_lists_kernel_and_bias():
    node = ir.Dense(name="d", inputs=("x",), kernel=ir.Weights(np.ones((2, 3))), bias=ir.Weights(np.ones(3)))
    graph = ir.Graph((ir.TensorSpec("x", (2,)),), (node,), "d")
    assert [name for name, _ in graph.named_weights()] == ["d.kernel", "d.bias"]


def test_weights_derived_in_float64_keep_their_digits_for_float64_targets():
    """A value computed in float64 (1/sqrt(variance), W1·W2) stays float64 for DuckDB beside its float32
    rounding for ONNX and Oracle; a Keras weight (float32) has no other digits. Two versions whose float64
    digits differ are different weights and different digests."""
    derived = np.array([[1 / np.sqrt(3.0), 0.1]])
    weights = ir.Weights(derived)
    assert weights.array.dtype == np.float32 and np.array_equal(weights.float64, derived)
    assert ir.Weights(derived.astype(np.float32)).wide is None  # what Keras holds: exact in float32
    nudged = ir.Weights(derived + np.array([[0.0, 1e-12]]))
    assert np.array_equal(nudged.array, weights.array) and nudged != weights
    spec = (ir.TensorSpec("x", (1,)),)
    assert (
        ir.Graph(spec, (dense("d", derived),), "d").sha256()
        != ir.Graph(spec, (dense("d", nudged.float64),), "d").sha256()
    )
