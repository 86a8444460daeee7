"""Targets are data (export/target.py's TARGET_MODULES) and load lazily: `nnsql export duckdb` imports no
module of another target, `--supported` still lists every one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from nnsql.export.__main__ import main
from nnsql.export.target import TARGET_MODULES, TARGETS, command_of, load_all

# What the other targets (and their drivers) would load; DuckDB's export needs none of it.
OTHER_TARGETS = (
    "nnsql.export.postgres",
    "nnsql.export.oracle",
    "nnsql.export.onnx",
    "nnsql.export.spark",
    "psycopg",
    "oracledb",
    "onnxruntime",
    "pyspark",
)

# The export as `nnsql export` runs it, then the names of every module the process loaded.
WRAPPER = """
import json, sys
from nnsql.export.__main__ import main
status = main(sys.argv[1:])
print(json.dumps(sorted(sys.modules)))
sys.exit(status)
"""


def loaded_by(*args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, *args], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout.splitlines()[-1])
    return loaded


def test_duckdb_export_imports_no_other_target(cern_mlp_path: Path, tmp_path: Path) -> None:
    db = tmp_path / "scores.duckdb"
    common = ["--model", str(cern_mlp_path), "--name", "mnist", "--sample-rows", "20", "--quiet"]
    loaded = loaded_by("duckdb", *common, "--db", str(db))
    assert "nnsql.export.duckdb.store" in loaded and db.is_file()  # the export itself ran
    others = [name for name in loaded if name.startswith(OTHER_TARGETS)]
    assert others == []


def test_every_registered_target_has_its_command_and_capabilities() -> None:
    registered = load_all()
    for name in TARGET_MODULES:
        assert registered[name].name == name
        assert callable(command_of(name))


def test_supported_lists_every_registered_target(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--supported"]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert all(f" {name} |" in header for name in TARGET_MODULES)
    assert set(TARGET_MODULES) <= set(TARGETS)
