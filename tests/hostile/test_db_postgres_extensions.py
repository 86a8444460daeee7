"""The cube extension created first by another role is not adopted (export/postgres/ownership.py): its
owner could `DROP EXTENSION cube CASCADE` and take the exporter's points column and runtime functions with
it, although the extension's schema (`public`) looks trusted."""

from __future__ import annotations

import psycopg
import pytest

from tests.export.test_postgres import export
from tests.hostile.test_db_postgres_lookalikes import ALICE, MALLORY, SCORER, Database, expected_class

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


def test_a_cube_extension_of_another_role_is_refused_naming_its_owner(database, cern_mlp_path, capsys):
    mallory_creates_cube(database)
    assert cube_owner(database) == [(MALLORY, "public")]
    assert export(database.dsn(ALICE), cern_mlp_path, "mnist", "--kernel", "cube") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"extension cube is owned by role '{MALLORY}', not by '{ALICE}'" in err
    assert f"--registry-owner {MALLORY}" in err
    with database.admin() as con:  # nothing of Alice's depends on Mallory's extension
        assert con.execute("SELECT to_regnamespace('mnist')").fetchone() == (None,)


def superuser_creates_cube_where_mallory_may_create(database: Database) -> None:
    with database.admin() as con:  # public, where the fixture lets Mallory create (as before PostgreSQL 15)
        con.execute("CREATE EXTENSION cube SCHEMA public")


def kernel_and_users(database: Database) -> tuple[str, int]:
    """The kernel recorded for mnist's active version, and how many functions of the model's schema
    call the cube extension's distance."""
    with database.admin() as con:
        (kernel,) = con.execute("SELECT kernel FROM nnsql.models WHERE name = 'mnist' AND active").fetchone()
        (users,) = con.execute(
            "SELECT count(*) FROM pg_proc WHERE pronamespace = 'mnist'::regnamespace "
            "AND prosrc LIKE '%cube_distance%'"
        ).fetchone()
    return str(kernel), int(users)


@pytest.mark.parametrize(
    ("plant", "why"),
    [
        (
            mallory_creates_cube,
            f"the cube extension (schema public, owner {MALLORY}) is refused: extension cube is owned by "
            f"role '{MALLORY}'",
        ),
        (
            superuser_creates_cube_where_mallory_may_create,
            f"schema public lets role {MALLORY} create objects in it",
        ),
    ],
    ids=["owned by another role", "in a schema another role may create in"],
)
def test_auto_falls_back_to_plpgsql_from_a_refused_cube_saying_why(
    database, cern_mlp_path, plant, why, capsys
):
    plant(database)
    options = ("--kernel", "auto", "--grant-to", SCORER)
    assert export(database.dsn(ALICE), cern_mlp_path, "mnist", *options) == 0, capsys.readouterr().err
    captured = capsys.readouterr()
    notes = [line for line in captured.err.splitlines() if "--kernel auto" in line]
    assert len(notes) == 1 and why in notes[0], captured.err
    assert notes[0].startswith("note: --kernel auto scores with plpgsql: the cube extension (schema public")
    fix = f"--registry-owner {MALLORY}" if plant is mallory_creates_cube else f"FROM {MALLORY}"
    assert fix in notes[0], notes[0]
    assert "kernel: plpgsql (chosen by --kernel auto)" in captured.out
    assert kernel_and_users(database) == ("plpgsql", 0)
    row = [0.25] * 784
    with psycopg.connect(database.dsn(SCORER), autocommit=True) as con:
        answer = con.execute("SELECT mnist.score(%s::real[])", [row]).fetchone()[0]
    assert answer == expected_class(cern_mlp_path, row)
    # --kernel cube still stops on the same refusal, in one line, the plpgsql version still active
    assert export(database.dsn(ALICE), cern_mlp_path, "mnist", "--kernel", "cube") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and why.split(" is refused: ")[-1] in err, err
    assert kernel_and_users(database) == ("plpgsql", 0)


def test_a_trusted_owner_of_the_extension_is_accepted(database, cern_mlp_path, capsys):
    mallory_creates_cube(database)
    options = ("--kernel", "cube", "--registry-owner", MALLORY, "--grant-to", SCORER)
    assert export(database.dsn(ALICE), cern_mlp_path, "mnist", *options) == 0, capsys.readouterr().err
    kernel, users = kernel_and_users(database)
    assert kernel == "cube" and users > 0  # what the fallback tests count is there for a cube export


def test_an_extension_a_superuser_created_is_used(database, cern_mlp_path, capsys):
    with database.admin() as con:  # in a schema only trusted roles may create in (not this public)
        con.execute("CREATE SCHEMA extensions; GRANT USAGE ON SCHEMA extensions TO PUBLIC")
        con.execute("CREATE EXTENSION cube SCHEMA extensions")
    assert export(database.dsn(ALICE), cern_mlp_path, "mnist", "--kernel", "cube") == 0, (
        capsys.readouterr().err
    )
