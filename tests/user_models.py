"""Models of every output kind written the way users write them: a small Sequential network compiled with
the loss its task takes, trained for a few steps with `model.fit`, saved with `model.save` as Keras 3's
`.keras` or, with tf.keras (tf-keras), as a legacy `.h5` file, and a metadata.json naming the classes.

    binary       Dense(1, sigmoid)  + binary_crossentropy          (signal / background)
    multilabel   Dense(3, sigmoid)  + binary_crossentropy          (independent tags)
    logits       Dense(3)           + SparseCategoricalCrossentropy(from_logits=True)
    regression   Dense(1)           + mse
    regression3  Dense(3)           + mse

The four features are standard normal, so the rows `rows()` gives fall on both sides of every threshold.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

FEATURES = 4


@dataclass(frozen=True)
class Case:
    name: str
    kind: str  # the output kind the exporter should read
    units: int
    activation: str
    classes: tuple[str, ...]

    def loss(self, keras: Any) -> Any:
        if self.kind == "logits":
            return keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        return "mse" if self.kind == "values" else "binary_crossentropy"

    def targets(self, x: np.ndarray) -> np.ndarray:
        if self.kind == "binary":
            return (x[:, :1] + x[:, 1:2] > 0).astype(np.float32)
        if self.kind == "multilabel":
            return (x[:, :3] > 0).astype(np.float32)
        if self.kind == "logits":
            return x[:, :3].argmax(axis=1)
        return (x[:, : self.units] * np.arange(1, self.units + 1)).astype(np.float32)


CASES = {
    case.name: case
    for case in (
        Case("binary", "binary", 1, "sigmoid", ("background", "signal")),
        Case("multilabel", "multilabel", 3, "sigmoid", ("muon", "electron", "photon")),
        Case("logits", "logits", 3, "linear", ("up", "down", "strange")),
        Case("regression", "values", 1, "linear", ()),
        Case("regression3", "values", 3, "linear", ()),
    )
}


def rows(count: int = 12, seed: int = 21) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(count, FEATURES)).astype(np.float32)


def trained(case: Case, legacy: bool, seed: int = 3) -> Any:
    """The case's network in Keras 3 or tf.keras, compiled with its loss and fitted for two epochs."""
    if legacy:
        import tf_keras as keras

        first = keras.layers.Dense(8, activation="relu", input_shape=(FEATURES,), name="hidden")
        layers = [first]
    else:
        import keras

        layers = [keras.Input((FEATURES,), name="features"), keras.layers.Dense(8, "relu", name="hidden")]
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([*layers, keras.layers.Dense(case.units, case.activation, name="out")])
    # Eagerly: tracing the training step costs more CPU than the eight steps it runs.
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss=case.loss(keras), run_eagerly=True)
    x = rows(128, seed)
    model.fit(x, case.targets(x), epochs=2, batch_size=32, verbose=0)
    return model


def save(model: Any, case: Case, directory: Path, legacy: bool) -> Path:
    """model.keras or model.h5 in `directory`, beside a metadata.json with the case's classes."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / ("model.h5" if legacy else "model.keras")
    if legacy:
        model.save(path, save_format="h5")
    else:
        model.save(path)
    metadata = {"classes": list(case.classes)} if case.classes else {}
    (directory / "metadata.json").write_text(json.dumps(metadata))
    return path
