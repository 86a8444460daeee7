"""What Keras reads from a `.h5` model file, against what the size check counts. Found by the fifth
hostile pass of issue 32: the stored weights were counted once per dataset, from HDF5 metadata, while
Keras's `.h5` loader reads every name a layer's `weight_names` lists, repeats included, into an array of
its own before it checks their count. A 14 KB file naming one gzip-compressed dataset of 10 million
zeros 40 times took the exporter to 2.3 GB (load 1.7), and the default bound let 90 million values
named 40 times through: some 14 GB. A dataset of fixed-length strings counted 4 values for 400 MB read
(1.25 GB peak against 0.77 for a clean file). Both are refused in one line before Keras reads them."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from nnsql.export.errors import ExportError
from nnsql.export.frontend import model_limits
from nnsql.export.frontend.model_file import ModelFile

VALUES = 1_000_000  # one compressed dataset: a few KB of file


def weights_file(path, *, names: list[bytes], dtype: object = "float32", shape=(VALUES,)) -> ModelFile:
    """A `.h5` laid out as Keras saves one (`model_weights` with `layer_names`, a layer group with
    `weight_names`) whose one layer names the dataset `big` as listed."""
    with h5py.File(path, "w") as file:
        weights = file.create_group("model_weights")
        weights.attrs["layer_names"] = np.array([b"dense"])
        layer = weights.create_group("dense")
        layer.create_dataset("big", shape=shape, dtype=dtype, compression="gzip", chunks=(1,) * len(shape))
        layer.attrs["weight_names"] = np.array(names)
    return ModelFile(path=path, format="h5", library="keras", config=None, shown=str(path))


def test_a_dataset_named_many_times_counts_each_time_keras_reads_it(tmp_path):
    model = weights_file(tmp_path / "m.h5", names=[b"big"] * 200)
    assert (tmp_path / "m.h5").stat().st_size < 1 << 20
    with pytest.raises(ExportError, match="stores 200,000,000 weight values, more than --max-parameters"):
        model_limits.check_sizes(model, model_limits.Limits(), trust_code=False)


def test_names_kept_in_chunks_are_counted_too(tmp_path):
    """Keras splits a long attribute into `weight_names0`, `weight_names1`, ... and reads them all."""
    path = tmp_path / "m.h5"
    model = weights_file(path, names=[b"big"])
    with h5py.File(path, "r+") as file:
        layer = file["model_weights/dense"]
        del layer.attrs["weight_names"]
        layer.attrs["weight_names0"] = np.array([b"big"] * 100)
        layer.attrs["weight_names1"] = np.array([b"big"] * 100)
    assert model_limits.stored_values(model) == 200 * VALUES


@pytest.mark.parametrize(
    "dtype",
    ["S50000000", np.dtype(("f4", (1000, 1000))), np.dtype([("a", "f4"), ("b", "f4")]), h5py.ref_dtype],
    ids=["string", "array", "compound", "reference"],
)
def test_a_dataset_of_anything_but_numbers_is_refused(tmp_path, dtype):
    model = weights_file(tmp_path / "m.h5", names=[b"big"], dtype=dtype, shape=(4,))
    with pytest.raises(ExportError, match=r"dataset dense/big holds .*, not numbers"):
        model_limits.stored_values(model)


def test_a_model_keras_saved_counts_what_it_stores(tmp_path):
    """A layer naming each of its weights once, by the paths Keras writes: counted as stored."""
    path = tmp_path / "m.h5"
    with h5py.File(path, "w") as file:
        weights = file.create_group("model_weights")
        weights.attrs["layer_names"] = np.array([b"dense", b"flatten"])
        layer = weights.create_group("dense")
        layer.create_dataset("sequential/dense/kernel", data=np.ones((4, 3), np.float32))
        layer.create_dataset("sequential/dense/bias", data=np.zeros(3, np.float32))
        layer.attrs["weight_names"] = np.array([b"sequential/dense/kernel", b"sequential/dense/bias"])
        weights.create_group("flatten").attrs["weight_names"] = np.array([], dtype="S1")
    model = ModelFile(path=path, format="h5", library="keras", config=None, shown=str(path))
    assert model_limits.stored_values(model) == 15
