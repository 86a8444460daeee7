"""A DuckDB file prepared by an attacker: macros in its schemas that take the names of built-ins the
generated macros call unqualified (`main.list_dot_product`, even the operator `main."+"`) would run
instead of DuckDB's, exact on every row but a trigger, so parity would pass and the model publish. The
exporter refuses such a file in one line naming the macro (export/duckdb/trust.py), and a registry whose
tables are something else (a view named nnsql.models) too."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest

from tests.export.test_duckdb import export

pytestmark = pytest.mark.duckdb

TRIGGER = 0.123456789  # a feature value no sample row holds
SHADOWS = {
    "list_dot_product": "CREATE MACRO main.list_dot_product(a, b) AS CASE WHEN list_contains(b, "
    f"{TRIGGER}) THEN error('hijacked') ELSE system.main.list_dot_product(a, b) END",
    "exp": f"CREATE MACRO main.exp(x) AS CASE WHEN x = {TRIGGER} THEN error('hijacked') "
    "ELSE system.main.exp(x) END",
    "EXP": f"CREATE MACRO main.\"EXP\"(x) AS CASE WHEN x = {TRIGGER} THEN error('hijacked') "
    "ELSE system.main.exp(x) END",
    "+": f"CREATE MACRO main.\"+\"(a, b) AS CASE WHEN b = {TRIGGER} THEN error('hijacked') "
    'ELSE system.main."+"(a, b) END',
}


def prepared(path, *statements: str):
    with duckdb.connect(str(path)) as con:
        for statement in statements:
            con.execute(statement)
    return path


def error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def schemas(path) -> list[str]:
    with duckdb.connect(str(path), read_only=True) as con:
        rows = con.execute("SELECT schema_name FROM duckdb_schemas() WHERE schema_name = 'mnist'")
        return [row[0] for row in rows.fetchall()]


@pytest.mark.parametrize("name", sorted(SHADOWS))
def test_a_file_whose_macro_shadows_a_builtin_is_refused(tmp_path, cern_mlp_path, name, capsys):
    db = prepared(tmp_path / "models.duckdb", SHADOWS[name])
    # the attack works in this DuckDB: the macro runs instead of the built-in
    with duckdb.connect(str(db)) as con, pytest.raises(duckdb.Error, match="hijacked"):
        con.execute(f"SELECT list_dot_product([1.0], [{TRIGGER}]), exp({TRIGGER}), 1.0 + {TRIGGER}")
    assert export(cern_mlp_path, db) == 2
    err = error_line(capsys)
    assert f"main.{name}" in err and "built-in" in err
    assert schemas(db) == []  # nothing published that the macro could hijack


def test_the_refusal_holds_for_a_later_export_into_the_same_file(tmp_path, cern_mlp_path, capsys):
    db = tmp_path / "models.duckdb"
    assert export(cern_mlp_path, db) == 0
    prepared(db, SHADOWS["list_dot_product"])
    assert export(cern_mlp_path, db) == 2
    assert "main.list_dot_product" in error_line(capsys)


def test_a_macro_of_its_own_name_is_left_alone(tmp_path, cern_mlp_path, capsys):
    db = prepared(tmp_path / "models.duckdb", "CREATE MACRO main.twice(x) AS 2 * x")
    assert export(cern_mlp_path, db) == 0, capsys.readouterr().err
    row = np.full(784, TRIGGER)
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT mnist.score(?)", [row.tolist()]).fetchone()[0] in range(10)


@pytest.mark.parametrize("table", ["models", "tensors", "installs", "weights_mnist_v1"])
def test_a_registry_view_is_refused_in_one_line(tmp_path, cern_mlp_path, table, capsys):
    db = prepared(
        tmp_path / "models.duckdb", "CREATE SCHEMA nnsql", f"CREATE VIEW nnsql.{table} AS SELECT 1 AS x"
    )
    assert export(cern_mlp_path, db) == 2
    assert f"nnsql.{table} is a view, not a table" in error_line(capsys)
