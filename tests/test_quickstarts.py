"""The README's three quick starts, run command by command as a user would, on a model of their own.

Each `sh` block of a "Quick start" section runs in one bash (`set -e`), in an empty directory holding what
the section says the user has: a trained `model.keras` of theirs (6 features, 3 classes, Keras's default
input name) or a tf.keras training script. `pip install ...` lines are checked, not run (the extras they
name must exist; tests/test_package.py installs the wheel); the scorer's port is replaced by a free one.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.fixtures import free_port

TRAINING_SCRIPT = """\
import os
import tempfile

import numpy as np
import tensorflow as tf

strategy = tf.distribute.MultiWorkerMirroredStrategy()
rng = np.random.default_rng(int(os.environ.get("WORKER_NUMBER", "0")))
x = rng.normal(size=(512, 6)).astype("float32")
y = (x[:, 0] + x[:, 1] > 0).astype("int64") + (x[:, 2] > 1).astype("int64")
with strategy.scope():
    model = tf.keras.Sequential([
        tf.keras.layers.Input(shape=(6,)),
        tf.keras.layers.Dense(16, activation="relu"),
        tf.keras.layers.Dense(3, activation="softmax"),
    ])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(x, y, epochs=2, batch_size=64, verbose=2)
# every worker saves (a chief-only save deadlocks the strategy); the chief's copy is the one kept
chief = os.environ.get("WORKER_NUMBER", "0") == "0"
output = os.environ.get("NNSQL_OUTPUT_DIR", ".") if chief else tempfile.mkdtemp()
os.makedirs(output, exist_ok=True)
model.save(os.path.join(output, "model.keras"))
"""


def quick_starts() -> dict[str, str]:
    """Section title → the commands of its `sh` block."""
    readme = (REPO / "README.md").read_text()
    sections = re.findall(r"^## Quick start: (.+?)\n(.*?)(?=^## |\Z)", readme, flags=re.MULTILINE | re.DOTALL)
    return {title: re.search(r"```sh\n(.*?)```", body, flags=re.DOTALL).group(1) for title, body in sections}


def checked_pip_lines(script: str) -> str:
    """The script without its `pip install "nnsql[...]"` lines, once each extra they name exists."""
    pyproject = (REPO / "pyproject.toml").read_text()
    extras = set(
        re.findall(r"^(\w+) = \[", pyproject.split("[project.optional-dependencies]")[1], re.MULTILINE)
    )
    kept = []
    for line in script.splitlines():
        if line.startswith("pip install"):
            named = re.findall(r"nnsql\[([\w,]+)\]", line)
            assert named and set(",".join(named).split(",")) <= extras, line
            continue
        kept.append(line)
    return "\n".join(kept) + "\n"


def users_model(directory: Path) -> None:
    import keras

    keras.backend.clear_session()  # a fresh process's layer names
    keras.utils.set_random_seed(7)
    inputs = keras.Input(shape=(6,))  # named as Keras names it: input_layer
    hidden = keras.layers.Dense(16, activation="relu")(inputs)
    keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(hidden)).save(directory / "model.keras")


def command_path(tmp_path: Path) -> str:
    """`nnsql` and `python` as a user's shell finds them: the venv's bin, or a shim to this interpreter."""
    bin_dir = Path(sys.executable).parent
    if not (bin_dir / "nnsql").exists():  # a venv without `make setup`'s editable install
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        for name, module in (("nnsql", "-m nnsql"), ("python", "")):
            (bin_dir / name).write_text(f'#!/bin/sh\nexec {sys.executable} {module} "$@"\n')
            (bin_dir / name).chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"


def run_quick_start(title: str, directory: Path, tmp_path: Path, port: str = "8000", **env: str) -> str:
    script = (
        checked_pip_lines(quick_starts()[title]).replace(":8000", f":{port}").replace(" 8000 ", f" {port} ")
    )
    environment = {**os.environ, "PATH": command_path(tmp_path), "PYTHONPATH": str(REPO), **env}
    process = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=directory,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: a scorer left running is stopped below
    )
    try:
        output, _ = process.communicate(timeout=600)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
    assert process.returncode == 0, f"{title} failed:\n{output}"
    return output


def test_every_quick_start_is_tested():
    assert sorted(quick_starts()) == sorted(
        [
            "the physicist (train with N workers, score in SQL)",
            "the DBA (score inside PostgreSQL)",
            "the ML engineer (ONNX behind a KServe V2 endpoint)",
        ]
    )


@pytest.mark.slow
def test_the_physicists_quick_start(tmp_path):
    directory = tmp_path / "work"
    directory.mkdir()
    (directory / "train.py").write_text(TRAINING_SCRIPT)
    output = run_quick_start("the physicist (train with N workers, score in SQL)", directory, tmp_path)
    assert "published higgs version 1" in output
    assert re.search(r"│\s+[012]\s+│", output), output  # the class index DuckDB printed


@pytest.mark.slow
@pytest.mark.postgres
def test_the_dbas_quick_start(tmp_path, postgres_dsn):
    directory = tmp_path / "work"
    directory.mkdir()
    users_model(directory)
    output = run_quick_start(
        "the DBA (score inside PostgreSQL)", directory, tmp_path, DATABASE_URL=postgres_dsn
    )
    assert "published churn version 1" in output
    assert re.search(r"^\s+(stays|leaves|unsure)\s*$", output, flags=re.MULTILINE), output


@pytest.mark.slow
def test_the_ml_engineers_quick_start(tmp_path):
    directory = tmp_path / "work"
    directory.mkdir()
    users_model(directory)
    title = "the ML engineer (ONNX behind a KServe V2 endpoint)"
    port = str(free_port())
    script = quick_starts()[title]
    assert "8000" in script
    output = run_quick_start(title, directory, tmp_path, port=port)
    assert '"name":"input_layer"' in output.replace(" ", "") and '"outputs"' in output, output
