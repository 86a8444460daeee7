"""A tf.keras .h5 model whose kernel keeps its values outside the file: HDF5 external storage naming a raw
file (a secret of the exporting user's), a virtual dataset mapping another HDF5 file, or an external
link to one. tf.keras reads the values from wherever they point; the parity gate passes (Keras and the
target use the same weights) and the export published the secret's bytes as weights, readable by every
scorer. Keras 3 refuses such files; nnsql must too, on every format, in one line, before reading them."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import h5py
import numpy as np
import pytest

from nnsql.export.errors import ExportError
from nnsql.export.frontend.model import load_model
from tests.export.test_duckdb import export

SECRET = b"PGPASSWORD=hunter2-very-secret-value-0123456789A"  # 48 bytes: 12 finite float32 values


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> Path:
    """A tf.keras model (4 inputs, Dense 3) saved as .h5: its kernel holds 12 float32 values."""
    import tf_keras

    path = tmp_path_factory.mktemp("h5") / "clean.h5"
    model = tf_keras.Sequential(
        [tf_keras.layers.Dense(3, activation="softmax", input_shape=(4,), name="out")]
    )
    model.save(path, save_format="h5")
    return path


def with_kernel(clean: Path, path: Path, replace) -> Path:
    """A copy of the model whose kernel dataset is made again by `replace(group, name, shape, dtype)`."""
    shutil.copy(clean, path)
    with h5py.File(path, "r+") as file:
        group = file["model_weights/out/out"]
        name = next(key for key in group if key.startswith("kernel"))
        shape, dtype = group[name].shape, group[name].dtype
        del group[name]
        replace(group, name, shape, dtype)
    return path


def external_storage(secret: Path):
    def replace(group, name, shape, dtype):
        group.create_dataset(name, shape=shape, dtype=dtype, external=[(str(secret), 0, len(SECRET))])

    return replace


def virtual(source: Path):
    def replace(group, name, shape, dtype):
        layout = h5py.VirtualLayout(shape=shape, dtype=dtype)
        layout[...] = h5py.VirtualSource(str(source), "secret", shape=shape)
        group.create_virtual_dataset(name, layout)

    return replace


def external_link(source: Path):
    def replace(group, name, shape, dtype):
        group[name] = h5py.ExternalLink(str(source), "secret")

    return replace


@pytest.fixture
def secrets(tmp_path) -> dict[str, Path]:
    """The secret as a raw file, and as a dataset of another HDF5 file."""
    raw = tmp_path / "pgpass"
    raw.write_bytes(SECRET)
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as file:
        file["secret"] = np.frombuffer(SECRET, "<f4").reshape(4, 3)
    return {"raw": raw, "h5": other}


CASES = {
    "external storage": lambda s: external_storage(s["raw"]),
    "virtual dataset": lambda s: virtual(s["h5"]),
    "external link": lambda s: external_link(s["h5"]),
}


@pytest.mark.parametrize("case", CASES)
def test_weights_kept_outside_the_file_are_refused_and_never_published(
    clean, secrets, tmp_path, case, capsys
):
    hostile = with_kernel(clean, tmp_path / "hostile.h5", CASES[case](secrets))
    with h5py.File(hostile, "r") as file:  # the file really reads the secret: the attack is live
        group = file["model_weights/out/out"]
        kernel = group[next(key for key in group if key.startswith("kernel"))]
        assert np.asarray(kernel).tobytes() == SECRET
    with pytest.raises(ExportError, match="outside the model file") as raised:
        load_model(hostile)
    assert len(str(raised.value).splitlines()) == 1
    db = tmp_path / "scores.duckdb"
    assert export(hostile, db, "m") != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "outside the model file" in err, err
    if db.exists():
        with duckdb.connect(str(db), read_only=True) as con:
            tables = {row[0] for row in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
            assert (
                "tensors" not in tables or not con.execute("SELECT count(*) FROM nnsql.tensors").fetchone()[0]
            )


def test_a_plain_tf_keras_h5_still_loads(clean):
    assert load_model(clean) is not None


HOSTILE_NAME = "evil\nerror: forged line \x1b[31m"  # a line break and a terminal escape
SHOWN_NAME = "evil\\nerror: forged line \\x1b[31m"


def add_outside(kind: str, secrets: dict[str, Path]):
    """A dataset (or link) under a hostile name beside the weights, whose data is the secret's."""

    def add(file) -> str:
        group = file.create_group(HOSTILE_NAME)
        if kind == "external storage":
            group.create_dataset("d", shape=(12,), dtype="<f4", external=[(str(secrets["raw"]), 0, 48)])
            return str(secrets["raw"])
        if kind == "virtual dataset":
            layout = h5py.VirtualLayout(shape=(4, 3), dtype="<f4")
            layout[...] = h5py.VirtualSource(str(secrets["h5"]), "secret", shape=(4, 3))
            group.create_virtual_dataset("d", layout)
            return f"{secrets['h5']}:secret"
        group["d"] = h5py.ExternalLink(str(secrets["h5"]), "secret")
        return f"{secrets['h5']}:secret"

    return add


@pytest.mark.parametrize("case", CASES)
def test_the_refusal_names_the_dataset_and_where_its_data_is_on_one_printable_line(
    clean, secrets, tmp_path, case
):
    hostile = tmp_path / "hostile.h5"
    shutil.copy(clean, hostile)
    with h5py.File(hostile, "r+") as file:
        where = add_outside(case, secrets)(file)
    with pytest.raises(ExportError) as raised:
        load_model(hostile)
    message = str(raised.value)
    assert message.isprintable(), message  # no line break, no escape: one line the terminal shows as is
    assert f"{SHOWN_NAME}/d" in message and where in message, message
    assert message.startswith("hostile.h5: ") and "outside the model file" in message


def test_a_model_file_name_with_a_line_break_is_shown_escaped(clean, secrets, tmp_path):
    hostile = with_kernel(clean, tmp_path / "m\nerror: forged.h5", external_link(secrets["h5"]))
    with pytest.raises(ExportError) as raised:
        load_model(hostile)
    assert str(raised.value).isprintable() and "m\\nerror: forged.h5: " in str(raised.value)
