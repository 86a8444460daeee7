"""`--as-float32`: a model trained in mixed precision (layers computing in float16 or bfloat16) exported
as the same network computing in float32, on the SQL targets and ONNX alike; without it, such a model is
refused in one line that names the option (tests/hostile/test_export_narrow_precision.py shows why)."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from tests.export.executors import DuckDBExecutor, OnnxExecutor

ROWS = np.random.default_rng(3).random((200, 8), dtype=np.float32)


def mixed_model(path, policy: str = "mixed_float16"):
    keras.utils.set_random_seed(2)
    x = keras.Input((8,), name="x")
    h = keras.layers.Dense(16, activation="relu", name="hidden", dtype=policy)(x)
    out = keras.layers.Dense(4, activation="softmax", name="out", dtype=policy)(h)
    model = keras.Model(x, out)
    model.save(path)
    return model


def float32_twin(model):
    """The same layers and weights under the float32 policy, built by hand: the test's own reference."""
    x = keras.Input((8,), name="x")
    h = keras.layers.Dense(16, activation="relu", name="hidden", dtype="float32")(x)
    twin = keras.Model(x, keras.layers.Dense(4, activation="softmax", name="out", dtype="float32")(h))
    twin.set_weights([np.asarray(w, np.float32) for w in model.get_weights()])
    return twin


@pytest.mark.parametrize("executor", [DuckDBExecutor, OnnxExecutor], ids=["duckdb", "onnx"])
@pytest.mark.parametrize("policy", ["mixed_float16", "bfloat16"])
def test_as_float32_exports_the_network_in_float32(tmp_path, capsys, executor, policy):
    path = tmp_path / "mixed.keras"
    model = mixed_model(path, policy)
    target = executor(tmp_path)
    assert target.export(path, "m") != 0
    refusal = capsys.readouterr().err.strip()
    assert len(refusal.splitlines()) == 1 and "--as-float32" in refusal, refusal
    assert target.export(path, "m", "--as-float32") == 0
    expected = float32_twin(model).predict(ROWS, verbose=0)
    got = target.predict("m", ROWS)
    # float32 parity (the project's bound); the narrow model's own predict is ~1e-3 away
    assert np.max(np.abs(got - expected)) <= 1e-5
    narrow = np.asarray(model.predict(ROWS, verbose=0), np.float64)
    assert np.max(np.abs(narrow - expected)) > 1e-5  # so the check above tells the two apart


def test_as_float32_reads_a_tf_keras_mixed_precision_h5(tmp_path, capsys):
    import tf_keras

    policy = tf_keras.mixed_precision.Policy("mixed_float16")
    model = tf_keras.Sequential(
        [
            tf_keras.layers.Dense(16, activation="relu", input_shape=(8,), name="hidden", dtype=policy),
            tf_keras.layers.Dense(4, activation="softmax", name="out", dtype=policy),
        ]
    )
    model.set_weights(
        [np.random.default_rng(5).normal(0, 0.5, w.shape).astype(np.float32) for w in model.get_weights()]
    )
    path = tmp_path / "mixed.h5"
    model.save(path)
    target = DuckDBExecutor(tmp_path)
    assert target.export(path, "m") != 0
    assert "--as-float32" in capsys.readouterr().err
    assert target.export(path, "m", "--as-float32") == 0
    twin = tf_keras.Sequential(
        [
            tf_keras.layers.Dense(16, activation="relu", input_shape=(8,), name="hidden"),
            tf_keras.layers.Dense(4, activation="softmax", name="out"),
        ]
    )
    twin.set_weights(model.get_weights())
    assert np.max(np.abs(target.predict("m", ROWS) - twin.predict(ROWS, verbose=0))) <= 1e-5
