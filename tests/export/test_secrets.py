"""Passwords never come from, or go back to, the command line: a DSN holding one is refused before any
connection, and a malformed DSN is not echoed (it may hold a password)."""

from __future__ import annotations

import pytest

from nnsql.export.oracle.__main__ import main as export_oracle
from nnsql.export.postgres.__main__ import main as export_postgres

SECRET = "Sup3rSecret"


@pytest.mark.parametrize(
    ("dsn", "message"),
    [
        (f"postgresql://scott:{SECRET}@127.0.0.1:1/db", "--dsn holds a password"),
        (f"host=127.0.0.1 user=scott password={SECRET}", "--dsn holds a password"),
        (f"postgresql://scott:p%zz{SECRET}@127.0.0.1/db", "invalid --dsn"),
    ],
)
def test_postgres_dsn_with_a_password_is_refused_and_never_echoed(cern_mlp_path, capsys, dsn, message):
    args = ["--model", str(cern_mlp_path), "--name", "mnist", "--dsn", dsn, "--quiet", "--sample-rows", "5"]
    assert export_postgres(args) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and SECRET not in err and len(err.splitlines()) == 1
    assert "PGPASSWORD" in err or "invalid" in err


@pytest.mark.parametrize(
    ("dsn", "message"),
    [(f"scott/{SECRET}@db:1521/FREEPDB1", "--dsn holds a password"), (f"{SECRET} nonsense", "invalid --dsn")],
)
def test_oracle_dsn_with_a_password_is_refused_and_never_echoed(cern_mlp_path, capsys, dsn, message):
    args = ["--model", str(cern_mlp_path), "--name", "mnist", "--dsn", dsn, "--quiet", "--sample-rows", "5"]
    assert export_oracle(args) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and SECRET not in err and len(err.splitlines()) == 1
