"""The lowering pass: recurrent layers become scans of primitives (golden listings of one GRU and one LSTM,
reviewed by hand), each scan checked against Keras through the numpy reference, and name clashes refused."""

from __future__ import annotations

import numpy as np
import pytest

from nnsql.export.compile import to_ir
from nnsql.export.errors import ExportError
from nnsql.export.ir import graph as ir
from nnsql.export.ir import lowering, reference
from tests import zoo
from tests.golden.graphs import check_golden


def recurrent(
    cell: str, units: int = 2, features: int = 2, gates: int = 3, bias_rows: int = 2
) -> ir.Recurrent:
    generator = np.random.default_rng(3)
    return ir.Recurrent(
        name=cell,
        inputs=("sequence",),
        cell=cell,
        kernel=ir.Weights(generator.normal(size=(features, gates * units))),
        recurrent_kernel=ir.Weights(generator.normal(size=(units, gates * units))),
        bias=ir.Weights(generator.normal(size=(bias_rows, gates * units))),
        steps=4,
    )


@pytest.mark.parametrize(
    ("node", "golden"),
    [(recurrent("gru"), "lowered_gru.txt"), (recurrent("lstm", gates=4, bias_rows=1), "lowered_lstm.txt")],
)
def test_lowered_ir_golden_text(node, golden):
    graph = ir.Graph(
        inputs=(ir.TensorSpec("sequence", (4, 2)),), nodes=tuple(lowering.lower([node])), output=node.name
    )
    check_golden(graph.text() + "\n", golden)


@pytest.mark.parametrize("name", ["gru", "gru_reset_before", "lstm_masked", "simple_rnn", "stacked_masked"])
def test_lowered_scans_match_keras_in_the_reference(name):
    model = zoo.build(name)
    graph = to_ir(model, target="reference")
    assert not any(isinstance(node, ir.Recurrent) for node in graph.all_nodes())
    (x,) = zoo.rows(model, 60)
    assert np.abs(reference.run(graph, x) - model.predict(x, verbose=0)).max() <= 1e-5


def test_a_layer_named_like_a_derived_value_is_refused():
    clash = ir.Dense(name="gru_x", inputs=("gru",), kernel=ir.Weights(np.eye(2)))
    with pytest.raises(ExportError, match="clash with names the lowering derives: gru_x"):
        lowering.lower([recurrent("gru"), clash])
