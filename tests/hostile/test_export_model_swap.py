"""A model file swapped between the exporter's check and Keras's load.

Found live (hostile pass of issue #32): the exporter opened the user's `.h5` path once to read its
configuration as data (the check that refuses a Lambda's bytecode), again for the weights it stores
(the limits), and a third time in tf.keras's own reader. Whoever could write that path (a shared
directory, a mounted bucket) renamed a tf.keras file with a Lambda over a harmless one as soon as
TensorFlow was being imported, after the check and before the load: the Lambda's bytecode ran as the
exporting user (it created the marker file), and only the SQL target's "Lambda is not supported"
stopped the export afterwards. Every step now reads one private copy taken first
(export/frontend/model_snapshot.py): the harmless model is exported and the Lambda never runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.export.test_model_files import tf_keras_lambda_model

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """A harmless tf.keras .h5 and one whose Lambda creates MARKER when it runs."""
    import tf_keras

    directory = tmp_path_factory.mktemp("swap")
    paths = {"evil": directory / "evil.h5", "benign": directory / "benign.h5", "marker": directory / "MARKER"}
    tf_keras_lambda_model(paths["marker"]).save(paths["evil"], save_format="h5")
    paths["marker"].unlink(missing_ok=True)  # saving traced the Lambda
    harmless = tf_keras.Sequential(
        [
            tf_keras.layers.Dense(4, input_shape=(3,), name="hidden"),
            tf_keras.layers.Dense(2, activation="softmax", name="out"),
        ]
    )
    harmless.save(paths["benign"], save_format="h5")
    return paths


def imports_tensorflow(pid: int) -> bool:
    """True once TensorFlow's library is mapped: the configuration was read and checked before."""
    try:
        return "tensorflow" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def test_a_file_swapped_after_the_check_is_not_what_loads(files, tmp_path):
    model = tmp_path / "m.h5"
    model.write_bytes(files["benign"].read_bytes())
    evil = tmp_path / "evil.h5"
    evil.write_bytes(files["evil"].read_bytes())
    command = [sys.executable, "-m", "nnsql", "export", "duckdb", "--model", str(model)]
    command += ["--db", str(tmp_path / "models.duckdb"), "--name", "m", "--sample-rows", "64"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while process.poll() is None and not imports_tensorflow(process.pid) and time.monotonic() < deadline:
        time.sleep(0.005)
    os.replace(evil, model)  # what the writer of the directory does
    _, err = process.communicate(timeout=max(1.0, deadline - time.monotonic()))
    assert not files["marker"].exists(), "the Lambda ran: Keras loaded another file than the one checked"
    assert process.returncode == 0, err[-2000:]
