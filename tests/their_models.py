"""Models built the way authors on GitHub build them, as a new user brings them to the exporter: a Keras 2
(tf.keras) `Sequential` saved as `.h5` whose `Embedding(..., input_length=n)` declares a float32 input, a
peptide-style token model without a mask, IMDB-style BiLSTMs over masked token ids of any length (Keras 3
`Input(shape=(None,))`, Keras 2 without input_length), and an LSTM with two heads. Weights are seeded (a
trained model's values do not change what is checked: every target against Keras on the same rows).

Each entry saves its model and a metadata.json naming the classes, and says how its rows look.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

VOCABULARY = 40  # token ids are 0 (padding) to 39
STEPS = 10  # the fixed length of the fixed-length token models
FEATURES = 3  # of the multi-output LSTM's steps


@dataclass(frozen=True)
class Theirs:
    """How one model is built and saved, what rows it scores and what its export needs beyond defaults."""

    build: Callable[[Path], Path]
    rows: Callable[[int], np.ndarray]
    options: tuple[str, ...] = ()  # for the SQL targets


def token_rows(count: int, steps: int = STEPS, seed: int = 5) -> np.ndarray:
    """Token ids below VOCABULARY, each row padded with 0 after a random length of 1 to `steps`."""
    generator = np.random.default_rng(seed)
    rows = generator.integers(1, VOCABULARY, (count, steps)).astype(np.float32)
    for row, length in enumerate(generator.integers(1, steps + 1, count)):
        rows[row, length:] = 0
    return rows


def sequence_rows(count: int, seed: int = 6) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(count, STEPS, FEATURES)).astype(np.float32)


def saved(model: Any, directory: Path, classes: list[str], name: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "metadata.json").write_text(json.dumps({"classes": classes}))
    path = directory / name
    if name.endswith(".h5"):
        model.save(path, save_format="h5")
    else:
        model.save(path)
    return path


def keras2_text(directory: Path) -> Path:
    """tf.keras Sequential, as Keras 2 tutorials write it: Embedding with input_length and mask_zero (a
    float32 input), an LSTM, a softmax over three topics."""
    import tf_keras as keras

    keras.utils.set_random_seed(11)
    model = keras.Sequential(
        [
            keras.layers.Embedding(VOCABULARY, 8, input_length=STEPS, mask_zero=True),
            keras.layers.LSTM(6),
            keras.layers.Dense(3, activation="softmax"),
        ]
    )
    model.compile(optimizer="adam", loss="categorical_crossentropy")
    return saved(model, directory, ["sport", "politics", "science"], "model.h5")


def keras2_peptide(directory: Path) -> Path:
    """tf.keras Sequential over peptide residues: Embedding(input_length) without a mask, flattened into
    Dense layers, a binary softmax."""
    import tf_keras as keras

    keras.utils.set_random_seed(12)
    model = keras.Sequential(
        [
            keras.layers.Embedding(VOCABULARY, 5, input_length=STEPS),
            keras.layers.Flatten(),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dense(2, activation="softmax"),
        ]
    )
    model.compile(optimizer="adam", loss="categorical_crossentropy")
    return saved(model, directory, ["non-binder", "binder"], "model.h5")


def imdb_bilstm(directory: Path) -> Path:
    """Keras 3, as the IMDB example writes it: `Input(shape=(None,))` token ids of any length, a masked
    Embedding, a bidirectional LSTM, a softmax over two sentiments."""
    import keras

    keras.utils.set_random_seed(13)
    tokens = keras.Input(shape=(None,), name="tokens")
    x = keras.layers.Embedding(VOCABULARY, 8, mask_zero=True)(tokens)
    x = keras.layers.Bidirectional(keras.layers.LSTM(5))(x)
    model = keras.Model(tokens, keras.layers.Dense(2, activation="softmax")(x))
    model.compile(optimizer="adam", loss="categorical_crossentropy")
    return saved(model, directory, ["negative", "positive"], "model.keras")


def keras2_bilstm_any_length(directory: Path) -> Path:
    """tf.keras Sequential as Keras 2's IMDB tutorial writes it: Embedding without input_length (reviews of
    any length), a bidirectional LSTM, a softmax over two sentiments."""
    import tf_keras as keras

    keras.utils.set_random_seed(16)
    model = keras.Sequential(
        [
            keras.layers.Embedding(VOCABULARY, 6, mask_zero=True),
            keras.layers.Bidirectional(keras.layers.LSTM(4)),
            keras.layers.Dense(2, activation="softmax"),
        ]
    )
    model.build((None, None))
    model.compile(optimizer="adam", loss="categorical_crossentropy")
    return saved(model, directory, ["negative", "positive"], "model.h5")


def two_head_lstm(directory: Path) -> Path:
    """Keras 3 functional LSTM over float sequences with two softmax heads (an activity and a subject)."""
    import keras

    keras.utils.set_random_seed(14)
    sequence = keras.Input(shape=(STEPS, FEATURES), name="sequence")
    state = keras.layers.LSTM(6, name="encoder")(sequence)
    activity = keras.layers.Dense(3, activation="softmax", name="activity")(state)
    subject = keras.layers.Dense(2, activation="softmax", name="subject")(state)
    model = keras.Model(sequence, [activity, subject])
    model.compile(optimizer="adam", loss=["categorical_crossentropy", "categorical_crossentropy"])
    return saved(model, directory, ["walk", "sit", "run"], "model.keras")


def masked_sensor_gru(directory: Path) -> Path:
    """Keras 3 over sensor readings of any length, `Input(shape=(None, features))`, padded with 0 and
    skipped by a Masking layer, a GRU, a softmax over three activities."""
    import keras

    keras.utils.set_random_seed(15)
    readings = keras.Input(shape=(None, FEATURES), name="readings")
    state = keras.layers.GRU(5)(keras.layers.Masking(0.0)(readings))
    model = keras.Model(readings, keras.layers.Dense(3, activation="softmax")(state))
    model.compile(optimizer="adam", loss="categorical_crossentropy")
    return saved(model, directory, ["walk", "sit", "run"], "model.keras")


def padded_sequence_rows(count: int, seed: int = 7) -> np.ndarray:
    """Sensor rows of STEPS steps, 0 after a random length of 1 to STEPS."""
    rows = sequence_rows(count, seed)
    for row, length in enumerate(np.random.default_rng(seed).integers(1, STEPS + 1, count)):
        rows[row, length:] = 0
    return rows


THEIRS: dict[str, Theirs] = {
    "keras2_text": Theirs(keras2_text, token_rows),
    "keras2_peptide": Theirs(keras2_peptide, token_rows),
    "imdb_bilstm": Theirs(imdb_bilstm, token_rows, ("--sequence-length", str(STEPS))),
    "keras2_bilstm_any_length": Theirs(
        keras2_bilstm_any_length, token_rows, ("--sequence-length", str(STEPS))
    ),
    "two_head_lstm": Theirs(two_head_lstm, sequence_rows),
}
