"""Schema squatting on PostgreSQL, with two real exporting roles that each hold only CREATE on the database
(what the README asks for): Mallory takes the names `nnsql` or `mnist` first; Alice's export refuses them
in one line naming the owner, and scoring is never hijacked (export/postgres/ownership.py)."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from tests.export.test_postgres import export

pytestmark = pytest.mark.postgres

REGISTRY_SQL = Path(__file__).resolve().parents[2] / "sql" / "postgres" / "registry.sql"
ROW = "array_fill(0.5::float8, ARRAY[784])"

# Mallory's registry: the project's own tables, open to everyone, and a trigger that runs as whoever
# inserts a model (the exporting role): it plants a SECURITY DEFINER function that runs any statement.
PLANT_TRIGGER = """
GRANT USAGE, CREATE ON SCHEMA nnsql TO PUBLIC;
GRANT ALL ON nnsql.models, nnsql.tensors TO PUBLIC;
CREATE TABLE nnsql.planted (by_role text);
GRANT ALL ON nnsql.planted TO PUBLIC;
CREATE FUNCTION nnsql.plant() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO nnsql.planted VALUES (current_user);
    EXECUTE format('CREATE FUNCTION %I.backdoor(statement text) RETURNS void LANGUAGE plpgsql '
                   'SECURITY DEFINER AS ''BEGIN EXECUTE statement; END''', NEW.name);
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO PUBLIC', NEW.name);
    EXECUTE format('GRANT EXECUTE ON FUNCTION %I.backdoor(text) TO PUBLIC', NEW.name);
    RETURN NEW;
