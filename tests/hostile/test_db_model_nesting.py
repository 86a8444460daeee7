"""A model file whose configuration nests lists or objects deeply: a 200 KB `config.json` of brackets
ended `nnsql export` in a RecursionError traceback from Python's JSON parser, and one nested 900 deep
(which parses) in a Keras error that quoted the whole configuration. Refused before Keras, in one line."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO

DENSE = '{"class_name": "Dense", "config": {"name": "d", "units": 2, "deep": %s}}'
SEQUENTIAL = '{"class_name": "Sequential", "config": {"name": "s", "layers": [%s]}}'


def keras_file(path: Path, config: str) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("config.json", config)
        archive.writestr("metadata.json", '{"keras_version": "3.10.0"}')
    return path


@pytest.mark.parametrize(
    "config",
    [
        SEQUENTIAL % ("[" * 100_000 + "]" * 100_000),  # beyond the parser's recursion
        SEQUENTIAL % (DENSE % ('{"a": ' * 900 + "1" + "}" * 900)),  # parses, beyond any Keras model
    ],
    ids=["brackets", "objects"],
)
def test_a_deeply_nested_configuration_is_refused_in_one_line(tmp_path, config):
    model = keras_file(tmp_path / "deep.keras", config)
    command = [sys.executable, "-m", "nnsql", "export", "duckdb", "--model", str(model)]
    done = subprocess.run(
        [*command, "--db", str(tmp_path / "models.duckdb"), "--name", "m"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    said = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert len(said) == 1 and "nested more than 200 levels deep" in said[0] and len(said[0]) < 400, said
    assert not (tmp_path / "models.duckdb").exists()
