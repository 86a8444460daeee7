"""The checkout's layout as Python sees it: nnsql is a plain package whose design folders are linked
folders, a module lives at the path its name spells, the package's own files are found inside it, and a
`python -m` entry point runs the program under the one name nnsql."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

import nnsql
import nnsql.export.ir.graph
from nnsql.files import import_root, shipped
from tests.conftest import REPO

# Run from the checkout's root, as the README's `python -m export.oracle` form is: the entry module under
# its short name, then every short-name module it loaded.
ENTRY_POINT = """\
import runpy, sys
sys.argv = ["entry", "--help"]
try:
    runpy.run_module({module!r}, run_name="__main__", alter_sys=True)
except SystemExit:
    pass
print("short names:", *sorted(m for m in sys.modules if m.split(".")[0] in ("export", "train", "serve")))
"""


def test_a_module_lives_at_the_path_its_name_spells():
    """No folder joins the package's path at run time: nnsql.export.ir.graph is nnsql/export/ir/graph.py,
    the path mypy, import-linter and an IDE derive from the name."""
    package = Path(nnsql.__path__[0])
    assert nnsql.__path__ == [str(package)] and package.resolve() == REPO / "nnsql"
    assert Path(nnsql.export.ir.graph.__file__) == package / "export" / "ir" / "graph.py"
    assert nnsql.source_checkout() == REPO


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("nnsql.export.duckdb.generator", "TEMPLATES"),
        ("nnsql.export.postgres.generator", "TEMPLATES"),
        ("nnsql.export.oracle.generator", "TEMPLATES"),
        ("nnsql.export.oracle.generator", "SQL_DIR"),
        ("nnsql.serve.web", "STATIC"),
        ("nnsql.train.spawn.local", "LIFELINE"),
    ],
)
def test_data_files_are_found_inside_the_package(module, name):
    """Templates and static files are read where an installed wheel holds them too: inside nnsql."""
    path = getattr(importlib.import_module(module), name)
    assert path.exists() and path.is_relative_to(shipped())
    assert (import_root() / "nnsql" / "__init__.py").is_file()


@pytest.mark.parametrize("module", ["export.duckdb", "export.oracle", "train.spawn", "serve"])
def test_python_m_runs_the_program_under_nnsql(module):
    """Only the packages on the way to the entry point exist under their short names: every module the
    command runs is nnsql's, so no class or registry exists twice."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    code = ENTRY_POINT.format(module=module)
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    parts = module.split(".")
    on_the_way = {".".join(parts[: i + 1]) for i in range(len(parts))}
    short_names = result.stdout.splitlines()[-1].removeprefix("short names:").split()
    assert set(short_names) <= on_the_way
