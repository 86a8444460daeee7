"""A `.keras` archive whose weights are `model.weights.npz`. Found by the eleventh hostile pass of issue
32: Keras 3 reads that file when the archive holds no `model.weights.h5`, and makes each array whole, at
the shape its `.npy` header declares, into a Python list before it checks anything (its own bomb check
starts at 4 GiB a member). The exporter counted only `model.weights.h5`, so an archive of 99 KB took the
export to 2.8 GB (load 3): 25 million compressed zeros. Such an archive is now refused in one line,
before Keras reads it."""

from __future__ import annotations

import io
import tracemalloc
import zipfile

import keras
import numpy as np
import pytest

from nnsql.export.errors import ExportError
from nnsql.export.frontend.model import open_model

VALUES = 4_000_000  # 16 MB of float32 zeros, some 16 KB compressed; Keras's list of them, ~130 MB


def npz_archive(tmp_path):
    """A small model's own config.json and metadata.json, with model.weights.npz in place of its weights."""
    keras.utils.set_random_seed(1)
    features = keras.Input((8,), name="x")
    keras.Model(features, keras.layers.Dense(4, activation="softmax")(features)).save(tmp_path / "m.keras")
    weights = io.BytesIO()
    np.savez_compressed(weights, **{"layers/dense": np.zeros(VALUES, np.float32)})
    path = tmp_path / "npz.keras"
    with zipfile.ZipFile(tmp_path / "m.keras") as saved, zipfile.ZipFile(path, "w") as archive:
        for name in ("config.json", "metadata.json"):
            archive.writestr(name, saved.read(name))
        archive.writestr("model.weights.npz", weights.getvalue())
    return path


def test_an_archive_of_npz_weights_is_refused_before_keras_reads_them(tmp_path):
    path = npz_archive(tmp_path)
    tracemalloc.start()
    try:
        with pytest.raises(ExportError) as refused:
            open_model(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # below the declared array itself: Keras never read it (it allocated it, then ~8 times as much)
    assert peak < VALUES * 4, f"{peak:,} bytes allocated while loading"
    message = str(refused.value)
    assert "model.weights.npz" in message and "\n" not in message, message
