"""PostgreSQL-specific behaviour against the real server: roles, connection errors, PG* variables."""

from __future__ import annotations

import psycopg
import pytest

from nnsql.export.postgres.__main__ import main as export_postgres
from tests.export.executors import TEST_SAMPLE_ROWS
from tests.postgres_server import PASSWORD, PASSWORD_USER

pytestmark = pytest.mark.postgres


def export(dsn: str, model, name: str = "mnist", *extra: str) -> int:
    return export_postgres(
        ["--model", str(model), "--dsn", dsn, "--name", name, "--quiet", *TEST_SAMPLE_ROWS, *extra]
    )


def admin(dsn: str) -> psycopg.Connection:
    return psycopg.connect(dsn, autocommit=True)


def schemas(dsn: str) -> list[str]:
    with admin(dsn) as con:
        rows = con.execute("SELECT nspname FROM pg_namespace WHERE nspname IN ('nnsql', 'mnist')").fetchall()
    return sorted(row[0] for row in rows)


def test_scoring_role_needs_only_execute(postgres_server, postgres_dsn, cern_mlp_path):
    with admin(postgres_dsn) as con:
        con.execute("DROP ROLE IF EXISTS scorer; CREATE ROLE scorer LOGIN")
        con.execute("DROP ROLE IF EXISTS outsider; CREATE ROLE outsider LOGIN")
    assert export(postgres_dsn, cern_mlp_path, "mnist", "--grant-to", "scorer") == 0
    dbname = psycopg.conninfo.conninfo_to_dict(postgres_dsn)["dbname"]
    with psycopg.connect(postgres_server.dsn(dbname, user="scorer")) as con:
        assert con.execute("SELECT mnist.score(array_fill(0.5::real, ARRAY[784]))").fetchone()[0] in range(10)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            con.execute("SELECT count(*) FROM nnsql.tensors")
    outsider = postgres_server.dsn(dbname, user="outsider")
    with psycopg.connect(outsider) as con, pytest.raises(psycopg.errors.InsufficientPrivilege):
        con.execute("SELECT mnist.score(array_fill(0.5::real, ARRAY[784]))")


def test_grant_script_is_printed(capsys, cern_mlp_path):
    assert (
        export_postgres(
            ["--model", str(cern_mlp_path), "--name", "mnist", "--grant-script", "--grant-to", "app"]
        )
        == 0
    )
    script = capsys.readouterr().out
    assert "GRANT USAGE ON SCHEMA mnist TO app;" in script
    assert "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA mnist TO app;" in script
    assert "CREATE EXTENSION IF NOT EXISTS cube;" in script  # the extension a DBA may have to allow


def test_test_data_loads_and_scores_in_sql(postgres_dsn, digits_model):
    assert export(postgres_dsn, digits_model, "digits", "--load-test-data") == 0
    with admin(postgres_dsn) as con:
        accuracy, rows = con.execute(
            "SELECT avg((digits.score(features) = label)::int)::float8, count(*) FROM digits.testdata"
        ).fetchone()
    assert rows == 450 and accuracy >= 0.95


def test_pg_environment_variables_are_used(postgres_server, postgres_dsn, cern_mlp_path, monkeypatch):
    info = psycopg.conninfo.conninfo_to_dict(postgres_dsn)
    for variable, key in [
        ("PGHOST", "host"),
        ("PGPORT", "port"),
        ("PGUSER", "user"),
        ("PGDATABASE", "dbname"),
    ]:
        monkeypatch.setenv(variable, str(info[key]))
    assert export("", cern_mlp_path) == 0
    assert schemas(postgres_dsn) == ["mnist", "nnsql"]


def test_unreachable_server_is_one_line(postgres_server, cern_mlp_path, capsys):
    dsn = f"host={postgres_server.socket_dir} port=1 user=x dbname=y"
    assert export(dsn, cern_mlp_path) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: cannot connect to PostgreSQL at x@") and len(err.splitlines()) == 1


def test_wrong_password_says_how_to_fix(postgres_server, postgres_dsn, cern_mlp_path, capsys, monkeypatch):
    with admin(postgres_dsn) as con:
        con.execute(f"DROP ROLE IF EXISTS {PASSWORD_USER}")
        con.execute(f"CREATE ROLE {PASSWORD_USER} LOGIN PASSWORD '{PASSWORD}'")
    dbname = psycopg.conninfo.conninfo_to_dict(postgres_dsn)["dbname"]
    dsn = postgres_server.dsn(dbname, user=PASSWORD_USER)
    monkeypatch.setenv("PGPASSWORD", "Bad-Secret-42")
    assert export(dsn, cern_mlp_path) == 2
    err = capsys.readouterr().err
    assert "authentication failed" in err and "PGPASSWORD" in err and "Bad-Secret-42" not in err
    assert schemas(postgres_dsn) == []


