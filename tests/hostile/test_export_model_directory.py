"""The model's directory changing while the exporter copies it (export/frontend/model_snapshot.py).

A SavedModel is a directory: each of its files used to be opened by a path through its directories,
with O_NOFOLLOW guarding the last component only. A directory inside it (`variables/`) swapped for a
link while it was copied sent the copy into the link's target: here a directory of raw secret files
named like the model's weights, copied as the model's weights. Every entry is now opened from its
directory's descriptor, without following a link, so what is copied is the directory that was opened.

The `metadata.json` beside the model (class names, data set) was read by its path long after the
model was copied (after Keras loaded it): `runs/latest` re-pointed to another run meanwhile paired
one run's model with the other run's class names. Both are now copied from one descriptor of their
directory, in the same snapshot.

The swaps are made deterministic by hooking `os.open`: the first time a weight file is opened, the
directory is swapped before the open proceeds.
"""

from __future__ import annotations

import os
from pathlib import Path

import keras
import pytest

from nnsql.export.errors import ExportError
from nnsql.export.frontend import model as frontend
from nnsql.export.frontend.model_snapshot import model_snapshot
from nnsql.export.passes.load import load
from nnsql.export.publish.pipeline import ExportRequest
from tests import models

SECRET = b"-----BEGIN OPENSSH PRIVATE KEY----- not a weight\n"
WEIGHTS = ("variables.index", "variables.data-00000-of-00001")


def saved_model_layout(tmp_path: Path) -> tuple[Path, Path]:
    """A directory laid out as a SavedModel (its files' contents do not matter to the copy), and a
    directory outside it holding secrets under the names of its weight files."""
    saved, outside = tmp_path / "saved", tmp_path / "outside"
    (saved / "variables").mkdir(parents=True)
    outside.mkdir()
    (saved / "saved_model.pb").write_bytes(b"graph")
    (saved / "keras_metadata.pb").write_bytes(b"layers")
    for name in WEIGHTS:
        (saved / "variables" / name).write_bytes(b"weights of " + name.encode())
        (outside / name).write_bytes(SECRET)
    return saved, outside


def swap_on_first_open(monkeypatch, trigger, swap) -> list[bool]:
    """Run `swap` once, just before the first os.open whose path or name satisfies `trigger`."""
    real, swapped = os.open, []

    def opening(path, flags, mode=0o777, *, dir_fd=None):
        if not swapped and trigger(os.fsdecode(path)):
            swapped.append(True)
            swap()
        return real(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "open", opening)
    return swapped


def copied_files(copy: Path) -> dict[str, bytes]:
    return {str(path.relative_to(copy)): path.read_bytes() for path in copy.rglob("*") if path.is_file()}


def test_a_directory_swapped_for_a_link_during_the_copy_is_never_followed(tmp_path, monkeypatch):
    saved, outside = saved_model_layout(tmp_path)

    def swap() -> None:  # variables/ is listed: it becomes a link to the secrets before its files open
        os.rename(saved / "variables", saved / "variables.real")
        os.symlink(outside, saved / "variables")

    swapped = swap_on_first_open(monkeypatch, lambda path: Path(path).name in WEIGHTS, swap)
    try:
        with model_snapshot(saved, 10_000) as copy:
            files = copied_files(copy)
    except ExportError as refused:  # refusing is as good as copying what was opened
        assert "\n" not in str(refused)
        files = {}
    monkeypatch.undo()
    assert swapped
    assert not any(SECRET in data for data in files.values())
    if files:  # copied: the directory that was opened, not the link's target
        assert files["variables/variables.index"] == b"weights of variables.index"


def test_a_link_where_a_directory_was_listed_is_refused(tmp_path, monkeypatch):
    """variables/ replaced by a link before it is opened: refused in one line, the secrets not read."""
    saved, outside = saved_model_layout(tmp_path)
    (saved / "variables" / "variables.index").unlink()
    (saved / "variables" / "variables.data-00000-of-00001").unlink()
    os.rmdir(saved / "variables")
    os.symlink(outside, saved / "variables")
    refusal = "variables is a symbolic link inside a SavedModel"
    with pytest.raises(ExportError, match=refusal) as raised, model_snapshot(saved, 10_000):
        pass
    assert "\n" not in str(raised.value)


def small_model(seed: int) -> keras.Model:
    inputs = keras.Input((4,), name="features")
    outputs = keras.layers.Dense(3, activation="softmax", name="classes")(inputs)
    model = keras.Model(inputs, outputs)
    model.get_layer("classes").kernel.assign(keras.random.normal((4, 3), seed=seed))
    return model


def test_metadata_comes_from_the_directory_the_model_was_copied_from(tmp_path, monkeypatch):
    """runs/latest re-pointed to a newer run once the model was copied (as `nnsql spawn` re-points it):
    the class names are still those beside the model that loads."""
    runs = tmp_path / "runs"
    models.save(small_model(1), runs / "a" / "model", classes=["cat", "dog", "eel"])
    models.save(small_model(2), runs / "b" / "model", classes=["x-ray", "yak", "zebu"])
    latest = runs / "latest"
    latest.symlink_to("a")
    real = frontend.read_model_file

    def read_then_repoint(*args, **kwargs):
        result = real(*args, **kwargs)
        (runs / "next").symlink_to("b")
        os.replace(runs / "next", latest)
        return result

    monkeypatch.setattr(frontend, "read_model_file", read_then_repoint)
    loaded = load(ExportRequest(model_path=latest / "model" / "model.keras", name="m"))
    assert os.readlink(latest) == "b"  # the swap happened while the export read the files
    expected = keras.saving.load_model(runs / "a" / "model" / "model.keras")
    kernel = loaded.model.get_layer("classes").kernel.numpy()
    assert (kernel == expected.get_layer("classes").kernel.numpy()).all()
    assert loaded.classes == ("cat", "dog", "eel")
    assert loaded.metadata["classes"] == ["cat", "dog", "eel"]


def test_a_metadata_link_is_refused_in_one_line(tmp_path):
    """metadata.json linked to another JSON file of the exporting user's would publish it as the model's
    metadata (the registry row holds it): a link is refused."""
    path = models.save(small_model(1), tmp_path / "model")
    (tmp_path / "elsewhere.json").write_text('{"auths": {"registry": "secret"}}')
    (tmp_path / "model" / "metadata.json").unlink()
    (tmp_path / "model" / "metadata.json").symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(ExportError, match=r"metadata\.json is a symbolic link") as raised:
        frontend.open_model(path)
    assert "\n" not in str(raised.value)
