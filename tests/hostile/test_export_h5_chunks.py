"""A `.h5` weight stored in a chunk larger than itself. Found by the eleventh hostile pass of issue 32: the
size check counted each dataset's values from its shape, while HDF5 decompresses a whole chunk to read any
part of it, and an extendable dataset's chunk may exceed its shape (up to 4 GiB). A tf.keras `.h5` whose
3 × 4 kernel sat in one gzip-compressed chunk of 8192 × 8192 zeros, a file of 276 KB, took the export
from 0.83 to 1.05 GB (load 3); the largest chunk, some 4 GB for a file of a few MB. A chunk now counts
against --max-parameters as the values it holds."""

from __future__ import annotations

import h5py
import pytest
import tf_keras

from nnsql.export.errors import ExportError
from nnsql.export.frontend.model import open_model
from nnsql.export.frontend.model_limits import Limits

CHUNK = 2048  # 4,194,304 values a chunk: 16 MB read for 12 values, a file of some 20 KB
LIMITS = Limits(max_parameters=1_000_000)


def kernel_in_a_chunk(path, chunk: int) -> None:
    """A tf.keras Dense(4) on 3 features whose kernel is stored gzip-compressed in chunks of chunk²."""
    model = tf_keras.Sequential([tf_keras.layers.Dense(4, input_shape=(3,), name="d")])
    model.save(path)
    with h5py.File(path, "r+") as file:
        group = file["model_weights/d/d"]
        kernel = group["kernel:0"][...]
        del group["kernel:0"]
        group.create_dataset(
            "kernel:0", data=kernel, maxshape=(None, None), chunks=(chunk, chunk), compression="gzip"
        )


def test_a_weight_in_a_chunk_beyond_the_limit_is_refused_before_it_is_read(tmp_path):
    kernel_in_a_chunk(tmp_path / "m.h5", CHUNK)
    assert (tmp_path / "m.h5").stat().st_size < 1 << 20
    with pytest.raises(ExportError, match="more than --max-parameters 1,000,000") as refused:
        open_model(tmp_path / "m.h5", limits=LIMITS)
    assert "\n" not in str(refused.value)


def test_a_weight_in_chunks_within_its_shape_still_loads(tmp_path):
    kernel_in_a_chunk(tmp_path / "m.h5", 2)
    assert len(open_model(tmp_path / "m.h5", limits=LIMITS).model.get_weights()) == 2
