"""What a DuckDB file must not hold before nnsql exports into it.

The generated macros call DuckDB's built-in functions and operators by their bare names (`exp`,
`list_dot_product`, `+`), and DuckDB looks a bare name up in the file's schemas before its own
catalog: a macro `main.list_dot_product` (or even `main."+"`) that whoever prepared the file left there
would run instead of the built-in inside every scoring query, exact on every row but the ones it was
written for, so parity would pass. A file holding a macro or function with a built-in's name, in any
schema and any letter case (names are case-insensitive: `main."EXP"` shadows `exp`), is therefore
refused, except the macros an export itself creates in a model's schema (one is named `version`). The
registry must be tables: a view named `nnsql.models` would be read and written through whatever query
it runs, and one named like a version's weights table (`nnsql.weights_<name>_v<N>`) would stop the
export that builds it.
"""

from __future__ import annotations

import grp
import re
import stat
from pathlib import Path

import duckdb

from ..errors import ExportError
from .generator import TEMPLATES

# The macros the exporter creates in a model's schema (sql/duckdb/model.sql.j2); called qualified.
OWN_MACROS = [
    *("params", "predict", "predict_proba", "predict_logits"),
    *("score", "label", "labels", "classes", "version"),
]

# The check's own calls name DuckDB's catalog (`system.main`): a bare `duckdb_functions()` is looked up
# in the file's schemas first like any name, so a table macro `main.duckdb_functions` hiding the shadowing
# macros (or a `main.current_database`) blinded the check while those macros ran in every scoring query.
BUILTIN = "system.main"
SHADOWING = f"""
SELECT f.schema_name, f.function_name FROM {BUILTIN}.duckdb_functions() f
 WHERE f.database_name = {BUILTIN}.current_database() AND NOT f.internal
   AND {BUILTIN}.lower(f.function_name) IN (SELECT {BUILTIN}.lower(s.function_name)
                                             FROM {BUILTIN}.duckdb_functions() s
                                            WHERE s.database_name = 'system')
   AND NOT (f.schema_name <> 'main' AND {BUILTIN}.list_contains(?, {BUILTIN}.lower(f.function_name)))
 ORDER BY f.schema_name, f.function_name
 LIMIT 1
"""

# Every table of the registry (sql/duckdb/registry.sql), read from its statements: a view of any of these
# names is refused, the tables added later included (a view named nnsql.installs ended in a traceback).
REGISTRY_TABLES = re.findall(
    r"CREATE TABLE IF NOT EXISTS nnsql\.(\w+)", (TEMPLATES / "registry.sql").read_text(), re.IGNORECASE
)
REGISTRY_VIEWS = f"""
SELECT view_name FROM {BUILTIN}.duckdb_views()
 WHERE database_name = {BUILTIN}.current_database() AND schema_name = 'nnsql'
   AND ({BUILTIN}.list_contains(?, view_name) OR {BUILTIN}.starts_with(view_name, 'weights_'))
 ORDER BY view_name
 LIMIT 1
"""


def check_file(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Raise ExportError (one line) if the open file shadows a built-in or holds a registry view."""
    row = con.execute(SHADOWING, [OWN_MACROS]).fetchone()
    if row is not None:
        schema, name = row
        raise ExportError(
            f"{path.name}: macro {schema}.{name} has the name of a DuckDB built-in, which the generated "
            "macros call: it would run instead of the built-in in every scoring query; refusing to export "
            f'into this file (drop it: DROP MACRO {schema}."{name}", or use another file)'
        )
    row = con.execute(REGISTRY_VIEWS, [REGISTRY_TABLES]).fetchone()
    if row is not None:
        raise ExportError(
            f"{path.name}: nnsql.{row[0]} is a view, not a table: the registry of versions must be "
            f"tables; refusing to use it (drop it: DROP VIEW nnsql.{row[0]}, or use another file)"
        )


def others_who_write(path: Path) -> str | None:
    """Who else may write the file's directory ('every user', 'group staff'), or None. DuckDB replays the
    file `NAME.wal` beside it on every open, read-only ones included, even a WAL written for another file:
    whoever can create one there adds a macro `main.list_dot_product` to every reader's catalog."""
    try:
        mode = path.resolve().parent.stat()
    except OSError:
        return None
    if mode.st_mode & stat.S_IWOTH:
        return "every user"
    if mode.st_mode & stat.S_IWGRP:
        try:
            return f"group {grp.getgrgid(mode.st_gid).gr_name}"
        except KeyError:
            return f"group {mode.st_gid}"
    return None


def exposure_warning(path: Path) -> str | None:
    """One line to print when others may write the file's directory (see others_who_write)."""
    who = others_who_write(path)
    if who is None:
        return None
    return (
        f"warning: {who} may write {path.resolve().parent}: whoever can may put {path.name}.wal beside "
        "the file, which DuckDB replays on every open (read-only ones too), and change what the "
        "model's macros compute for every reader; publish it in a directory only you may write"
    )
