"""The shared test helpers under pytest-xdist: a small suite of two files run on two workers, in a
separate pytest process."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO

CONFTEST = """
import pytest

from tests.fixtures import made_once

@pytest.fixture(scope="session")
def model(tmp_path_factory):
    def make(folder):
        with open(COUNTER, "a") as counter:  # one line per time the model is made
            counter.write("made\\n")
        (folder / "model.txt").write_text("weights")
    return made_once(tmp_path_factory, "model", make) / "model.txt"
"""

TEST = """
def test_reads_the_model(model):
    assert model.read_text() == "weights"
"""


def test_a_session_model_is_made_once_for_all_workers(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    counter = tmp_path / "made.txt"
    (suite / "conftest.py").write_text(f"COUNTER = {str(counter)!r}\n" + CONFTEST)
    for name in ("test_one.py", "test_two.py"):
        (suite / name).write_text(TEST)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    options = ["-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadfile", "."]
    command = [sys.executable, "-m", "pytest", *options]
    result = subprocess.run(command, cwd=suite, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
    assert "2 passed" in result.stdout.splitlines()[-1]
    assert counter.read_text().splitlines() == ["made"]  # not once per worker
