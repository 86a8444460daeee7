"""A DuckDB file prepared to blind the check that refuses macros shadowing built-ins. Found by the fifth
hostile pass of issue 32: the check (export/duckdb/trust.py) called `duckdb_functions()`,
`current_database`, `lower` and `list_contains` by their bare names, which DuckDB looks up in the file's
schemas first. A table macro `main.duckdb_functions` that leaves out the hijacking
`main.list_dot_product`, or a `main.current_database` naming no database, had the check see nothing: the
model published, and the hijacking macro ran in the published scoring on its trigger row. The check now
names DuckDB's own catalog."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest

from tests.export.test_duckdb import export
from tests.hostile.test_db_duckdb_shadowing import SHADOWS, TRIGGER, error_line, prepared, schemas

pytestmark = pytest.mark.duckdb

BLINDS = {
    "duckdb_functions": "CREATE MACRO main.duckdb_functions() AS TABLE SELECT * FROM "
    "system.main.duckdb_functions() WHERE function_name NOT IN ('list_dot_product', 'duckdb_functions')",
    "current_database": "CREATE MACRO main.current_database() AS 'nowhere'",
}


@pytest.mark.parametrize("blind", sorted(BLINDS))
def test_a_file_that_hides_its_shadowing_macro_from_the_check_is_refused(
    tmp_path, cern_mlp_path, blind, capsys
):
    db = prepared(tmp_path / "models.duckdb", SHADOWS["list_dot_product"], BLINDS[blind])
    code = export(cern_mlp_path, db)
    if code == 0:  # the code before: published; the hijacking macro runs in scoring
        with duckdb.connect(str(db), read_only=True) as con, pytest.raises(duckdb.Error, match="hijacked"):
            con.execute("SELECT mnist.score(?)", [np.full(784, TRIGGER).tolist()])
        raise AssertionError("published into a file whose macro hijacks list_dot_product")
    err = error_line(capsys)
    assert "built-in" in err and ("main.list_dot_product" in err or f"main.{blind}" in err), err
    assert schemas(db) == []
