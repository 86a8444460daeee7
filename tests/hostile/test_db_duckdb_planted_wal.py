"""A WAL file planted beside a published DuckDB file. DuckDB replays `NAME.wal` on every open of NAME,
read-only opens of a read-only file included, and replays one written for another database as well:
whoever may write the file's directory (not the file) adds a macro `main.list_dot_product` to every
reader's catalog, and the model's macros, which call that built-in by its bare name, then answer what
the macro says. Found live by a hostile pass of issue 32. Not defended for readers (their DuckDB opens
the file); the exporter says so in one line when others may write the directory it publishes in, and a
WAL already there when it exports is replayed first and refused like any planted macro (trust.py).
"""

from __future__ import annotations

import os

import duckdb
import numpy as np
import pytest

from tests.export.test_duckdb import export

pytestmark = pytest.mark.duckdb

PLANT = "CREATE MACRO main.list_dot_product(a, b) AS 7.0"
ROW = [0.5] * 784


def foreign_wal(directory) -> bytes:
    """A WAL holding the planted macro, written by DuckDB for another database."""
    other = directory / "other.duckdb"
    con = duckdb.connect(str(other))
    con.execute("PRAGMA disable_checkpoint_on_shutdown")
    con.execute("SET wal_autocheckpoint = '1TB'")
    con.execute(PLANT)
    con.close()
    data = (directory / "other.duckdb.wal").read_bytes()
    for leftover in directory.glob("other.duckdb*"):
        leftover.unlink()
    return data


def probabilities(db) -> np.ndarray:
    with duckdb.connect(str(db), read_only=True) as con:
        return np.array(con.execute("SELECT mnist.predict_proba(?::DOUBLE[])", [ROW]).fetchone()[0])


def warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("warning:")]


def test_an_export_into_a_directory_others_may_write_says_so(tmp_path, cern_mlp_path, capsys):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # as /tmp: sticky, so the published file cannot be replaced, only joined
    db = shared / "models.duckdb"
    assert export(cern_mlp_path, db) == 0
    said = warnings(capsys.readouterr().err)
    assert len(said) == 1 and "models.duckdb.wal" in said[0] and "every user" in said[0], said
    before = probabilities(db)

    # What the line warns of, as DuckDB does it today: a reader's read-only open of a read-only file
    # replays the planted WAL, and the published model answers otherwise.
    os.chmod(db, 0o444)
    (shared / "models.duckdb.wal").write_bytes(foreign_wal(tmp_path))
    after = probabilities(db)
    assert not np.allclose(before, after), (before, after)


def test_no_warning_where_only_the_exporter_may_write(tmp_path, cern_mlp_path, capsys):
    own = tmp_path / "own"
    own.mkdir()
    os.chmod(own, 0o755)
    assert export(cern_mlp_path, own / "models.duckdb") == 0
    assert warnings(capsys.readouterr().err) == []


def test_a_wal_planted_before_the_export_is_refused(tmp_path, cern_mlp_path, capsys):
    work = tmp_path / "work"
    work.mkdir()
    wal = foreign_wal(work)
    db = tmp_path / "models.duckdb"
    duckdb.connect(str(db)).close()
    (tmp_path / "models.duckdb.wal").write_bytes(wal)
    assert export(cern_mlp_path, db) == 2
    err = capsys.readouterr().err
    assert "main.list_dot_product" in err and "built-in" in err, err
