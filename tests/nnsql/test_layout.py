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

# Python started in the checkout's root (the README's `python -m export.oracle` form): every module object
# loaded from export/ir/graph.py, after importing it under both names if the short one imports at all.
BOTH_NAMES = """\
import sys
from pathlib import Path
import nnsql.export.ir.graph
try:
    import export.ir.graph
except ImportError as error:
    print(error)
file = Path(nnsql.export.ir.graph.__file__).resolve()
files = [Path(m.__file__).resolve() for m in list(sys.modules.values()) if getattr(m, "__file__", None)]
print(files.count(file))
"""


def run_in_checkout(*args: str) -> subprocess.CompletedProcess[str]:
    """Python started in the checkout's root with it on sys.path, as a developer runs it there."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )


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
        ("nnsql.train.spawn.netns", "HOLDER"),
    ],
)
def test_data_files_are_found_inside_the_package(module, name):
    """Templates and static files are read where an installed wheel holds them too: inside nnsql."""
    path = getattr(importlib.import_module(module), name)
    assert path.exists() and path.is_relative_to(shipped())
    assert (import_root() / "nnsql" / "__init__.py").is_file()


def test_a_file_is_one_module_object():
    """export/ir/graph.py is loaded once, as nnsql.export.ir.graph: its short name does not import, and
    says in one line what to import instead."""
    result = run_in_checkout("-c", BOTH_NAMES)
    assert result.returncode == 0, result.stderr
    *refusal, count = result.stdout.splitlines()
    assert count == "1" and len(refusal) == 1 and "import nnsql.export" in refusal[0]


@pytest.mark.parametrize(
    ("module", "usage"),
    [
        ("export", "nnsql export TARGET"),
        ("export.duckdb", "nnsql export duckdb"),
        ("train.spawn", "nnsql spawn"),
        ("serve", "nnsql serve"),
    ],
)
def test_python_m_runs_the_program_under_nnsql(module, usage):
    """`python -m` with a short name runs the nnsql program, loading no module under the short name but
    the package the run starts from (python -X importtime lists every import)."""
    result = run_in_checkout("-X", "importtime", "-m", module, "--help")
    assert result.returncode == 0 and result.stdout.startswith(f"usage: {usage}"), result.stderr
    imported = [line.split("|")[-1].strip() for line in result.stderr.splitlines() if "import time:" in line]
    short = [name for name in imported if name.split(".")[0] in ("export", "train", "serve")]
    assert set(short) <= {module.split(".")[0]}


def test_python_m_keeps_the_exit_status():
    """A refusal of the program run by its short name exits as the program does: 2, one line."""
    result = run_in_checkout("-m", "export.duckdb", "--model", "missing.keras", "--name", "m", "--db", "m.db")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
