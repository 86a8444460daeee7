"""No schema an export uses may let another role create objects in it (export/postgres/ownership.py
CREATORS), whoever owns the schema and everything in it when the export checks.

Found live (hostile pass of issue #32): a superuser installs cube in `public` (what `--grant-script`
asks, and where PostgreSQL 14 and older let every role create). Alice exports with the cube kernel;
the extension and its schema are trusted. Mallory then adds `public.cube(float8[], integer DEFAULT 0)`:
PostgreSQL can no longer choose between it and cube's own `cube(float8[])`, and every scoring call
fails with "function public.cube(double precision[]) is not unique". In a model's schema open to her,
`mnist.score(real[])` would win over Alice's `score(float8[])` for a reader passing a `real[]` column
(an exact match beats a cast) and run as that reader.
"""

from __future__ import annotations

import psycopg
import pytest

from tests.export.test_postgres import export
from tests.hostile.test_db_postgres_lookalikes import ALICE, MALLORY, SCORER, Database

pytestmark = pytest.mark.postgres

AMBIGUOUS = (
    "CREATE FUNCTION public.cube(float8[], integer DEFAULT 0) RETURNS public.cube LANGUAGE plpgsql "
    "AS 'BEGIN RAISE EXCEPTION ''look-alike called''; END'"
)
ROW = "array_fill(0.5::real, ARRAY[784])"


@pytest.fixture
def database(postgres_server, postgres_dsn) -> Database:
    return Database(postgres_server, postgres_dsn)  # Mallory may create in public, as before PostgreSQL 15


def error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize("grantee", [MALLORY, "PUBLIC"])
def test_an_extension_schema_another_role_may_create_in_is_refused(database, cern_mlp_path, grantee, capsys):
    with database.admin() as con:
        con.execute("CREATE EXTENSION cube SCHEMA public")  # a superuser's: owner and schema trusted
        con.execute(
            f"REVOKE CREATE ON SCHEMA public FROM {MALLORY}; GRANT CREATE ON SCHEMA public TO {grantee}"
        )
    code = export(database.dsn(ALICE), cern_mlp_path, "mnist", "--kernel", "cube", "--grant-to", SCORER)
    if code == 0:  # what Mallory does next: every scoring call fails
        with psycopg.connect(database.dsn(MALLORY), autocommit=True) as con:
            con.execute(AMBIGUOUS)
        failing = pytest.raises(psycopg.errors.AmbiguousFunction)
        with psycopg.connect(database.dsn(SCORER), autocommit=True) as con, failing:
            con.execute(f"SELECT mnist.score({ROW})")
    assert code == 2
    err = error_line(capsys)
    assert f"schema public lets role {grantee} create objects in it" in err
    if grantee == "PUBLIC":
        assert "REVOKE CREATE ON SCHEMA public FROM PUBLIC" in err
    else:
        assert f"--registry-owner {MALLORY}" in err
    with database.admin() as con:  # nothing was created
        assert con.execute("SELECT to_regnamespace('mnist')").fetchone() == (None,)


def test_a_model_schema_another_role_may_create_in_is_refused(database, cern_mlp_path, capsys):
    with database.admin() as con:  # a superuser's, empty, open to Alice: every object in it is trusted
        con.execute(f"CREATE SCHEMA mnist; GRANT USAGE, CREATE ON SCHEMA mnist TO {ALICE}, {MALLORY}")
        con.execute(f"GRANT USAGE ON SCHEMA mnist TO {SCORER}")
    code = export(database.dsn(ALICE), cern_mlp_path, "mnist", "--kernel", "plpgsql", "--grant-to", SCORER)
    if code == 0:  # what Mallory does next: her score(real[]) answers a reader's real[] column
        with psycopg.connect(database.dsn(MALLORY), autocommit=True) as con:
            con.execute("CREATE FUNCTION mnist.score(real[]) RETURNS integer LANGUAGE sql AS 'SELECT 7'")
            con.execute(f"GRANT EXECUTE ON FUNCTION mnist.score(real[]) TO {SCORER}")
        with psycopg.connect(database.dsn(SCORER), autocommit=True) as con:
            assert con.execute(f"SELECT mnist.score({ROW})").fetchone() == (7,)
    assert code == 2
    assert f"schema mnist lets role {MALLORY} create objects in it" in error_line(capsys)


def test_a_trusted_grantee_is_accepted(database, cern_mlp_path, capsys):
    with database.admin() as con:
        con.execute(f"CREATE SCHEMA mnist; GRANT USAGE, CREATE ON SCHEMA mnist TO {ALICE}, {MALLORY}")
    options = ("--kernel", "plpgsql", "--registry-owner", MALLORY)
    assert export(database.dsn(ALICE), cern_mlp_path, "mnist", *options) == 0, capsys.readouterr().err


def test_activation_refuses_a_schema_another_role_may_create_in(database, cern_mlp_path, capsys):
    """`CALL nnsql.activate` installs a version's code again: it checks the schemas as the export does."""
    for _ in range(2):
        assert export(database.dsn(ALICE), cern_mlp_path, "mnist", "--kernel", "plpgsql") == 0
    with database.admin() as con:  # granted after the export checked
        con.execute(f"GRANT CREATE ON SCHEMA mnist TO {MALLORY}")
    with psycopg.connect(database.dsn(ALICE), autocommit=True) as con:
        with pytest.raises(psycopg.errors.InsufficientPrivilege) as refused:
            con.execute("CALL nnsql.activate('mnist', 1)")
        assert f"schema mnist lets role {MALLORY} create objects in it" in str(refused.value)
        assert con.execute("SELECT version FROM nnsql.models WHERE active").fetchall() == [(2,)]
