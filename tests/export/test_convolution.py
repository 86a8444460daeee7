"""Conv2D and MaxPooling2D lowered to Gather + PatchDense / GroupMax: the windows against Keras's own
convolution, and TF-Spawner's CNN scored in DuckDB, PL/pgSQL and PL/Python within 1e-5 of Keras.
Oracle does not run these primitives yet and says so in one line."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from export import reference
from export.keras_frontend import to_ir
from tests import models
from tests.export.executors import DuckDBExecutor, OracleScriptExecutor, PlPythonExecutor, PostgresExecutor


def tf_spawner_cnn(seed: int = 31) -> keras.Model:
    """TF-Spawner's example network: two Conv2D + MaxPool2D, Dropout, Flatten, Dense(100), Dense(10)."""
    model = keras.Sequential(
        [
            keras.Input((28, 28, 1), name="image"),
            keras.layers.Conv2D(8, (3, 3), activation="relu", name="conv1"),
            keras.layers.MaxPool2D((2, 2), name="pool1"),
            keras.layers.Conv2D(16, (3, 3), activation="relu", name="conv2"),
            keras.layers.MaxPool2D((2, 2), name="pool2"),
            keras.layers.Dropout(0.25),
            keras.layers.Flatten(name="flat"),
            keras.layers.Dense(100, activation="relu", name="hidden"),
            keras.layers.Dense(10, activation="softmax", name="probabilities"),
        ]
    )
    return models._seeded(model, seed)


def convolution_variants(seed: int = 32) -> keras.Model:
    """'same' padding, strides, dilation, no bias, an elementwise activation, two channels in."""
    inputs = keras.Input((9, 7, 2), name="image")
    x = keras.layers.Conv2D(4, (3, 2), padding="same", strides=(2, 1), activation="elu", name="c1")(inputs)
    x = keras.layers.Conv2D(3, (2, 2), dilation_rate=(2, 1), use_bias=False, name="c2")(x)
    x = keras.layers.MaxPooling2D((1, 2), strides=(1, 1), name="p")(x)
    outputs = keras.layers.Dense(3, activation="softmax", name="out")(keras.layers.Flatten()(x))
    return models._seeded(keras.Model(inputs, outputs), seed)


@pytest.mark.parametrize("build", [tf_spawner_cnn, convolution_variants])
def test_lowered_convolutions_match_keras_in_the_reference(build):
    model = build()
    shape = tuple(model.inputs[0].shape[1:])
    x = np.random.default_rng(33).random((12, *shape), dtype=np.float32)
    graph = to_ir(model, target="reference")
    assert {node.kind for node in graph.nodes} >= {"Gather", "PatchDense", "GroupMax"}
    assert np.abs(reference.run(graph, x) - model.predict(x, verbose=0)).max() <= 1e-5


@pytest.fixture(
    params=[
        pytest.param("duckdb", marks=pytest.mark.duckdb),
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("plpython", marks=pytest.mark.postgres),
    ]
)
def cnn_target(request, tmp_path):
    if request.param == "duckdb":
        return DuckDBExecutor(tmp_path)
    executor = PlPythonExecutor if request.param == "plpython" else PostgresExecutor
    return executor(request.getfixturevalue("postgres_dsn"))


@pytest.mark.parametrize("build", [tf_spawner_cnn, convolution_variants])
def test_convolutions_score_in_the_database(cnn_target, tmp_path, build):
    model = build()
    assert cnn_target.export(models.save(model, tmp_path / build.__name__), "cnn", "--sample-rows", "20") == 0
    shape = tuple(model.inputs[0].shape[1:])
    x = np.random.default_rng(34).random((10, *shape), dtype=np.float32)
    actual, expected = cnn_target.predict("cnn", x), model.predict(x, verbose=0)
    assert np.abs(actual - expected).max() <= 1e-5 and (actual.argmax(1) == expected.argmax(1)).all()


@pytest.mark.oracle
def test_oracle_refuses_convolutions_in_one_line(tmp_path, capsys):
    target = OracleScriptExecutor(tmp_path)
    assert target.export(models.save(tf_spawner_cnn(), tmp_path / "cnn"), "cnn") == 2
    err = capsys.readouterr().err.strip()
    assert "'conv1' (Conv2D)" in err and "'oracle'" in err and len(err.splitlines()) == 1