def test_missing_privilege_creates_nothing(postgres_server, postgres_dsn, cern_mlp_path, capsys):
    with admin(postgres_dsn) as con:
        con.execute("DROP ROLE IF EXISTS weak; CREATE ROLE weak LOGIN")
        con.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
    dbname = psycopg.conninfo.conninfo_to_dict(postgres_dsn)["dbname"]
    assert export(postgres_server.dsn(dbname, user="weak"), cern_mlp_path) == 2
    err = capsys.readouterr().err.strip()
    assert "missing privilege" in err and "needs CREATE on the database" in err
    assert len(err.splitlines()) == 1
    assert schemas(postgres_dsn) == []


def test_invalid_grant_role_is_refused(postgres_dsn, cern_mlp_path, capsys):
    assert export(postgres_dsn, cern_mlp_path, "mnist", "--grant-to", "app; drop") == 2
    assert "invalid role name 'app; drop'" in capsys.readouterr().err
    assert schemas(postgres_dsn) == []


def plpython_available(dsn: str) -> bool:
    with admin(dsn) as con:
        return (
            con.execute("SELECT count(*) FROM pg_available_extensions WHERE name = 'plpython3u'").fetchone()[
                0
            ]
            > 0
        )


def test_plpython_fast_path_matches_tensorflow(postgres_dsn, mixed_layers_path, cern_mlp_path):
    if not plpython_available(postgres_dsn):
        pytest.skip("plpython3u is not installed (Debian: postgresql-plpython3-15 and python3-numpy)")
    import keras
    import numpy as np

    for name, path in (("mixed", mixed_layers_path), ("mnist", cern_mlp_path)):
        assert export(postgres_dsn, path, name, "--fast-path", "plpython") == 0
        model = keras.saving.load_model(path)
        x = np.random.default_rng(9).random((30, *model.inputs[0].shape[1:]), dtype=np.float32)
        with admin(postgres_dsn) as con:
            language = con.execute(
                "SELECT l.lanname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang "
                "JOIN pg_namespace n ON n.oid = p.pronamespace "
                "WHERE n.nspname = %s AND p.proname = 'predict'",
                [name],
            ).fetchone()[0]
            rows = [
                con.execute(f"SELECT {name}.predict_proba(%s)", [row.ravel().tolist()]).fetchone()[0]
                for row in x
            ]
            with pytest.raises(psycopg.Error, match="must have"):
                con.execute(f"SELECT {name}.score(%s)", [[0.5, 0.5]])
        assert language == "plpython3u"
        assert np.abs(np.array(rows) - model.predict(x, verbose=0)).max() <= 1e-5


def test_concurrent_exports_all_succeed(postgres_dsn, cern_mlp_path, mixed_layers_path):
    """Two exports of one name and one of another, at the same moment, from separate processes."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    def start(model, name):
        command = [
            sys.executable,
            "-m",
            "nnsql.export.postgres",
            "--model",
            str(model),
            "--dsn",
            postgres_dsn,
        ]
        command += ["--name", name, "--quiet", "--sample-rows", "50"]
        return subprocess.Popen(
            command, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, stderr=subprocess.PIPE
        )

    processes = [
        start(cern_mlp_path, "mnist"),
        start(cern_mlp_path, "mnist"),
        start(mixed_layers_path, "mixed"),
    ]
    errors = [process.communicate(timeout=300)[1].decode() for process in processes]
    assert [process.returncode for process in processes] == [0, 0, 0], errors
    with admin(postgres_dsn) as con:
        rows = con.execute("SELECT name, version, active FROM nnsql.models ORDER BY name, version").fetchall()
    assert rows == [("mixed", 1, True), ("mnist", 1, False), ("mnist", 2, True)]


def test_the_exporter_session_cancels_its_query_if_the_exporter_dies(postgres_dsn):
    from nnsql.export.postgres.store import connect

    with connect(postgres_dsn) as con:
        assert con.execute("SHOW client_connection_check_interval").fetchone()[0] == "1s"
