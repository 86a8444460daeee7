"""Models as users save them with tf.keras (Keras 2, the tf-keras package): legacy HDF5 `.h5` and SavedModel
directories, written here in CERN's style (`Input(shape=(14))`, Masking + GRU + concatenate, `time_major`
in the GRU config), load and export with parity; a file of no known format gets one line."""

from __future__ import annotations

import re
from functools import cache

import numpy as np
import pytest

from nnsql.export.errors import ExportError
from nnsql.export.frontend.model import is_legacy, load_model
from nnsql.export.onnx.__main__ import export as export_onnx
from tests import models
from tests.export.executors import DuckDBExecutor


@cache  # built once: the tests that score it against its file read the same model
def legacy_mlp(seed: int = 4):
    """The CERN MLP as a tf.keras script writes it (Sequential with input_shape), seeded weights."""
    import tf_keras

    model = tf_keras.Sequential(
        [
            tf_keras.layers.Dense(100, activation="sigmoid", input_shape=(784,), name="hidden"),
            tf_keras.layers.Dropout(0.2),
            tf_keras.layers.Dense(10, activation="softmax", name="probabilities"),
        ]
    )
    generator = np.random.default_rng(seed)
    model.set_weights([generator.normal(0, 0.1, w.shape).astype(np.float32) for w in model.get_weights()])
    return model


@cache
def legacy_inclusive_classifier(seed: int = 5):
    """CERN's Inclusive Classifier, written the way its published worker code writes it."""
    import tf_keras
    from tf_keras.layers import GRU, Dense, Dropout, Input, Masking, concatenate

    input_gru = Input(shape=(801, 19), name="input_gru")
    input_hlf = Input(shape=(14), name="input_hlf")  # CERN's style: an int, not a tuple
    layer = GRU(50, name="gru")(Masking(mask_value=0.0)(input_gru))
    layer = concatenate([layer, Dropout(0.2)(input_hlf)])
    output = Dense(3, activation="softmax")(Dense(25, activation="relu")(layer))
    model = tf_keras.Model(inputs=[input_gru, input_hlf], outputs=output)
    generator = np.random.default_rng(seed)
    model.set_weights([generator.normal(0, 0.2, w.shape).astype(np.float32) for w in model.get_weights()])
    return model


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """The two models in both legacy formats: {(model, format): path}."""
    directory = tmp_path_factory.mktemp("legacy")
    paths = {}
    for name, build in (("mlp", legacy_mlp), ("ic", legacy_inclusive_classifier)):
        model = build()
        paths[name, "h5"] = directory / f"{name}.h5"
        model.save(paths[name, "h5"], save_format="h5")
        paths[name, "savedmodel"] = directory / f"{name}_savedmodel"
        model.save(paths[name, "savedmodel"], save_format="tf")
    return paths


@pytest.mark.parametrize("fmt", ["h5", "savedmodel"])
def test_legacy_files_load_with_tf_keras(saved, fmt):
    model = load_model(saved["ic", fmt])
    assert is_legacy(model)
    config = model.get_layer("gru").get_config()
    assert config.get("time_major") is False  # the option Keras 3 refuses to load
    assert [tuple(t.shape[1:]) for t in model.inputs] == [(801, 19), (14,)]


@pytest.mark.duckdb
@pytest.mark.parametrize("fmt", ["h5", "savedmodel"])
def test_legacy_mlp_scores_in_duckdb(saved, tmp_path, fmt):
    executor = DuckDBExecutor(tmp_path)
    assert executor.export(saved["mlp", fmt]) == 0
    x = np.random.default_rng(1).random((50, 784), dtype=np.float32)
    expected = legacy_mlp().predict(x, verbose=0)
    actual = executor.predict("mnist", x)
    assert np.abs(actual - expected).max() <= 1e-5 and (actual.argmax(1) == expected.argmax(1)).all()


@pytest.mark.duckdb
def test_legacy_inclusive_classifier_scores_padded_events_in_duckdb(saved, tmp_path):
    executor = DuckDBExecutor(tmp_path)
    # A loaded machine scores the 801-step macro at 3 s a row: the gate's minimum of 10 rows may outlast
    # the default 20 s (seen at a load average of 11); refusing for time is test_budget.py's.
    assert executor.export(saved["ic", "h5"], "ic", "--parity-seconds", "600") == 0
    particles, hlf = models.padded_events(4, seed=3)
    rows = executor.predict_rows("ic", particles, hlf)
    expected = legacy_inclusive_classifier().predict([particles, hlf], verbose=0)
    assert np.abs(rows - expected).max() <= 1e-5


