import numpy as np
import pytest

from nnsql.export.compile import to_ir
from nnsql.export.errors import ExportError, UnsupportedLayer
from nnsql.export.frontend.model import load_model
from nnsql.export.ir import graph as ir
from nnsql.export.ir import reference
from tests import models


def test_reference_mlp_becomes_two_dense_nodes_and_dropout_vanishes():
    graph = to_ir(models.cern_mlp(), target="duckdb")
    assert [node.kind for node in graph.nodes] == ["Dense", "Dense"]
    hidden, output = graph.nodes
    assert (hidden.in_features, hidden.units, hidden.activation) == (784, 100, "sigmoid")
    assert (output.units, output.activation, output.inputs) == (10, "softmax", ("hidden",))
    assert graph.inputs == (ir.TensorSpec("features", (784,)),)
    assert graph.classes == tuple(str(i) for i in range(10))


def test_functional_graph_keeps_every_kind_in_order():
    graph = to_ir(models.mixed_layers(), target="duckdb")
    kinds = [node.kind for node in graph.nodes]
    assert kinds[0] == "Reshape" and kinds[-1] == "ActivationNode"
    assert graph.inputs[0].shape == (8, 8)
    no_bias = graph.node("no_bias")
    assert isinstance(no_bias, ir.Dense) and no_bias.bias is None


@pytest.mark.parametrize("build", [models.cern_mlp, models.mixed_layers])
def test_ir_reproduces_keras_within_float32_tolerance(build):
    model = build()
    graph = to_ir(model, target="reference")
    shape = tuple(model.inputs[0].shape[1:])
    x = np.random.default_rng(0).random((64, *shape), dtype=np.float32)
    expected = model.predict(x, verbose=0)
    np.testing.assert_allclose(reference.run(graph, x), expected, atol=1e-5, rtol=0)


def test_unsupported_layer_names_layer_and_target():
    with pytest.raises(UnsupportedLayer) as caught:
        to_ir(models.with_unsupported_layer(), target="duckdb")
    message = str(caught.value)
    assert "'conv3d' (Conv3D)" in message and "'duckdb'" in message


def test_unsupported_activation_names_it():
    with pytest.raises(UnsupportedLayer, match=r"'sparsemax_dense' \(Dense\).*'oracle'.*sparsemax"):
        to_ir(models.with_unsupported_activation(), target="oracle")


def test_class_labels_must_match_outputs():
    with pytest.raises(ExportError, match="2 class labels for a probabilities model with 10 outputs"):
        to_ir(models.cern_mlp(), target="duckdb", classes=("a", "b"))


@pytest.mark.parametrize(
    ("content", "suffix", "message"),
    [
        (None, ".keras", "model file not found"),
        (b"not a zip", ".keras", "not a valid .keras file"),
        (b"hello", ".txt", "not a Keras model"),
    ],
)
def test_bad_model_files_get_one_line_errors(tmp_path, content, suffix, message):
    path = tmp_path / f"model{suffix}"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ExportError, match=message) as caught:
        load_model(path)
    assert "\n" not in str(caught.value)


def test_a_directory_is_not_a_model(tmp_path):
    with pytest.raises(ExportError, match="is a directory"):
        load_model(tmp_path)
