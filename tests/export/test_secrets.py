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


@pytest.fixture
def password_role(postgres_server, postgres_dsn):
    """The role the server asks a password of (scram-sha-256 on its socket: tests/postgres_server.py),
    allowed to export into the test's database: its name, password and a URL holding it. Roles are the
    server's, not the database's: the database (and what the role owns there) and the role are dropped
    after the test, so that other tests can create the role again."""
    from urllib.parse import quote

    import psycopg

    from tests.postgres_server import PASSWORD, PASSWORD_USER

    dbname = psycopg.conninfo.conninfo_to_dict(postgres_dsn)["dbname"]
    with psycopg.connect(postgres_dsn, autocommit=True) as con:
        con.execute(f"DROP ROLE IF EXISTS {PASSWORD_USER}")
        con.execute(f"CREATE ROLE {PASSWORD_USER} LOGIN PASSWORD '{PASSWORD}'")
        con.execute(f"GRANT CREATE ON DATABASE {dbname} TO {PASSWORD_USER}")
    host, port = postgres_server.socket_dir, postgres_server.port
    url = f"postgresql://{PASSWORD_USER}:{quote(PASSWORD)}@/{dbname}?host={host}&port={port}"
    yield {"url": url, "password": PASSWORD, "quoted": quote(PASSWORD), "user": PASSWORD_USER}
    with psycopg.connect(postgres_server.dsn(), autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {dbname} WITH (FORCE)")
        admin.execute(f"DROP ROLE IF EXISTS {PASSWORD_USER}")


@pytest.mark.postgres
@pytest.mark.parametrize("form", ["DATABASE_URL", "--dsn-env", "--dsn-file"])
def test_a_password_from_the_environment_or_a_file_publishes_and_is_never_shown(
    postgres_server, postgres_dsn, password_role, cern_mlp_path, tmp_path, monkeypatch, capsys, form
):
    import psycopg

    role = password_role
    monkeypatch.delenv("PGPASSWORD", raising=False)
    where: list[str] = []
    if form == "DATABASE_URL":
        monkeypatch.setenv("DATABASE_URL", role["url"])
    elif form == "--dsn-env":
        monkeypatch.setenv("CHURN_DB", role["url"])
        where = ["--dsn-env", "CHURN_DB"]
    else:
        (tmp_path / "dsn").write_text(role["url"] + "\n")
        where = ["--dsn-file", str(tmp_path / "dsn")]
    args = ["--model", str(cern_mlp_path), "--name", "mnist", "--kernel", "plpgsql", "--sample-rows", "20"]
    assert export_postgres([*args, *where]) == 0
    from nnsql.export.registry.cli import main as models

    assert models(["list", *where]) == 0
    shown = capsys.readouterr()
    assert f"published mnist version 1 to PostgreSQL {role['user']}@" in shown.out
    with psycopg.connect(postgres_dsn) as con:
        owner = con.execute("SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'mnist'")
        assert owner.fetchone() == (role["user"],)
        tables = con.execute(
            "SELECT string_agg(t, ' ') FROM (SELECT m::text AS t FROM nnsql.models m "
            "UNION ALL SELECT i::text FROM nnsql.installs i) AS rows"
        ).fetchone()[0]
    log = (postgres_server.directory / "log").read_text()
    for secret in (role["password"], role["quoted"]):
        assert secret not in shown.out + shown.err and secret not in tables and secret not in log


@pytest.mark.postgres
def test_a_wrong_password_from_the_environment_is_one_line_without_it(
    password_role, cern_mlp_path, monkeypatch, capsys
):
    role = password_role
    monkeypatch.setenv("DATABASE_URL", role["url"].replace(role["quoted"], SECRET))
    assert export_postgres(["--model", str(cern_mlp_path), "--name", "mnist"]) == 2
    err = capsys.readouterr().err.strip()
    assert "authentication failed" in err and SECRET not in err and len(err.splitlines()) == 1


def test_an_oracle_password_from_the_environment_is_used_and_never_shown(cern_mlp_path, monkeypatch, capsys):
    """`user/password@host:port/service` is refused on the command line but read from --dsn-env; the
    connection (to a host that does not exist here) fails naming the address, not the password."""
    monkeypatch.setenv("ORACLE_URL", f"scott/{SECRET}@nowhere.invalid:1521/FREEPDB1")
    monkeypatch.delenv("ORACLE_PASSWORD", raising=False)
    args = ["--model", str(cern_mlp_path), "--name", "mnist", "--dsn-env", "ORACLE_URL", "--quiet"]
    assert export_oracle(args) == 2
    err = capsys.readouterr().err.strip()
    assert "nowhere.invalid:1521/FREEPDB1" in err and SECRET not in err and len(err.splitlines()) == 1
