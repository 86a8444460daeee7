"""NaN never agrees: a diverged model (a NaN weight) is refused at load on every target, naming the tensor,
and a model whose Keras answers NaN or infinity on ordinary rows is refused by the gate. Before, DuckDB,
ONNX and PL/pgSQL published the diverged model with "max |Δ| = 0" (NaN = NaN) and the cube kernel crashed
("cannot convert float NaN to integer")."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from tests import models
from tests.export.conftest import executor

TARGETS = [
    pytest.param("duckdb", marks=pytest.mark.duckdb),
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("postgres+cube", marks=pytest.mark.postgres),
    "onnx",
]


def mlp() -> keras.Model:
    keras.utils.set_random_seed(3)
    return keras.Sequential(
        [
            keras.Input((8,), name="features"),
            keras.layers.Dense(6, activation="relu", name="hidden"),
            keras.layers.Dense(3, activation="softmax", name="out"),
        ]
    )


@pytest.fixture(scope="module")
def diverged(tmp_path_factory):
    """Every weight after the first layer NaN, as a training run that diverged leaves them."""
    model = mlp()
    weights = model.get_weights()
    model.set_weights(weights[:2] + [np.full_like(w, np.nan) for w in weights[2:]])
    return models.save(model, tmp_path_factory.mktemp("diverged"))


@pytest.fixture(scope="module")
def overflowing(tmp_path_factory):
    """Finite weights whose Keras scores are NaN on ordinary rows: exp beyond float32's range (inf) on
    two units, then their difference (inf − inf)."""
    model = keras.Sequential(
        [
            keras.Input((4,), name="features"),
            keras.layers.Dense(2, activation="exponential", name="huge"),
            keras.layers.Dense(1, activation="sigmoid", name="out"),
        ]
    )
    model.set_weights(
        [
            np.full((4, 2), 400.0, np.float32),
            np.full(2, 100.0, np.float32),
            np.array([[1.0], [-1.0]], np.float32),
            np.zeros(1, np.float32),
        ]
    )
    return models.save(model, tmp_path_factory.mktemp("overflowing"), classes=["no", "yes"])


@pytest.mark.parametrize("kind", TARGETS)
def test_a_diverged_model_is_refused_at_load_naming_the_tensor(kind, diverged, request, tmp_path, capsys):
    target = executor(kind, request, tmp_path)
    assert target.export(diverged, "diverged") == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: tensor out/kernel holds NaN or infinite values"), error
    assert "\n" not in error and "Traceback" not in error


@pytest.mark.parametrize("kind", TARGETS)
def test_keras_answering_nan_on_ordinary_rows_is_refused(kind, overflowing, request, tmp_path, capsys):
    target = executor(kind, request, tmp_path)
    assert target.export(overflowing, "overflowing") == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: Keras itself answers NaN or infinity on sample row"), error
    assert "\n" not in error
