"""Keras scored eagerly (export/frontend/keras_run.py) gives what `model.predict` gives, on the zoo, the
outside zoo, their models and a CNN in chunks; exports no longer trace `model.predict`; the gate's float32
bound scores its three perturbed draws in one call.

The bound asserted is 4 float32 units in the last place relative to max(1, |value|): the two routes run
the same kernels on the same weights, so they can differ only where a kernel sums in another order for
another batch size (a matrix product blocked differently), which moves a float32 value by an ulp or two.
A wrong mask, training-mode Dropout or a lost state moves values by 1e-3 or more."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from nnsql.export.frontend import float64, keras_run
from nnsql.export.frontend.model import load_model
from nnsql.export.publish.gate import DRAWS, Gate
from nnsql.export.publish.pipeline import joined
from tests import models, outside_zoo, their_models, zoo
from tests.export.executors import DuckDBExecutor

ULPS = 4 * 2.0**-23


def assert_like_predict(model, feeds: list[np.ndarray]) -> None:
    expected = np.asarray(joined(model.predict(feeds if len(feeds) > 1 else feeds[0], verbose=0)))
    actual = keras_run.run_joined(model, feeds)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    missing = np.isnan(expected)  # a masked average over a fully padded row: 0/0 in both routes
    assert (np.isnan(actual) == missing).all()
    gap = np.abs(np.where(missing, 0.0, actual.astype(np.float64) - expected))
    assert (gap <= ULPS * np.maximum(1.0, np.abs(np.where(missing, 0.0, expected)))).all()


@pytest.mark.parametrize("name", [*zoo.ZOO, *zoo.AT_SCALE])
def test_the_zoo_scores_eagerly_as_predict_does(zoo_model, name):
    _, path = zoo_model(name)
    loaded = load_model(path)  # as the exporter holds it
    rows = zoo.rows(loaded, 200)
    assert_like_predict(loaded, rows)
    if name in zoo.AT_SCALE:  # the gate's rows at raw physics scale
        assert_like_predict(loaded, [row * 1e4 for row in rows])


@pytest.mark.parametrize("name", list(outside_zoo.ZOO))
def test_the_outside_zoo_scores_eagerly_as_predict_does(name, tmp_path):
    model = load_model(models.save(outside_zoo.build(name), tmp_path))
    assert_like_predict(model, outside_zoo.rows(name, model))


@pytest.mark.parametrize("name", list(their_models.THEIRS))
def test_their_models_score_eagerly_as_predict_does(name, tmp_path):
    """Keras 3 and tf.keras (Keras 2) models, token ids in float32 inputs, two heads."""
    theirs = their_models.THEIRS[name]
    assert_like_predict(load_model(theirs.build(tmp_path)), [theirs.rows(120)])


def test_a_cnn_on_1000_rows_is_scored_in_chunks_as_predict_scores_it():
    model = models.mnist_cnn()
    rows = np.random.default_rng(3).random((1000, *model.inputs[0].shape[1:]), dtype=np.float32)
    assert 1 < keras_run.chunk_rows([rows]) < 1000 and 1000 % keras_run.chunk_rows([rows])  # a partial chunk
    assert_like_predict(model, [rows])


def test_the_float64_predictor_is_keras_in_float64(zoo_model):
    """The float64 route equals the rebuilt float64 model's own predict to float64 rounding."""
    model, _ = zoo_model("every_cell")
    rows = zoo.rows(model, 50, empty=False)[0] * 1e4  # no fully masked row (0/0)
    rebuilt = float64.float64_model(model)
    expected = np.asarray(rebuilt.predict(rows.astype(np.float64), verbose=0)).reshape(50, -1)
    actual = float64.predictor(model)([rows])
    assert actual.dtype == np.float64
    assert (np.abs(actual - expected) <= 1e-12 * np.maximum(1.0, np.abs(expected))).all()


def test_an_export_never_traces_model_predict(zoo_model, tmp_path, monkeypatch):
    """Keras's answers come from eager calls: predict (a traced graph per model and batch shape) is
    never called by the duckdb export, its parity gate included."""
    _, path = zoo_model("gru")
    called: list[str] = []
    predict = keras.Model.predict

    def counted(self, *args, **kwargs):
        called.append(self.name)
        return predict(self, *args, **kwargs)

    monkeypatch.setattr(keras.Model, "predict", counted)
    assert DuckDBExecutor(tmp_path).export(path, "zoo") == 0
    assert called == []


def test_the_float32_bound_scores_its_draws_in_one_call(zoo_model):
    """The three perturbed draws of a row go to Keras in float64 as one batch, and give the same bound as
    the draws scored one by one."""
    model, _ = zoo_model("every_activation")
    rows = zoo.rows(model, 4)[0] * 1e3
    exact = float64.predictor(model)
    calls: list[int] = []

    def counted(feeds: list[np.ndarray]) -> np.ndarray:
        calls.append(len(feeds[0]))
        return exact(feeds)

    keras_scores = keras_run.run_joined(model, [rows]).astype(np.float64)
    gate = Gate(
        keras=keras_scores,
        float64=counted,
        feeds=[rows],
        floats=[True],
        at_scale=np.ones(4, bool),
        masked=np.zeros(4, bool),
        tolerance=1e-5,
        float32=True,
    )
    bound = gate.float32_bound(2)
    assert calls == [1, DRAWS]  # the row itself, then its draws together
    one_by_one = np.zeros(keras_scores.shape[1])
    generator = np.random.default_rng(2)
    for _ in range(DRAWS):
        nearby = rows[2:3] * (1 + 2.0**-23 * generator.uniform(-1, 1, rows[2:3].shape))
        one_by_one = np.maximum(one_by_one, np.abs(exact([nearby])[0] - gate.exact(np.array([2]))[0]))
    moved = gate.moved(np.array([2]), gate.exact(np.array([2])))
    assert moved is not None and np.allclose(moved[0], one_by_one, rtol=1e-6, atol=1e-300)
    assert bound > 0.0


def test_a_long_recurrence_is_traced_once_and_scores_as_predict_does():
    """Called eagerly, a recurrent layer loops over its steps in Python: CERN's Inclusive Classifier (801
    steps) made one Oracle ONNX export take minutes. Beyond EAGER_STEPS steps the model goes through
    `model.predict` (one trace); short sequences stay eager."""
    import keras

    def tagger(steps: int) -> keras.Model:
        keras.utils.set_random_seed(3)
        inputs = keras.Input(shape=(steps, 3))
        hidden = keras.layers.GRU(4)(keras.layers.Masking(0.0)(inputs))
        return keras.Model(inputs, keras.layers.Dense(2, activation="softmax")(hidden))

    rows = np.random.default_rng(0).random((5, keras_run.EAGER_STEPS + 1, 3), dtype=np.float32)
    long, short = tagger(keras_run.EAGER_STEPS + 1), tagger(8)
    assert keras_run.long_recurrence(long, [rows])
    assert not keras_run.long_recurrence(short, [rows[:, :8]])
    assert np.array_equal(keras_run.run_joined(long, [rows]), long.predict(rows, verbose=0))
