"""ONNX exports of models whose inputs are not float32: uint8 pixels, int32 token ids or counts, float16.
Found by the eleventh hostile pass of issue 32. Keras's converter keeps an input's own type, but the
exporter drew every sample row as uniform [0, 1) float32 values and declared every input FP32:

- an integer input the IR does not read (a Rescaling of int32 pixels) read those rows as 0 on every row,
  so the gate compared the zero input a thousand times ("score (argmax) 0/0"): a conversion wrong on
  every other input published (here a kernel changed in the converted model);
- a uint8 or float16 input ended the export in onnxruntime's traceback;
- an int32 token input (Keras's own text examples) published, and every scoring request to it was an
  internal error: the scorer fed float32 to an int32 graph input.

Now the rows are drawn in each input's own type (whole numbers for an integer one), the version declares
the type its graph reads, and the scorer feeds it in that type."""

from __future__ import annotations

import json
from pathlib import Path

import keras
import numpy as np
import pytest

from nnsql.export.errors import ExportError
from nnsql.export.onnx import emit as onnx_emit
from nnsql.export.onnx.compile import export
from nnsql.serve.app import create_app

ROWS = 60
V2 = {"int32": "INT32", "uint8": "UINT8", "float16": "FP16"}


def image_model(path: Path, dtype: str) -> keras.Model:
    """Pixels of `dtype` scaled by 1/255, a convolution and a softmax (the IR does not read Rescaling)."""
    keras.utils.set_random_seed(3)
    pixels = keras.Input((6, 6, 1), name="img", dtype=dtype)
    scaled = keras.layers.Rescaling(1 / 255.0)(pixels)
    hidden = keras.layers.Conv2D(4, 3, activation="relu", bias_initializer="ones")(scaled)
    out = keras.layers.Dense(3, activation="softmax", bias_initializer="random_normal")(
        keras.layers.Flatten()(hidden)
    )
    model = keras.Model(pixels, out)
    model.save(path)
    return model


def token_model(path: Path, form: str) -> keras.Model:
    """Token ids as int32, as Keras's text examples declare them, into an Embedding: read by the IR
    (`plain`), or with a Rescaling after it, which the IR does not read (ONNX alone converts the model),
    the Embedding itself, inside a nested model or under TimeDistributed."""
    keras.utils.set_random_seed(4)
    ids = keras.Input((5, 4) if form == "time_distributed" else (4,), name="ids", dtype="int32")
    if form == "nested":
        inner = keras.Sequential([keras.Input((4,), dtype="int32"), keras.layers.Embedding(7, 3)])
        embedded = inner(ids)
    elif form == "time_distributed":
        embedded = keras.layers.TimeDistributed(keras.layers.Embedding(6, 2))(ids)
    else:
        embedded = keras.layers.Embedding(10, 3)(ids)
    flat = keras.layers.Flatten()(embedded)
    if form != "plain":
        flat = keras.layers.Rescaling(2.0)(flat)
    model = keras.Model(ids, keras.layers.Dense(3, activation="softmax")(flat))
    model.save(path)
    return model


def served(repo: Path, name: str, rows: np.ndarray, datatype: str) -> np.ndarray:
    """The scorer's probabilities for `rows`, sent in `datatype` through KServe V2 (no network)."""
    client = create_app({"REPO": str(repo)}).test_client()
    tensor = {"name": "", "datatype": datatype, "shape": list(rows.shape), "data": rows.ravel().tolist()}
    spec = client.get(f"/v2/models/{name}").get_json()["inputs"][0]
    response = client.post(f"/v2/models/{name}/infer", json={"inputs": [{**tensor, "name": spec["name"]}]})
    assert response.status_code == 200, response.get_data(as_text=True)
    return np.asarray(response.get_json()["outputs"][0]["data"]).reshape(len(rows), -1)


@pytest.mark.parametrize("dtype", ["uint8", "float16"])
def test_an_image_model_of_narrow_inputs_publishes_and_is_served_as_keras_answers(tmp_path, dtype):
    model = image_model(tmp_path / "m.keras", dtype)
    version, report = export(tmp_path / "m.keras", tmp_path / "repo", "m", ROWS)  # raised onnxruntime's error
    rows = np.random.default_rng(5).integers(0, 256, (8, 6, 6, 1)).astype(dtype)
    expected = np.asarray(model.predict(rows, verbose=0), np.float64)
    # 1e-5: the gate's own bound; onnxruntime and Keras both compute in float32 on the same input values
    assert np.abs(served(tmp_path / "repo", "m", rows, V2[dtype]) - expected).max() <= 1e-5
    assert version == 1 and all(check.compared == ROWS for check in report.answers), report.summary()


@pytest.mark.parametrize("form", ["plain", "scaled", "nested", "time_distributed"])
def test_a_token_model_of_int32_ids_is_served(tmp_path, form):
    model = token_model(tmp_path / "m.keras", form)
    # ONNX alone: ids drawn below the smallest Embedding's rows, or Keras refuses them and nothing publishes
    export(tmp_path / "m.keras", tmp_path / "repo", "m", ROWS)
    rows = np.random.default_rng(6).integers(0, 6, (8, *model.inputs[0].shape[1:])).astype(np.int32)
    expected = np.asarray(model.predict(rows, verbose=0), np.float64)
    # served as INT32, the graph's type: the version declared FP32, and either type was refused or failed
    assert np.abs(served(tmp_path / "repo", "m", rows, "INT32") - expected).max() <= 1e-5


def faulty_convert(monkeypatch) -> None:
    """The converter on the model with one kernel value moved by 0.5: wrong on every input but zero."""
    convert = onnx_emit.convert

    def converted(model, path, opset=None, kind="probabilities"):
        original = model.get_weights()
        moved = [w.copy() for w in original]
        kernel = next(i for i, w in enumerate(moved) if w.ndim == 4)  # the convolution's
        moved[kernel][0, 0, 0, 0] += 0.5
        model.set_weights(moved)
        try:
            convert(model, path, opset, kind)
        finally:
            model.set_weights(original)

    monkeypatch.setattr(onnx_emit, "convert", converted)


def test_a_conversion_wrong_on_integer_pixels_is_refused(tmp_path, monkeypatch):
    image_model(tmp_path / "m.keras", "int32")
    faulty_convert(monkeypatch)
    with pytest.raises(ExportError, match="parity"):
        version, report = export(tmp_path / "m.keras", tmp_path / "repo", "m", ROWS)
        pytest.fail(f"published version {version}: {report.summary()}")
    assert not (tmp_path / "repo" / "m" / "1").exists()


def test_the_faithful_conversion_of_integer_pixels_publishes_judged_on_rows_that_differ(tmp_path):
    image_model(tmp_path / "m.keras", "int32")
    version, _ = export(tmp_path / "m.keras", tmp_path / "repo", "m", ROWS)
    check = json.loads((tmp_path / "repo" / "m" / "1" / "check.json").read_text())
    # the rows as the model reads them (int32): uniform [0, 1) values were the zero input on every row
    read = {tuple(np.asarray(row["inputs"]["img"]).astype(np.int32)) for row in check["rows"]}
    assert version == 1 and len(read) == len(check["rows"]) > 1
