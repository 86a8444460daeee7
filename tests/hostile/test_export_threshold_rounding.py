"""A ReLU's threshold as Keras compares it. Found by the fifth hostile pass of issue 32: Keras compares
the input with the threshold cast to float32, the lowering used the float64 value of the configuration.
A float32 feature equal to float32(0.1), as any float32 data holds it, was not above the threshold in
Keras and above it in the target: a model that amplifies the step answered [0.5, 0.5] in Keras and
[1, 0] in DuckDB, on a row no sample held. The threshold is now float32's, as Keras has it."""

from __future__ import annotations

import duckdb
import keras
import numpy as np
import pytest

from tests.export.test_duckdb import export

pytestmark = pytest.mark.duckdb

THRESHOLD = 0.1  # not a float32: float32(0.1) = 0.10000000149...


def amplified_step(path) -> keras.Model:
    """Class 0 far ahead wherever the first feature passes the threshold, a tie elsewhere."""
    x = keras.Input((2,), name="x")
    stepped = keras.layers.ReLU(threshold=THRESHOLD, name="step")(x)
    model = keras.Model(x, keras.layers.Dense(2, activation="softmax", name="out")(stepped))
    model.get_layer("out").set_weights([np.array([[1e6, -1e6], [0, 0]], np.float32), np.zeros(2, np.float32)])
    model.save(path)
    return model


def test_a_float32_input_equal_to_the_threshold_answers_as_keras(tmp_path):
    path, db = tmp_path / "step.keras", tmp_path / "models.duckdb"
    model = amplified_step(path)
    assert export(path, db, "m") == 0
    rows = np.array([[np.float32(THRESHOLD), 0.0], [0.05, 0.0], [0.2, 0.0]], np.float32)
    expected = model.predict(rows, verbose=0)
    with duckdb.connect(str(db), read_only=True) as con:
        got = [
            con.execute("SELECT m.predict(?)", [row.astype(np.float64).tolist()]).fetchone()[0]
            for row in rows
        ]
    np.testing.assert_allclose(np.asarray(got), expected, atol=1e-5)  # the gate's tolerance
