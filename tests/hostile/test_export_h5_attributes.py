"""The attributes of a `.h5` model file are data of any HDF5 type and size, whoever wrote them. Found by
the third hostile pass of issue 32: a `model_config` or `training_config` attribute that is a number or
an array (not the JSON string Keras writes) ended `nnsql export` in json's TypeError traceback, and an
attribute of any size was read whole before its size was looked at (the configuration of a `.keras`
archive is refused beyond 64 MiB before it is read)."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from nnsql.export.errors import ExportError
from nnsql.export.frontend import model_file

CONFIG = '{"class_name": "Sequential", "config": {"layers": []}}'


def h5_with(path, **attributes) -> None:
    with h5py.File(path, "w", libver="latest") as file:  # latest: attributes past 64 KB (dense storage)
        file.attrs["keras_version"] = "2.15.0"
        for name, value in attributes.items():
            file.attrs[name] = value


@pytest.mark.parametrize(
    "value", [np.arange(10), 3.5, np.array([b"{", b"}"])], ids=["ints", "float", "strings"]
)
@pytest.mark.parametrize("name", ["model_config", "training_config"])
def test_an_attribute_that_is_not_text_is_refused_in_one_line(tmp_path, name, value):
    path = tmp_path / "m.h5"
    h5_with(path, **{"model_config": CONFIG, name: value})
    with pytest.raises(ExportError, match=f"attribute {name} is not text"):
        model_file.read_h5(path, path)


def test_an_attribute_larger_than_a_configuration_is_refused_before_it_is_read(tmp_path, monkeypatch):
    """The bound lowered to 1 MiB for the test: the same check as at 64 MiB, on a file of 2 MB. A
    fixed-length string or an array declares its size; a variable-length string's is known only once
    read (bounded by the copy of the file, export/frontend/model_snapshot.py)."""
    monkeypatch.setattr(model_file, "MAX_CONFIG_BYTES", 1 << 20)
    path = tmp_path / "m.h5"
    h5_with(path, model_config=np.bytes_(CONFIG[:-1] + ', "pad": "' + "x" * (2 << 20) + '"}'))
    with pytest.raises(ExportError, match="attribute model_config is larger than 1 MiB"):
        model_file.read_h5(path, path)


def test_a_configuration_keras_wrote_still_reads(tmp_path):
    path = tmp_path / "m.h5"
    h5_with(path, model_config=CONFIG, training_config='{"loss": "mse"}')
    read = model_file.read_h5(path, path)
    assert read.config["class_name"] == "Sequential" and read.loss == "mse" and read.library == "tf_keras"


def test_a_variable_length_attribute_beyond_what_the_file_may_hold_is_refused_before_it_is_read(
    tmp_path, monkeypatch
):
    """Found by the fourth hostile pass: a variable-length string declares 16 bytes, so one of any size
    was read whole and parsed (a 256 MiB `model_config` took 1.4 GB and passed). The file's bytes besides
    its weights now bound it before it is read: here 1 MiB per attribute, plus HDF5's structures."""
    monkeypatch.setattr(model_file, "MAX_CONFIG_BYTES", 1 << 20)
    size = 40 << 20  # beyond 3 attributes of 1 MiB and 32 MiB of HDF5 structures
    path = tmp_path / "m.h5"
    h5_with(path, model_config=CONFIG[:-1] + ', "pad": "' + "x" * size + '"}')  # a str: variable-length
    assert h5py.check_string_dtype(h5py.File(path, "r").attrs.get_id("model_config").dtype).length is None
    with pytest.raises(ExportError, match="besides its weights"):
        model_file.read_h5(path, path)


def test_a_variable_length_attribute_larger_than_a_configuration_is_refused_once_read(tmp_path, monkeypatch):
    monkeypatch.setattr(model_file, "MAX_CONFIG_BYTES", 1 << 20)
    path = tmp_path / "m.h5"
    h5_with(path, model_config=CONFIG[:-1] + ', "pad": "' + "x" * (2 << 20) + '"}')
    with pytest.raises(ExportError, match="attribute model_config is larger than 1 MiB"):
        model_file.read_h5(path, path)
