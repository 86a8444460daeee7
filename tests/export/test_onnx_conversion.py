"""The ONNX conversion (export/onnx/emit.py): tf2onnx's optimisers run on the graph itself, not on a copy
of it per optimiser and pass, and a conversion whose optimiser raises still gives a working model."""

from __future__ import annotations

import copy
import os
import types

import keras
import numpy as np
import onnxruntime
import pytest
import tf2onnx.optimizer

from nnsql.export.onnx import emit


@pytest.fixture(scope="module")
def model() -> keras.Model:
    keras.utils.set_random_seed(3)
    inputs = keras.Input((7, 3))
    hidden = keras.layers.GRU(5)(keras.layers.Masking()(inputs))
    built = keras.Model(inputs, keras.layers.Dense(4, activation="softmax")(hidden))
    built.predict(np.zeros((1, 7, 3), np.float32), verbose=0)
    return built


def scores(path, rows: np.ndarray) -> np.ndarray:
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: rows})[0]


def rows() -> np.ndarray:
    return np.random.default_rng(0).normal(size=(16, 7, 3)).astype(np.float32)


def test_the_optimisers_copy_no_graph(model, tmp_path, monkeypatch):
    """Guarded, tf2onnx deep-copies the whole graph (weights included) before each optimiser on each pass:
    a third of a conversion's CPU, for nothing when no optimiser raises."""
    copied: list[str] = []
    deepcopy = copy.deepcopy

    def counting(value, memo=None):
        if isinstance(value, tf2onnx.graph.Graph):
            copied.append(type(value).__name__)
        return deepcopy(value, memo)

    # The optimiser driver's own `copy` (the loop rewriters copy their bodies' graphs, rightly).
    monkeypatch.setattr(tf2onnx.optimizer, "copy", types.SimpleNamespace(deepcopy=counting))
    emit.convert(model, tmp_path / "model.onnx")
    assert copied == []
    np.testing.assert_allclose(scores(tmp_path / "model.onnx", rows()), model(rows()), atol=1e-5)


def test_an_optimiser_that_raises_leaves_a_working_model(model, tmp_path, monkeypatch):
    """Unguarded, an optimiser that raises stops the conversion; it is converted again, guarded, and the
    optimiser's failure is skipped as tf2onnx always did."""

    class Raising:
        graph_been_opt = False

        def optimize(self, graph, iteration):
            raise RuntimeError("an optimiser that fails on this graph")

    optimisers = dict(tf2onnx.optimizer._optimizers)
    monkeypatch.setattr(tf2onnx.optimizer, "_optimizers", {"raising": Raising, **optimisers})
    emit.convert(model, tmp_path / "model.onnx")
    np.testing.assert_allclose(scores(tmp_path / "model.onnx", rows()), model(rows()), atol=1e-5)
    assert emit.GUARD_VARIABLE not in os.environ
