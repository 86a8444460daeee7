"""Model files from others are hostile input: code in them (a Lambda's bytecode, a custom object) is refused
before anything in the file is deserialised, on every target, and sizes they declare are checked before any
weight is allocated (export/frontend/model_code.py, export/frontend/model_limits.py)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pytest

from nnsql.export.errors import ExportError
from nnsql.export.frontend.model import load_model
from nnsql.export.frontend.model_limits import Limits


def marker_lambda(marker: Path):
    """A Lambda's function that creates `marker` whenever it runs. Keras stores a lambda as marshalled
    bytecode, so it is self-contained: the path is a constant of its code, and it imports what it needs."""
    return eval(f"lambda x: (__import__('pathlib').Path({str(marker)!r}).write_text('ran'), x)[1]")


def tf_keras_lambda_model(marker: Path):
    import tf_keras

    return tf_keras.Sequential(
        [
            tf_keras.layers.Dense(4, input_shape=(3,), name="hidden"),
            tf_keras.layers.Lambda(marker_lambda(marker), name="evil"),
            tf_keras.layers.Dense(2, activation="softmax", name="out"),
        ]
    )


def keras_lambda_model(marker: Path):
    import keras

    inputs = keras.Input((3,), name="x")
    hidden = keras.layers.Dense(4, name="hidden")(inputs)
    evil = keras.layers.Lambda(marker_lambda(marker), name="evil")(hidden)
    return keras.Model(inputs, keras.layers.Dense(2, activation="softmax", name="out")(evil))


@pytest.fixture(scope="module")
def lambda_files(tmp_path_factory):
    """The same Lambda model as tf.keras .h5, tf.keras SavedModel and Keras 3 .keras; the Lambda creates
    `marker`, which is removed after saving (saving traces the Lambda)."""
    directory = tmp_path_factory.mktemp("hostile")
    marker = directory / "MARKER"
    legacy = tf_keras_lambda_model(marker)
    paths = {"h5": directory / "evil.h5", "savedmodel": directory / "evil_savedmodel"}
    legacy.save(paths["h5"], save_format="h5")
    legacy.save(paths["savedmodel"], save_format="tf")
    paths["keras"] = directory / "evil.keras"
    keras_lambda_model(marker).save(paths["keras"])
    marker.unlink(missing_ok=True)
    return paths, marker


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize("fmt", ["h5", "savedmodel", "keras"])
def test_a_lambda_layer_never_runs_on_any_target(lambda_files, any_target, fmt, capsys):
    paths, marker = lambda_files
    assert any_target.export(paths[fmt], "evil") == 2
    err = one_line_error(capsys)
    assert "layer 'evil' (Lambda)" in err and "--trust-model-code" in err
    assert not marker.exists()


@pytest.mark.duckdb
@pytest.mark.parametrize("fmt", ["h5", "keras"])
def test_trusted_code_reaches_the_layer_refusal_of_a_sql_target(lambda_files, tmp_path, fmt, capsys):
    from tests.export.executors import DuckDBExecutor

    paths, marker = lambda_files
    try:
        assert DuckDBExecutor(tmp_path).export(paths[fmt], "evil", "--trust-model-code") == 2
        err = one_line_error(capsys)
        assert "layer 'evil' (Lambda) is not supported by target 'duckdb'" in err
        assert marker.exists()  # the user chose to run the file's code
    finally:
        marker.unlink(missing_ok=True)


def test_trusted_code_is_converted_by_onnx(lambda_files, tmp_path):
    """ONNX traces what the Lambda computes into the graph: with --trust-model-code it publishes."""
    from tests.export.executors import OnnxExecutor

    paths, marker = lambda_files
    try:
        assert OnnxExecutor(tmp_path).export(paths["h5"], "evil", "--trust-model-code") == 0
    finally:
        marker.unlink(missing_ok=True)


def test_nested_models_and_wrappers_are_walked(tmp_path):
    import tf_keras

    marker = tmp_path / "MARKER"
    evil = tf_keras.layers.Lambda(marker_lambda(marker), name="evil")
    inner = tf_keras.Sequential([tf_keras.layers.TimeDistributed(evil, name="td")], name="inner")
    inputs = tf_keras.Input((5, 3))
    outputs = tf_keras.layers.Dense(2, activation="softmax")(tf_keras.layers.Flatten()(inner(inputs)))
    path = tmp_path / "nested.h5"
    tf_keras.Model(inputs, outputs).save(path, save_format="h5")
    marker.unlink(missing_ok=True)  # saving ran the function
    with pytest.raises(ExportError, match=r"layer 'evil' \(Lambda\) inside 'td' \(TimeDistributed\) "):
        load_model(path)
    assert not marker.exists()


def rewrite_keras_config(source: Path, target: Path, change) -> Path:
    """A copy of a .keras archive whose config.json is changed by `change(config)`."""
    with zipfile.ZipFile(source) as archive, zipfile.ZipFile(target, "w") as out:
        for info in archive.infolist():
            data = archive.read(info)
            if info.filename == "config.json":
                config = json.loads(data)
                change(config)
                data = json.dumps(config).encode()
            out.writestr(info, data)
    return target


def dense_config(config: dict, name: str) -> dict:
    return next(layer for layer in config["config"]["layers"] if layer["config"]["name"] == name)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "activation",
            {"module": "os", "class_name": "function", "config": "system", "registered_name": "system"},
            "function 'system' comes from module 'os', not Keras",
        ),
        (
            "kernel_initializer",
            {"module": "evil.init", "class_name": "Backdoor", "config": {}, "registered_name": "x>Backdoor"},
            "class 'Backdoor' comes from module 'evil.init'",
        ),
        (
            "kernel_initializer",
            {"module": "keras.initializers", "class_name": "Backdoor", "config": {}, "registered_name": None},
            "'Backdoor' is not a built-in Keras class",
        ),
    ],
)
def test_custom_objects_and_unknown_classes_are_refused(cern_mlp_path, tmp_path, key, value, message):
    def change(config):
        dense_config(config, "hidden")["config"][key] = value

    path = rewrite_keras_config(cern_mlp_path, tmp_path / "custom.keras", change)
    with pytest.raises(ExportError, match="layer 'hidden' \\(Dense\\): " + message.replace("(", "\\(")):
        load_model(path)


def test_a_tf_op_naming_a_side_effect_is_refused(tmp_path):
    """tf.keras saves `tf.io.write_file(...)` in a functional model as a TFOpLambda naming the function."""
    import tensorflow as tf
    import tf_keras

    inputs = tf_keras.Input((3,))
    scaled = tf.math.multiply(inputs, 2.0)  # a pure TensorFlow function: accepted
    path = tmp_path / "ops.h5"
    tf_keras.Model(inputs, tf_keras.layers.Dense(2, activation="softmax")(scaled)).save(path)
    load_model(path)
    with h5py.File(path, "r+") as file:
        text = file.attrs["model_config"]
        file.attrs["model_config"] = text.replace('"math.multiply"', '"io.write_file"')
    with pytest.raises(ExportError, match=r"calls TensorFlow function 'io\.write_file'"):
        load_model(path)


# -- declared sizes ------------------------------------------------------------------------------------


def widened(source: Path, target: Path, units: int) -> Path:
    """The 784 → Dense(100) → Dense(10) model with one number changed: 'hidden' declares `units`."""

    def change(config):
        dense_config(config, "hidden")["config"]["units"] = units
        second = config["config"]["layers"][-1]
        second["build_config"]["input_shape"] = [None, units]

    return rewrite_keras_config(source, target, change)


def test_a_declared_memory_bomb_is_refused_on_every_target(cern_mlp_path, tmp_path, any_target, capsys):
    bomb = widened(cern_mlp_path, tmp_path / "bomb.keras", 524_288)
    assert any_target.export(bomb) == 2
    err = one_line_error(capsys)
    assert "declares 416,808,970 parameters, more than --max-parameters 100,000,000" in err


def test_the_limits_are_options(cern_mlp_path, tmp_path):
    with pytest.raises(ExportError, match="declares 79,510 parameters, more than --max-parameters 79,509"):
        load_model(cern_mlp_path, limits=Limits(max_parameters=79_509))
    with pytest.raises(ExportError, match="layer 'features' \\(InputLayer\\) outputs 784 values per row"):
        load_model(cern_mlp_path, limits=Limits(max_activations=783))
    assert load_model(cern_mlp_path, limits=Limits(max_parameters=79_510, max_activations=784)) is not None


def test_a_compressed_weight_that_would_expand_is_refused(tmp_path):
    """An HDF5 dataset of 800 million values stored compressed in a file of a few kilobytes."""
    from tests.export.test_legacy_models import legacy_mlp

    path = tmp_path / "expands.h5"
    legacy_mlp().save(path, save_format="h5")
    with h5py.File(path, "r+") as file:
        group = file["model_weights/hidden/hidden"]
        name = next(key for key in group if key.startswith("kernel"))
        del group[name]
        group.create_dataset(name, shape=(784, 1_000_000), dtype="f4", chunks=(784, 1000), compression="gzip")
    assert path.stat().st_size < 1_000_000
    with pytest.raises(ExportError, match=r"stores 784,[0-9,]+ weight values, more than --max-parameters"):
        load_model(path)


def test_models_of_every_format_still_load(tmp_path):
    """The checks refuse nothing a user saves with built-in layers: Bidirectional, TimeDistributed,
    masking and a nested Sequential, in each legacy format (every .keras model of the suite, the outside
    zoo's included, loads through the same checks)."""
    import tf_keras

    inputs = tf_keras.Input((6, 4))
    masked = tf_keras.layers.Masking()(inputs)
    recurrent = tf_keras.layers.Bidirectional(tf_keras.layers.GRU(3, return_sequences=True))(masked)
    steps = tf_keras.layers.TimeDistributed(tf_keras.layers.Dense(2))(recurrent)
    inner = tf_keras.Sequential([tf_keras.layers.Dense(5, activation="relu")], name="inner")
    outputs = tf_keras.layers.Dense(3, activation="softmax")(inner(tf_keras.layers.Flatten()(steps)))
    model = tf_keras.Model(inputs, outputs)
    model.set_weights([np.full(w.shape, 0.1, np.float32) for w in model.get_weights()])
    x = np.random.default_rng(0).random((4, 6, 4), dtype=np.float32)
    for path in (tmp_path / "m.h5", tmp_path / "m_savedmodel"):
        model.save(path, save_format="h5" if path.suffix else "tf")
        assert np.abs(load_model(path).predict(x, verbose=0) - model.predict(x, verbose=0)).max() == 0


@pytest.mark.parametrize("fmt", ["h5", "savedmodel"])
def test_loading_a_legacy_file_leaves_the_callers_tf_keras_models_working(tmp_path, fmt):
    """The size check builds a tf.keras skeleton in a graph, where tf.keras swaps its classes' bases to
    their TF1 versions: a model the caller (a notebook, a test) already holds must still predict after,
    also when the check refuses the file (nothing is loaded after it to swap them back)."""
    import tf_keras

    mine = tf_keras.Sequential([tf_keras.Input((3,)), tf_keras.layers.Dense(2, activation="softmax")])
    x = np.ones((1, 3), np.float32)
    before = mine.predict(x, verbose=0)
    path = tmp_path / ("m.h5" if fmt == "h5" else "m")
    mine.save(path, save_format="h5" if fmt == "h5" else "tf")
    with pytest.raises(ExportError, match="--max-parameters"):
        load_model(path, limits=Limits(max_parameters=1))
    assert np.array_equal(mine.predict(x, verbose=0), before)


@pytest.fixture(scope="module")
def exported_graph(tmp_path_factory):
    """What Keras 3's `model.export(dir)` writes: a SavedModel of TensorFlow functions, no Keras metadata."""
    import keras

    inputs = keras.Input((3,), name="x")
    model = keras.Model(inputs, keras.layers.Dense(2, activation="softmax", name="out")(inputs))
    path = tmp_path_factory.mktemp("exported") / "graph"
    model.export(str(path), verbose=False)
    return path


@pytest.mark.duckdb
@pytest.mark.parametrize("trust", [(), ("--trust-model-code",)])
def test_a_keras_3_exported_graph_is_refused_in_one_line(exported_graph, tmp_path, trust, capsys):
    """Neither the configuration check nor --trust-model-code reaches TensorFlow's loader, whose object
    has no `inputs`: the line says what to save instead."""
    from tests.export.executors import DuckDBExecutor

    assert DuckDBExecutor(tmp_path).export(exported_graph, "graph", *trust) == 2
    err = one_line_error(capsys)
    assert 'model.save("m.keras")' in err and "Traceback" not in err