@pytest.mark.parametrize("fmt", ["h5", "savedmodel"])
def test_legacy_inclusive_classifier_exports_to_onnx(saved, tmp_path, fmt):
    import onnxruntime

    version, report = export_onnx(saved["ic", fmt], tmp_path, "ic", 20, 1e-5)
    session = onnxruntime.InferenceSession(str(tmp_path / "ic" / str(version) / "model.onnx"))
    particles, hlf = models.padded_events(3, seed=4)
    got = session.run(None, {"input_gru": particles, "input_hlf": hlf})[0]
    expected = legacy_inclusive_classifier().predict([particles, hlf], verbose=0)
    assert report.passed and np.abs(got - expected).max() <= 1e-5


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("model.pt", b"\x80\x02torch", "expected a .keras file (Keras 3), a .h5/.hdf5 file"),
        ("model.h5", b"not hdf5 at all", "cannot load an HDF5 file"),
        ("empty_dir", None, "without saved_model.pb"),
    ],
)
def test_a_file_of_no_known_format_gets_one_line(tmp_path, name, content, message):
    path = tmp_path / name
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    with pytest.raises(ExportError, match=re.escape(message)) as error:
        load_model(path)
    assert "\n" not in str(error.value)


@pytest.mark.duckdb
def test_tf_keras_hard_sigmoid_keeps_its_own_definition(tmp_path):
    """tf.keras hard_sigmoid is clip(0.2x + 0.5), Keras 3 is relu6(x + 3) / 6: each model keeps its own."""
    import tf_keras

    model = tf_keras.Sequential(
        [
            tf_keras.layers.Dense(6, activation="hard_sigmoid", input_shape=(5,), name="hidden"),
            tf_keras.layers.Dense(3, activation="softmax", name="out"),
        ]
    )
    generator = np.random.default_rng(7)
    model.set_weights([generator.normal(0, 1.0, w.shape).astype(np.float32) for w in model.get_weights()])
    path = tmp_path / "hs.h5"
    model.save(path, save_format="h5")
    executor = DuckDBExecutor(tmp_path)
    assert executor.export(path, "hs") == 0
    x = (generator.random((30, 5), dtype=np.float32) - 0.5) * 8
    assert np.abs(executor.predict("hs", x) - model.predict(x, verbose=0)).max() <= 1e-5


# Activations given as TensorFlow functions, as tf.keras scripts write them; a legacy file holds each under
# the function's own name ('log_softmax_v2' for tf.nn.log_softmax, 'exp' for tf.math.exp, ...).
TF_FUNCTIONS = (
    "nn.relu6", "nn.swish", "nn.silu", "nn.gelu", "nn.elu", "nn.selu", "nn.softplus", "math.softplus",
    "nn.softsign", "nn.sigmoid", "math.sigmoid", "nn.tanh", "math.tanh", "nn.leaky_relu", "nn.relu",
    "math.log_sigmoid", "nn.softmax",
)  # fmt: skip


def tf_function_model(seed: int = 8):
    """A tf.keras model whose layers take tf.nn / tf.math functions as activations, ending in
    tf.nn.log_softmax; tf.math.exp after a tanh (it overflows float32 beyond 88)."""
    import tensorflow as tf
    import tf_keras

    layers = tf_keras.layers
    features = layers.Input(shape=(6,), name="features")
    branches = []
    for index, path in enumerate(TF_FUNCTIONS):
        module, function = path.split(".")
        activation = getattr(getattr(tf, module), function)
        branches.append(layers.Dense(3, activation=activation, name=f"f{index}")(features))
    bounded = layers.Dense(3, activation="tanh", name="bounded")(features)
    branches.append(layers.Dense(3, activation=tf.math.exp, name="exp")(bounded))
    joined = layers.concatenate(branches)
    output = layers.Dense(4, activation=tf.nn.log_softmax, name="log_probabilities")(joined)
    model = tf_keras.Model(features, output)
    generator = np.random.default_rng(seed)
    model.set_weights([generator.normal(0, 0.5, w.shape).astype(np.float32) for w in model.get_weights()])
    return model


@pytest.mark.duckdb
@pytest.mark.parametrize("fmt", ["h5", "savedmodel"])
def test_tf_function_activations_of_a_legacy_file_export(tmp_path, fmt):
    """tf.keras cannot read its own .h5 back ('Unknown activation function'), and Keras 3 reads it with
    Keras's functions under those names; the SavedModel keeps 'log_softmax_v2' in the layer's config.
    Both export with parity, scored against the tf.keras model that wrote them."""
    model = tf_function_model()
    path = tmp_path / ("model.h5" if fmt == "h5" else "savedmodel")
    model.save(path, save_format="h5" if fmt == "h5" else "tf")
    executor = DuckDBExecutor(tmp_path)
    assert executor.export(path, "legacy") == 0
    x = np.random.default_rng(2).normal(0, 2, (30, 6)).astype(np.float32)
    expected = model.predict(x, verbose=0)
    assert np.abs(executor.predict("legacy", x) - expected).max() <= 1e-5
