"""The exporter reads the model file the user names once, into a private copy, and every check and the
Keras load read that copy (export/frontend/model_snapshot.py). Read from the path each time, a file
replaced between the checks and the load escaped them: here a tf.keras .h5 whose kernel is kept in a
raw file of the user's (a secret), swapped in after the checks passed on a clean file, was loaded with
the secret's bytes as its weights."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest

from nnsql.export.errors import ExportError
from nnsql.export.frontend import model as frontend
from nnsql.export.frontend.model_limits import Limits
from tests.hostile.test_export_h5_outside_data import SECRET, clean, external_storage, with_kernel  # noqa: F401


@pytest.fixture
def hostile(clean, tmp_path) -> Path:  # noqa: F811
    """The clean model with its kernel stored in a raw secret file: refused whenever it is checked."""
    secret = tmp_path / "pgpass"
    secret.write_bytes(SECRET)
    return with_kernel(clean, tmp_path / "hostile.h5", external_storage(secret))


def kernel_bytes(model) -> bytes:
    return np.asarray(model.get_layer("out").kernel).tobytes()


def swapped_after(name: str, monkeypatch, user_file: Path, replacement: Path) -> None:
    """Once the front end's step `name` has run, the user's file is replaced by `replacement` (as a
    writer of its directory would: a rename over it), and stays so."""
    real = getattr(frontend, name)

    def step(*args, **kwargs):
        result = real(*args, **kwargs)
        os.replace(shutil.copy(replacement, user_file.with_suffix(".tmp")), user_file)
        return result

    monkeypatch.setattr(frontend, name, step)


@pytest.mark.parametrize("step", ["read_model_file", "check_sizes"])
def test_a_file_replaced_during_the_checks_is_not_what_keras_loads(
    clean,  # noqa: F811
    hostile,
    tmp_path,
    step,
    monkeypatch,
):
    """Replaced once the configuration was read, or once the size and outside-data checks passed (the
    last check before the load): what is loaded is the file as it was copied, never the secret."""
    import tf_keras

    expected = kernel_bytes(tf_keras.models.load_model(clean, compile=False))
    user_file = tmp_path / "model.h5"
    shutil.copy(clean, user_file)
    swapped_after(step, monkeypatch, user_file, hostile)
    loaded = frontend.load_model(user_file)
    assert kernel_bytes(loaded) != SECRET
    assert kernel_bytes(loaded) == expected


def test_keras_reads_a_private_copy_removed_afterwards(clean, tmp_path, monkeypatch):  # noqa: F811
    import tf_keras

    user_file = tmp_path / "model.h5"
    shutil.copy(clean, user_file)
    given: list[tuple[Path, int]] = []
    real = tf_keras.models.load_model

    def load(path, *args, **kwargs):
        given.append((Path(path), stat.S_IMODE(os.stat(Path(path).parent).st_mode)))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(tf_keras.models, "load_model", load)
    frontend.load_model(user_file)
    [(path, mode)] = given
    assert path.resolve() != user_file.resolve() and path.suffix == ".h5"
    assert mode == 0o700  # a directory only this user can enter
    assert not path.parent.exists()  # removed once loaded


def test_a_fifo_or_a_device_is_refused_in_one_line(tmp_path):
    fifo = tmp_path / "model.h5"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        with pytest.raises(ExportError, match="is not a regular file") as raised:
            frontend.load_model(path)
        assert "\n" not in str(raised.value)


def test_a_file_beyond_the_size_bound_is_refused_before_it_is_read(tmp_path):
    """A sparse file of 300 MB (no disk used) with --max-parameters 10: refused from its size alone."""
    big = tmp_path / "big.h5"
    with open(big, "wb") as file:
        file.truncate(300 << 20)
    with pytest.raises(ExportError, match="more than --max-parameters allows") as raised:
        frontend.load_model(big, limits=Limits(max_parameters=10))
    assert "\n" not in str(raised.value)


def test_a_link_inside_a_saved_model_is_refused(tmp_path):
    saved = tmp_path / "saved"
    saved.mkdir()
    (saved / "saved_model.pb").write_bytes(b"")
    (saved / "keras_metadata.pb").symlink_to("/etc/passwd")
    with pytest.raises(ExportError, match=r"keras_metadata\.pb is a symbolic link") as raised:
        frontend.load_model(saved)
    assert "\n" not in str(raised.value)
