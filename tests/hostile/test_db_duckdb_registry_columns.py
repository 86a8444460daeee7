"""A DuckDB file whose registry tables have other columns than an export makes: its author's to choose.
`nnsql export duckdb` and `nnsql models list --db` ended in DuckDB's traceback (a Binder Error on
`nnsql.models`' missing `name`), found live by a hostile pass of issue 32. Every DuckDB error inside the
store's session is now one line naming the file, as PostgreSQL's are, and the file is left as it was.
"""

from __future__ import annotations

import duckdb
import pytest

from nnsql import cli as nnsql_cli
from tests.export.test_duckdb import export

pytestmark = pytest.mark.duckdb

ODD_REGISTRIES = {
    "models": "CREATE SCHEMA nnsql; CREATE TABLE nnsql.models (x integer)",
    "installs": "CREATE SCHEMA nnsql; CREATE TABLE nnsql.installs (name integer)",
}


def prepared(path, statement: str):
    with duckdb.connect(str(path)) as con:
        con.execute(statement)
    return path


def tables(path) -> list[tuple[str, str]]:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute("SELECT schema_name, table_name FROM duckdb_tables() ORDER BY ALL").fetchall()


def one_line(capsys, path) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err, err
    line = err.splitlines()[-1]
    assert line.startswith("error:") and path.name in line, err
    return line


@pytest.mark.parametrize("table", sorted(ODD_REGISTRIES))
def test_a_registry_of_other_columns_is_refused_in_one_line(tmp_path, cern_mlp_path, table, capsys):
    db = prepared(tmp_path / "models.duckdb", ODD_REGISTRIES[table])
    before = tables(db)
    capsys.readouterr()
    assert nnsql_cli.main(["models", "list", "--db", str(db)]) == 2
    one_line(capsys, db)
    assert export(cern_mlp_path, db) == 2
    one_line(capsys, db)
    assert tables(db) == before  # rolled back: nothing staged