END $$;
CREATE TRIGGER plant AFTER INSERT ON nnsql.models FOR EACH ROW EXECUTE FUNCTION nnsql.plant();
"""
SEVEN = "CREATE OR REPLACE FUNCTION mnist.score(features float8[]) RETURNS integer LANGUAGE sql AS 'SELECT 7'"


class Roles:
    """alice and mallory (each with only CREATE on the test database) and a scoring role."""

    def __init__(self, server, dsn: str) -> None:
        self.admin_dsn = dsn
        self.dbname = psycopg.conninfo.conninfo_to_dict(dsn)["dbname"]
        self.server = server
        with psycopg.connect(dsn, autocommit=True) as con:
            for role in ("squat_alice", "squat_mallory", "squat_scorer"):
                if not con.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone():
                    con.execute(f"CREATE ROLE {role} LOGIN")
            con.execute(f"GRANT CREATE ON DATABASE {self.dbname} TO squat_alice, squat_mallory")

    def dsn(self, role: str) -> str:
        return self.server.dsn(self.dbname, user=f"squat_{role}")

    def run(self, role: str, statements: str) -> list[tuple]:
        with psycopg.connect(self.dsn(role), autocommit=True) as con:
            cursor = con.execute(statements)
            return cursor.fetchall() if cursor.description else []

    def query(self, statement: str) -> list[tuple]:
        with psycopg.connect(self.admin_dsn, autocommit=True) as con:
            cursor = con.execute(statement)
            return cursor.fetchall() if cursor.description else []


@pytest.fixture
def roles(postgres_server, postgres_dsn) -> Roles:
    return Roles(postgres_server, postgres_dsn)


def alice_exports(roles: Roles, model: Path, name: str = "mnist", *extra: str) -> int:
    options = ("--kernel", "plpgsql", "--grant-to", "squat_scorer")
    return export(roles.dsn("alice"), model, name, *options, *extra)


def error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_a_squatted_registry_with_a_trigger_is_refused(roles, cern_mlp_path, capsys):
    roles.run("mallory", REGISTRY_SQL.read_text() + PLANT_TRIGGER)
    assert alice_exports(roles, cern_mlp_path) == 2
    err = error_line(capsys)
    assert "schema nnsql is owned by role 'squat_mallory', not by 'squat_alice'" in err
    assert "--registry-owner squat_mallory" in err
    # the trigger never ran as Alice, no backdoor exists, and Mallory cannot make mnist.score answer 7
    assert roles.query("SELECT count(*) FROM nnsql.planted") == [(0,)]
    assert roles.query("SELECT count(*) FROM pg_proc WHERE proname = 'backdoor'") == [(0,)]
    with pytest.raises(psycopg.Error):
        roles.run("mallory", f"SELECT mnist.backdoor('{SEVEN.replace(chr(39), chr(39) * 2)}')")


def test_a_trusted_owner_does_not_make_a_trigger_acceptable(roles, cern_mlp_path, capsys):
    roles.run("mallory", REGISTRY_SQL.read_text() + PLANT_TRIGGER)
    assert alice_exports(roles, cern_mlp_path, "mnist", "--registry-owner", "squat_mallory") == 2
    err = error_line(capsys)
    assert "table nnsql.models has a trigger 'plant'" in err
    assert roles.query("SELECT count(*) FROM nnsql.planted") == [(0,)]


def test_a_squatted_model_schema_is_refused_and_scoring_is_not_hijacked(roles, cern_mlp_path, capsys):
    assert alice_exports(roles, cern_mlp_path, "other") == 0  # Alice's own registry
    roles.run("mallory", "CREATE SCHEMA mnist; GRANT USAGE, CREATE ON SCHEMA mnist TO PUBLIC")
    assert alice_exports(roles, cern_mlp_path) == 2
    assert "schema mnist is owned by role 'squat_mallory'" in error_line(capsys)
    # what Mallory would have done next, as the schema's owner: replace Alice's score() by hers
    with pytest.raises(psycopg.Error):
        roles.run("mallory", "DROP FUNCTION mnist.score(float8[])")
    with pytest.raises(psycopg.errors.UndefinedFunction):
        roles.run("scorer", f"SELECT mnist.score({ROW})")


def test_alice_scores_her_own_model_after_a_dba_removes_the_squat(roles, cern_mlp_path, capsys):
    roles.run("mallory", REGISTRY_SQL.read_text() + PLANT_TRIGGER)
    assert alice_exports(roles, cern_mlp_path) == 2
    roles.query("DROP SCHEMA nnsql CASCADE")
    assert alice_exports(roles, cern_mlp_path) == 0
    with pytest.raises(psycopg.errors.InsufficientPrivilege):  # Mallory cannot replace Alice's functions
        roles.run("mallory", SEVEN)
    import keras
    import numpy as np

    expected = keras.saving.load_model(cern_mlp_path).predict(np.full((1, 784), 0.5), verbose=0).argmax()
    assert expected != 7 and roles.run("scorer", f"SELECT mnist.score({ROW})") == [(expected,)]


def test_an_extension_schema_of_another_role_is_refused(roles, cern_mlp_path, capsys):
    roles.query("CREATE SCHEMA evil AUTHORIZATION squat_mallory; CREATE EXTENSION cube SCHEMA evil")
    roles.run("mallory", "GRANT USAGE ON SCHEMA evil TO PUBLIC")
    assert alice_exports(roles, cern_mlp_path, "mnist", "--kernel", "cube") == 2
    assert "schema evil is owned by role 'squat_mallory'" in error_line(capsys)


def test_every_function_pins_its_search_path(roles, cern_mlp_path):
    """A caller's search_path cannot redirect what the functions call (CREATE FUNCTION ... SET)."""
    assert alice_exports(roles, cern_mlp_path) == 0
    rows = roles.query(
        "SELECT p.oid::regprocedure::text, p.proconfig FROM pg_proc p "
        "JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname IN ('nnsql', 'mnist')"
    )
    assert len(rows) > 10
    # score_table also sets two planner costs (its parallel plan): only search_path decides what runs
    pinned = "search_path=pg_catalog, pg_temp"
    assert [name for name, config in rows if not config or config[0] != pinned] == []
    planner = {entry.split("=")[0] for _, config in rows for entry in config[1:]}
    assert planner <= {"min_parallel_table_scan_size", "parallel_setup_cost"}
