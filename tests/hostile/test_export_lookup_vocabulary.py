"""A tf.keras model whose StringLookup (or IntegerLookup, TextVectorization) names its vocabulary by a
path: tf.keras reads that file while it makes the layer, in any mode (Keras 3 refuses it in safe mode
only). Found by the fourth hostile pass of issue 32: the check before loading passed it (a built-in
class), so exporting such a `.h5` read a file of the exporting user's that the model's author chose;
here the model loaded with that file's lines as its vocabulary. The vocabulary must be in the model: a
path is refused in one line, naming the layer, before anything is loaded."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import pytest

from nnsql.export.errors import ExportError
from nnsql.export.frontend.model import load_model


def with_vocabulary_path(path: Path, vocabulary: Path, layer: str) -> Path:
    """A tf.keras model (a string, its index) saved as .h5, its lookup's vocabulary then named by path."""
    import tf_keras

    made = {
        "StringLookup": lambda: tf_keras.layers.StringLookup(vocabulary=["a", "b"], name="lookup"),
        "IntegerLookup": lambda: tf_keras.layers.IntegerLookup(vocabulary=[3, 5], name="lookup"),
    }[layer]()
    dtype = "string" if layer == "StringLookup" else "int64"
    inputs = tf_keras.Input(shape=(1,), dtype=dtype)
    tf_keras.Model(inputs, made(inputs)).save(path, save_format="h5")
    with h5py.File(path, "r+") as file:
        config = json.loads(file.attrs["model_config"])
        found = [item for item in config["config"]["layers"] if item["class_name"] == layer]
        assert len(found) == 1, config
        found[0]["config"]["vocabulary"] = str(vocabulary)
        file.attrs["model_config"] = json.dumps(config)
    return path


@pytest.mark.parametrize("layer", ["StringLookup", "IntegerLookup"])
def test_a_vocabulary_named_by_path_is_refused_before_it_is_read(tmp_path, layer):
    secret = tmp_path / "secret.txt"
    secret.write_text("3\n5\n")  # a vocabulary of either kind: read, it would load
    model = with_vocabulary_path(tmp_path / "lookup.h5", secret, layer)
    try:
        loaded = load_model(model)
    except ExportError as error:
        message = str(error)
    else:
        read = loaded.get_layer("lookup").get_vocabulary()
        pytest.fail(f"loaded, its vocabulary read from {secret}: {read}")
    assert message.startswith("refusing to load") and "\n" not in message, message
    assert "'lookup'" in message and str(secret) in message, message
