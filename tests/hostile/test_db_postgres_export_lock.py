"""What serialises exports and activations in PostgreSQL, against a role that merely connects. Found
live by the sixth hostile pass of issue 32: they took the advisory lock `hashtext('nnsql:export')`, and
advisory locks have no owner or privilege: any role that can connect (Mallory here has no privilege on
the exporter's schemas) takes that lock in a session she keeps open, and every export and every
`nnsql models activate` of the database then waits for ever. The lock is now one on the registry
table, which only roles with privileges on it can take. The exporter's sessions are bounded here by a
`lock_timeout` of their own, so a wait ends the test instead of hanging it."""

from __future__ import annotations

import psycopg
import pytest

from tests.export.test_postgres import export
from tests.hostile.test_db_postgres_lookalikes import ALICE, MALLORY, Database

pytestmark = pytest.mark.postgres

WAIT = "options='-c lock_timeout=15000'"  # ms: a waiting export fails within its bound, never hangs
HOLD = "SELECT pg_catalog.pg_advisory_lock(pg_catalog.hashtext('nnsql:export'))"


@pytest.fixture
def database(postgres_server, postgres_dsn) -> Database:
    return Database(postgres_server, postgres_dsn)


def test_a_role_without_privileges_cannot_hold_exports_and_activations(database, cern_mlp_path, capsys):
    with database.admin() as con:
        con.execute(f"REVOKE CREATE ON DATABASE {database.dbname} FROM {MALLORY}")
    alice = f"{database.dsn(ALICE)} {WAIT}"
    assert export(alice, cern_mlp_path, "mnist") == 0, capsys.readouterr().err
    with psycopg.connect(database.dsn(MALLORY), autocommit=True) as mallory:
        mallory.execute(HOLD)  # kept until her session ends
        code = export(alice, cern_mlp_path, "mnist")
        assert code == 0, capsys.readouterr().err
        with psycopg.connect(alice, autocommit=True) as con:
            con.execute("CALL nnsql.activate('mnist', 1)")
            active = con.execute("SELECT version FROM nnsql.models WHERE name = 'mnist' AND active")
            assert active.fetchall() == [(1,)]


def test_two_exports_still_take_turns(database, cern_mlp_path, capsys):
    """The registry's lock is taken by an export and by an activation: the second waits for the first."""
    alice = f"{database.dsn(ALICE)} {WAIT}"
    assert export(alice, cern_mlp_path, "mnist") == 0, capsys.readouterr().err
    short = f"{database.dsn(ALICE)} options='-c lock_timeout=500'"
    with psycopg.connect(alice) as first:
        first.execute("CALL nnsql.activate('mnist', 1)")  # its transaction stays open, holding the lock
        assert export(short, cern_mlp_path, "mnist") == 2
        assert "lock" in capsys.readouterr().err
        first.rollback()
    assert export(alice, cern_mlp_path, "mnist") == 0, capsys.readouterr().err
