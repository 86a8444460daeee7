"""The database connection and its credentials are checked before the model is loaded: a wrong password
or host is one line in about a second, before TensorFlow is even imported."""

from __future__ import annotations

import os
import subprocess
import sys

import psycopg
import pytest

from tests.conftest import REPO
from tests.postgres_server import PASSWORD, PASSWORD_USER


def run_export(target: str, *args: str, env: dict[str, str]) -> tuple[int, str, list[str]]:
    """Run `python -m export.<target>` with -X importtime: (exit status, error lines, imported modules)."""
    command = [sys.executable, "-X", "importtime", "-m", f"nnsql.export.{target}", *args, "--quiet"]
    environment = {**os.environ, "PYTHONPATH": str(REPO), **env}
    done = subprocess.run(command, cwd=REPO, env=environment, capture_output=True, text=True, timeout=120)
    imported = [line.split("|")[-1].strip() for line in done.stderr.splitlines() if "import time:" in line]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    return done.returncode, "\n".join(errors), imported


@pytest.mark.postgres
def test_a_wrong_postgres_password_is_reported_before_tensorflow_starts(
    postgres_server, postgres_dsn, cern_mlp_path
):
    with psycopg.connect(postgres_dsn, autocommit=True) as con:
        con.execute(f"DROP ROLE IF EXISTS {PASSWORD_USER}")
        con.execute(f"CREATE ROLE {PASSWORD_USER} LOGIN PASSWORD '{PASSWORD}'")
    dbname = psycopg.conninfo.conninfo_to_dict(postgres_dsn)["dbname"]
    dsn = postgres_server.dsn(dbname, user=PASSWORD_USER)
    status, error, imported = run_export(
        "postgres",
        *("--dsn", dsn, "--model", str(cern_mlp_path), "--name", "mnist"),
        env={"PGPASSWORD": "wrong"},
    )
    assert status == 2 and "authentication failed" in error
    assert "tensorflow" not in imported and "keras" not in imported


@pytest.mark.postgres
def test_the_resolved_postgres_target_is_printed(postgres_server, cern_mlp_path):
    """Host, port, database and user as libpq resolves them from the PG* variables, not placeholders."""
    env = {"PGHOST": postgres_server.socket_dir, "PGPORT": "1", "PGUSER": "nobody_here", "PGDATABASE": ""}
    status, error, _ = run_export(
        "postgres", "--dsn", "", "--model", str(cern_mlp_path), "--name", "mnist", env=env
    )
    where = f"nobody_here@{postgres_server.socket_dir}:1/nobody_here"
    assert status == 2 and f"cannot connect to PostgreSQL at {where}:" in error


@pytest.mark.postgres
def test_the_connection_is_reported_before_the_model_loads(postgres_dsn, cern_mlp_path, capsys):
    from tests.export.test_postgres import export

    assert export(postgres_dsn, cern_mlp_path, "mnist", "--quiet") == 0
    from nnsql.export.postgres.__main__ import main

    info = psycopg.conninfo.conninfo_to_dict(postgres_dsn)
    capsys.readouterr()
    args = ["--model", str(cern_mlp_path), "--dsn", postgres_dsn, "--name", "mnist", "--sample-rows", "20"]
    assert main(args) == 0
    out = capsys.readouterr().out.splitlines()
    where = f"{info['user']}@{info['host']}:{info['port']}/{info['dbname']}"
    assert out[0] == f"connected to PostgreSQL {where}"
    assert f"published mnist version 2 to PostgreSQL {where}" in out


def test_an_unreachable_oracle_is_reported_before_tensorflow_starts(cern_mlp_path):
    """The password is asked for, and the connection made, before the model loads."""
    status, error, imported = run_export(
        "oracle",
        *("--dsn", "scott@127.0.0.1:1/FREEPDB1", "--model", str(cern_mlp_path), "--name", "mnist"),
        env={"ORACLE_PASSWORD": "anything"},
    )
    assert status == 2 and "cannot reach Oracle at 127.0.0.1:1/FREEPDB1" in error
    assert "tensorflow" not in imported
