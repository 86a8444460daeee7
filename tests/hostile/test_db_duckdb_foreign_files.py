"""A file of another format given as the DuckDB database. DuckDB opens a SQLite file through its
sqlite_scanner extension, and downloads that extension from the network when it is not installed: a file
named by `--db` (a shared `models.duckdb` replaced by a SQLite one) made `nnsql export duckdb` and
`nnsql models --db` fetch a native library and load it. Found live by a hostile pass of issue 32 (here
the download failed for want of a network, and its error was the export's). Only DuckDB's own format is
opened now: its magic is read first (export/duckdb/store.py), and anything else is refused in one line.
"""

from __future__ import annotations

import sqlite3

import pytest

from nnsql import cli as nnsql_cli
from tests.export.test_duckdb import export

pytestmark = pytest.mark.duckdb


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A HOME of the test's own: where DuckDB would install a downloaded extension (~/.duckdb)."""
    path = tmp_path / "home"
    path.mkdir()
    monkeypatch.setenv("HOME", str(path))
    return path


def sqlite_file(path):
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (x integer)")
    con.commit()
    con.close()
    return path


def refusal(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_a_sqlite_file_is_not_opened_by_the_registry_command(tmp_path, home, capsys):
    db = sqlite_file(tmp_path / "models.duckdb")
    before = db.read_bytes()
    assert nnsql_cli.main(["models", "list", "--db", str(db)]) == 2
    err = refusal(capsys)
    assert "not a DuckDB database file" in err and "extension" not in err, err
    assert not (home / ".duckdb").exists()
    assert db.read_bytes() == before


def test_a_sqlite_file_is_not_opened_by_an_export(tmp_path, home, cern_mlp_path, capsys):
    db = sqlite_file(tmp_path / "models.duckdb")
    capsys.readouterr()
    assert export(cern_mlp_path, db) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "not a DuckDB database file" in err and "extension" not in err, err
    assert not (home / ".duckdb").exists()


def test_a_damaged_file_is_refused_and_a_new_one_created(tmp_path, home, cern_mlp_path, capsys):
    damaged = tmp_path / "damaged.duckdb"
    damaged.write_bytes(b"\x00garbage" * 100)
    assert export(cern_mlp_path, damaged) == 2
    assert "not a DuckDB database file" in capsys.readouterr().err.strip().splitlines()[-1]
    assert export(cern_mlp_path, tmp_path / "new.duckdb") == 0, capsys.readouterr().err
    assert export(cern_mlp_path, tmp_path / "new.duckdb") == 0, capsys.readouterr().err  # DuckDB's own
