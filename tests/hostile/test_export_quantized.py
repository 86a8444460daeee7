"""A model quantized with Keras 3's `model.quantize` (int8, float8, int4): a built-in of Keras whose
`model.predict` computes with the quantized weights, which no target reproduces. Found by the sixth
hostile pass of issue 32: such a file was refused as holding a custom object ("'Int8QuantizationConfig'
is not a built-in Keras class ... whose code loading runs"), a wrong reason that sends its author to
`--trust-model-code`; with it, the export loaded the model and failed the parity gate (max |Δ| 1.0).
Now one line says the layer is quantized, with or without `--trust-model-code`."""

from __future__ import annotations

import keras
import pytest

from tests.export.test_duckdb import export


def quantized(path, mode: str):
    keras.utils.set_random_seed(1)
    x = keras.Input((8,), name="x")
    h = keras.layers.Dense(16, activation="relu", name="hidden")(x)
    model = keras.Model(x, keras.layers.Dense(4, activation="softmax", name="out")(h))
    model.quantize(mode)
    model.save(path)


@pytest.mark.parametrize(
    ("mode", "trust"),
    [("int8", False), ("float8", False), ("int8", True)],
    ids=["int8", "float8", "int8-trusted"],
)
def test_a_quantized_model_is_refused_as_quantized(tmp_path, capsys, mode, trust):
    path = tmp_path / "q.keras"
    quantized(path, mode)
    extra = ("--trust-model-code",) if trust else ()
    code = export(path, tmp_path / "models.duckdb", "m", *extra)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1, err
    assert f"layer 'hidden' (Dense) is quantized ({mode})" in err, err
    assert "--trust-model-code" not in err
