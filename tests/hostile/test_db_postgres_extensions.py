"""The cube extension created first by another role is not adopted (export/postgres/ownership.py): its
owner could `DROP EXTENSION cube CASCADE` and take the exporter's points column and runtime functions with
it, although the extension's schema (`public`) looks trusted."""

from __future__ import annotations

import psycopg
import pytest

from tests.export.test_postgres import export
from tests.hostile.test_db_postgres_lookalikes import ALICE, MALLORY, SCORER, Database

pytestmark = pytest.mark.postgres


@pytest.fixture
def database(postgres_server, postgres_dsn) -> Database:
    return Database(postgres_server, postgres_dsn)


def mallory_creates_cube(database: Database) -> None:
    with psycopg.connect(database.dsn(MALLORY), autocommit=True) as con:
        con.execute("CREATE EXTENSION cube SCHEMA public")


def cube_owner(database: Database) -> list[tuple]:
    with database.admin() as con:
        return con.execute(
            "SELECT pg_get_userbyid(extowner), extnamespace::regnamespace::text FROM pg_extension "
            "WHERE extname = 'cube'"
        ).fetchall()


@pytest.mark.parametrize("kernel", ["cube", "auto"])
def test_a_cube_extension_of_another_role_is_refused_naming_its_owner(
    database, cern_mlp_path, kernel, capsys
):
    mallory_creates_cube(database)
    assert cube_owner(database) == [(MALLORY, "public")]
    assert export(database.dsn(ALICE), cern_mlp_path, "mnist", "--kernel", kernel) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"extension cube is owned by role '{MALLORY}', not by '{ALICE}'" in err
    assert f"--registry-owner {MALLORY}" in err
    with database.admin() as con:  # nothing of Alice's depends on Mallory's extension
        assert con.execute("SELECT to_regnamespace('mnist')").fetchone() == (None,)


def test_a_trusted_owner_of_the_extension_is_accepted(database, cern_mlp_path, capsys):
    mallory_creates_cube(database)
    options = ("--kernel", "cube", "--registry-owner", MALLORY, "--grant-to", SCORER)
    assert export(database.dsn(ALICE), cern_mlp_path, "mnist", *options) == 0, capsys.readouterr().err


def test_an_extension_a_superuser_created_is_used(database, cern_mlp_path, capsys):
    with database.admin() as con:  # in a schema only trusted roles may create in (not this public)
        con.execute("CREATE SCHEMA extensions; GRANT USAGE ON SCHEMA extensions TO PUBLIC")
        con.execute("CREATE EXTENSION cube SCHEMA extensions")
    assert export(database.dsn(ALICE), cern_mlp_path, "mnist", "--kernel", "cube") == 0, (
        capsys.readouterr().err
    )
