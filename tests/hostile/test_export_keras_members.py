"""A `.keras` archive whose weights member is not what the archive says: its bytes fail their CRC (a
member cut or altered after it was written), or they are not HDF5. Found by the hostile pass of issue
32: the exporter's count of stored weights read the member through h5py and ended `nnsql export` in
Python's `BadZipFile` (or h5py's OSError) traceback. Refused in one line naming the file."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from nnsql.export.errors import ExportError
from nnsql.export.frontend import model as frontend

WEIGHTS = "model.weights.h5"


def rewritten(source: Path, target: Path, weights: bytes | None = None) -> Path:
    """`source` stored uncompressed, its weights replaced by `weights` when given."""
    with zipfile.ZipFile(source) as archive, zipfile.ZipFile(target, "w") as out:
        for name in archive.namelist():
            data = weights if name == WEIGHTS and weights is not None else archive.read(name)
            out.writestr(name, data, compress_type=zipfile.ZIP_STORED)
    return target


def test_a_weights_member_failing_its_crc_is_one_line(cern_mlp_path, tmp_path):
    path = rewritten(cern_mlp_path, tmp_path / "cut.keras")
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(WEIGHTS)
    data = bytearray(path.read_bytes())
    data[info.header_offset + 30 + len(info.filename) + len(info.extra) + info.file_size - 100] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ExportError) as refused:
        frontend.open_model(path)
    assert str(refused.value) == f"cannot read the weights of {path}: Bad CRC-32 for file '{WEIGHTS}'"


def test_a_weights_member_that_is_not_hdf5_is_one_line(cern_mlp_path, tmp_path):
    path = rewritten(cern_mlp_path, tmp_path / "garbage.keras", weights=b"not HDF5 at all" * 100)
    with pytest.raises(ExportError) as refused:
        frontend.open_model(path)
    message = str(refused.value)
    assert message.startswith(f"cannot read the weights of {path}: ") and "\n" not in message
