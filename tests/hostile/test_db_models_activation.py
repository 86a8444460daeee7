"""`nnsql models activate --repo` in a repository others also write. The answer check used to be scored
by onnxruntime opening the version's `model.onnx` by its path: a FIFO planted there blocked the command
for ever in onnxruntime's open, and the bytes scored were not those the metadata's sha256 names (the
server loads only those). Now the model is read once as a regular file, verified, and scored from those
bytes. Run in a child process, so that a stall cannot hold the test."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime
import pytest

from tests.conftest import REPO
from tests.serve.test_triton_repository import softmax_model

BOUND_SECONDS = 90  # the child's imports on a loaded machine; a stalled open never ends
ROWS = np.random.default_rng(3).normal(size=(4, 4)).astype(np.float32)


def version(repo: Path, number: int, seed: int) -> Path:
    """A version as `nnsql export onnx` lays it out: the model, its metadata with the model's sha256,
    and the answer check: the rows and what onnxruntime answers on them."""
    folder = repo / "m" / str(number)
    softmax_model(folder / "model.onnx", seed, 3)
    model = (folder / "model.onnx").read_bytes()
    metadata = {
        "sha256": hashlib.sha256(model).hexdigest(),
        "outputs": [{"name": "probs", "shape": [-1, 3]}],
        "output_kinds": ["probabilities"],
        "classes": ["a", "b", "c"],
    }
    (folder / "metadata.json").write_text(json.dumps(metadata))
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    expected = session.run(None, {"x": ROWS})[0]
    rows = [
        {"inputs": {"x": row.tolist()}, "expected": answer.tolist(), "allowed": 1e-5, "answers": {}}
        for row, answer in zip(ROWS, expected, strict=True)
    ]
    (folder / "check.json").write_text(json.dumps({"rows": rows, "shapes": {"x": [4]}}))
    return folder


def activate(repo: Path, number: int) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "nnsql", "models", "activate", "--repo", str(repo)]
    return subprocess.run(
        [*command, "--name", "m", "--version", str(number)],
        capture_output=True,
        text=True,
        timeout=BOUND_SECONDS,
        cwd=REPO,
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    version(tmp_path, 1, seed=1)
    version(tmp_path, 2, seed=2)
    (tmp_path / "m" / "active").write_text("1\n")
    return tmp_path


def test_a_sound_version_activates(repo):
    done = activate(repo, 2)
    assert done.returncode == 0, done.stderr
    assert (repo / "m" / "active").read_text().strip() == "2"


def test_a_fifo_as_the_model_is_refused_in_one_line(repo):
    model = repo / "m" / "2" / "model.onnx"
    model.unlink()
    os.mkfifo(model)
    done = activate(repo, 2)
    assert done.returncode != 0
    assert done.stderr.strip().count("\n") == 0 and "not a regular file" in done.stderr, done.stderr
    assert (repo / "m" / "active").read_text().strip() == "1"


def test_a_model_that_is_not_the_one_its_metadata_names_is_refused(repo):
    """The model of version 1 copied over version 2's with version 2's check rewritten to agree: the
    check passes, but the server would refuse to load it (its sha256 is not version 2's)."""
    other = repo / "m" / "1" / "model.onnx"
    (repo / "m" / "2" / "model.onnx").write_bytes(other.read_bytes())
    (repo / "m" / "2" / "check.json").write_text((repo / "m" / "1" / "check.json").read_text())
    done = activate(repo, 2)
    assert done.returncode != 0
    assert "does not match the sha256" in done.stderr and done.stderr.strip().count("\n") == 0, done.stderr
    assert (repo / "m" / "active").read_text().strip() == "1"
