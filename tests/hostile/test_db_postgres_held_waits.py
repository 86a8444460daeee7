"""No session of another role keeps exports and activations waiting while an export holds the registry.

Found live by a hostile pass of issue 32: an export takes its turn on the registry's lock (`LOCK TABLE
nnsql.models IN SHARE ROW EXCLUSIVE MODE`, export/postgres/store.py) and then creates the model's schema.
Mallory, with CREATE on the database as exporting roles have, ran `CREATE SCHEMA mnist2` in a transaction
she kept open: Alice's first export of `mnist2` waited for that transaction for ever, holding the registry's
lock, so every other export and every activation of the database waited behind it, and nothing said why.
Every wait of an export but its turn on the registry is now bounded (`lock_timeout`), and ends in one line.
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from tests.export.test_postgres import export
from tests.hostile.test_db_postgres_lookalikes import ALICE, MALLORY, Database

pytestmark = pytest.mark.postgres

# s: the exporter's bound on a wait (10 s, export/postgres/store.py) and its own work on a loaded
# machine (loading Keras, scoring the samples: about 10 CPU seconds), with room for the load.
PATIENCE = 60
WAITING = "SELECT pid FROM pg_stat_activity WHERE usename = %s AND wait_event_type = 'Lock'"
SHORT = "options='-c lock_timeout=2000'"  # ms: the test's own activation, after the export gave up


@pytest.fixture
def database(postgres_server, postgres_dsn) -> Database:
    return Database(postgres_server, postgres_dsn)


def export_in_thread(dsn: str, model, name: str, *options: str) -> tuple[threading.Thread, dict[str, int]]:
    result: dict[str, int] = {}
    thread = threading.Thread(
        target=lambda: result.update(code=export(dsn, model, name, *options)), daemon=True
    )
    thread.start()
    return thread, result


def cancel_waits(database: Database, role: str) -> None:
    """On the code before, the export waits for ever: cancel its statement, so the test ends."""
    with database.admin() as con:
        con.execute(f"SELECT pg_cancel_backend(pid) FROM ({WAITING}) AS w", [role])


# What Mallory keeps open, the model Alice then exports (with its options), and a word of the line she gets.
HELD = {
    "the model's new schema": ("CREATE SCHEMA mnist2", "mnist2", (), "schema mnist2"),
    "the cube extension": (
        "CREATE EXTENSION cube SCHEMA public",
        "mnist",
        ("--kernel", "cube"),
        "cannot run now",
    ),
}


@pytest.mark.parametrize("held", sorted(HELD))
def test_an_open_transaction_of_another_role_does_not_hold_the_registry(
    database, cern_mlp_path, held, capsys
):
    statement, name, options, named = HELD[held]
    alice = database.dsn(ALICE)  # no lock_timeout of the test's own: the exporter's bound is what ends it
    assert export(alice, cern_mlp_path, "mnist", "--kernel", "plpgsql") == 0, capsys.readouterr().err
    capsys.readouterr()
    with psycopg.connect(database.dsn(MALLORY)) as mallory:
        mallory.execute(statement)  # uncommitted, kept open
        started = time.monotonic()
        thread, result = export_in_thread(alice, cern_mlp_path, name, *options)
        thread.join(PATIENCE)
        waited = time.monotonic() - started
        if thread.is_alive():
            cancel_waits(database, ALICE)
            thread.join(30)
            pytest.fail(f"the export still waited after {waited:.0f} s, holding the registry's lock")
        mallory.rollback()
    err = capsys.readouterr().err
    assert result["code"] == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "lock" in lines[0] and "Traceback" not in err, err
    assert named in lines[0], err  # what it waited for
    with psycopg.connect(f"{alice} {SHORT}", autocommit=True) as con:  # the registry is free again
        con.execute("CALL nnsql.activate('mnist', 1)")
        assert con.execute("SELECT version FROM nnsql.models WHERE name = 'mnist' AND active").fetchall() == [
            (1,)
        ]


def wait_until_waiting(database: Database, role: str) -> bool:
    """True once a session of `role` waits for a lock (within 30 s)."""
    deadline = time.monotonic() + 30
    with database.admin() as con:
        while time.monotonic() < deadline:
            if con.execute(WAITING, [role]).fetchone():
                return True
            time.sleep(0.2)
    return False


def test_a_readers_open_transaction_does_not_stop_scoring_during_an_upgrade(database, cern_mlp_path, capsys):
    """A registry of an earlier release is upgraded by the next export (`ALTER TABLE nnsql.tensors`, which
    waits for every transaction that read the table). A scoring role that scored once in a transaction it
    keeps open held the upgrade, and every scoring call of every reader then queued behind the waiting
    ALTER: all scoring stopped for as long as that transaction lasted."""
    alice = database.dsn(ALICE)
    options = ("--kernel", "plpgsql", "--grant-to", MALLORY)
    assert export(alice, cern_mlp_path, "mnist", *options) == 0, capsys.readouterr().err
    capsys.readouterr()
    with database.admin() as con:  # as an earlier release left it: compressed in line
        con.execute("ALTER TABLE nnsql.tensors ALTER COLUMN value SET STORAGE EXTENDED")
    row = [0.5] * 784
    score = "SELECT mnist.score(%s::float8[])"
    with psycopg.connect(database.dsn(MALLORY)) as mallory:
        before = mallory.execute(score, [row]).fetchone()  # her transaction stays open
        thread, result = export_in_thread(alice, cern_mlp_path, "mnist")
        assert wait_until_waiting(database, ALICE)
        reader = f"{database.dsn(MALLORY)} options='-c statement_timeout={PATIENCE * 1000}'"
        started = time.monotonic()
        try:
            with psycopg.connect(reader, autocommit=True) as other:
                answer = other.execute(score, [row]).fetchone()
        except psycopg.errors.QueryCanceled:
            answer = None
        waited = time.monotonic() - started
        if thread.is_alive() and answer is None:
            cancel_waits(database, ALICE)
        thread.join(PATIENCE)
        mallory.rollback()
    assert answer == before, f"another reader's scoring call waited {waited:.0f} s and got no answer"
    err = capsys.readouterr().err
    assert result["code"] == 2 and "lock" in err and len(err.strip().splitlines()) == 1, err
