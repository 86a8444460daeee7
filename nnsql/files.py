"""Where the package's own files are on disk, read through importlib.resources: the templates and data
shipped inside it (`sql/duckdb`, `plsql`, `serve/static`, ...), and the folder that holds the package.

A wheel installs nnsql as plain files and a checkout links its design folders into nnsql/, so both are
real paths on disk: Jinja2 loads templates from them and child processes start from them.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def shipped(*parts: str) -> Path:
    """A folder or file shipped inside the package: `shipped("sql", "duckdb")` is nnsql/sql/duckdb."""
    return Path(str(resources.files("nnsql").joinpath(*parts)))


def import_root() -> Path:
    """The folder that holds the nnsql package (a checkout's root, or site-packages): first on a child
    process's sys.path, it makes the child import this nnsql and not a user's module of the same name."""
    return shipped().parent
