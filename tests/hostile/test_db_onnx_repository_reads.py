"""The files of an ONNX repository that `nnsql export onnx` and `nnsql models --repo` read, written by
another writer of the repository. Found by the sixth hostile pass of issue 32: the server reads a
version's `metadata.json` only up to 4 MiB and as a JSON object, while the exporter (carrying the active
version's class names over) and `nnsql models` read it whole, whatever it was: a sparse `metadata.json`
of 3 GiB (no disk used) took the next export to 3.9 GB and a MemoryError traceback, and one holding `[]`
or text that is not JSON ended it in a traceback. `nnsql models activate --repo` of a version whose
metadata records no sha256 passed its check and switched to a version the server never loads."""

from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path

import keras
import pytest

from nnsql.export.errors import ExportError
from nnsql.export.onnx.__main__ import main as export_onnx
from nnsql.export.onnx.store import RepositoryStore
from nnsql.export.registry.repository import activate, active_version, listing

SPARSE_BYTES = 64 << 20  # beyond the server's 4 MiB bound; a file of gigabytes costs its writer as little


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Path:
    """A repository holding one version of a tiny model, as `nnsql export onnx` writes it."""
    folder = tmp_path_factory.mktemp("repo")
    keras.utils.set_random_seed(1)
    x = keras.Input((4,), name="x")
    keras.Model(x, keras.layers.Dense(3, activation="softmax", name="out")(x)).save(folder / "m.keras")
    argv = ["--model", str(folder / "m.keras"), "--repo", str(folder / "repo"), "--name", "iris", "--quiet"]
    assert export_onnx(argv) == 0
    return folder / "repo"


@pytest.fixture
def repo(published, tmp_path) -> Path:
    """A copy of the published repository, for a test to spoil."""
    copy = tmp_path / "repo"
    for source in published.rglob("*"):
        target = copy / source.relative_to(published)
        if source.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    return copy


def metadata(repo: Path) -> Path:
    return repo / "iris" / "1" / "metadata.json"


def sparse(path: Path, start: bytes) -> None:
    path.unlink()
    with path.open("wb") as file:
        file.write(start)
        file.truncate(SPARSE_BYTES)


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (None, "larger than 4,194,304 bytes"),
        (b"[]", "is not a JSON object"),
        (b"{", "is not JSON"),
        (b'{"classes": "abc"}', "class names cannot be kept: not a list"),
    ],
    ids=["sparse", "list", "not-json", "classes-text"],
)
def test_the_active_versions_metadata_is_read_as_the_server_reads_it(repo, content, said):
    if content is None:
        sparse(metadata(repo), b'{"classes": ["a", "b", "c"], "pad": "')
    else:
        metadata(repo).write_bytes(content)
    tracemalloc.start()
    try:
        with pytest.raises(ExportError, match=said) as refused:
            RepositoryStore(repo, "iris").active_classes("iris")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "\n" not in str(refused.value)
    assert peak < 8 << 20, f"{peak:,} bytes allocated to read it"


def test_models_list_refuses_such_metadata_in_one_line(repo):
    metadata(repo).write_bytes(b"[1, 2]")
    with pytest.raises(ExportError, match=r"iris/1/metadata\.json is not a JSON object"):
        listing(repo, "iris")


def test_a_sparse_active_file_is_not_read_whole(repo):
    active = repo / "iris" / "active"
    active.write_text("1\n")
    sparse(active, b"1")
    tracemalloc.start()
    try:
        assert active_version(repo / "iris") == 1  # not a number it can read: the newest version
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, f"{peak:,} bytes allocated to read it"


def test_a_version_whose_metadata_records_no_sha256_is_not_activated(repo):
    document = json.loads(metadata(repo).read_text())
    del document["sha256"]
    metadata(repo).write_text(json.dumps(document))
    with pytest.raises(ExportError, match=r"records no sha256 of model\.onnx; not activated"):
        activate(repo, "iris", 1)
    assert not os.path.exists(repo / "iris" / "active")
