"""Look-alikes of PostgreSQL's built-ins are never called by the registry's commands or by score_table.

The export, `CALL nnsql.activate` and scoring are covered by test_db_postgres_lookalikes.py; this test
runs, with the same look-alikes planted by Mallory (in the schema named after each role, and in
`public`, each counting its call), what else reads or writes a registry: `nnsql models list`,
`nnsql models activate` (a rollback: the kept code installed again and checked), `nnsql models remove`,
and `MODEL.score_table` called by the scoring role over a table of its own path's schema.
"""

from __future__ import annotations

import psycopg
import pytest

from tests.export.test_postgres import export
from tests.hostile.test_db_postgres_lookalikes import ALICE, MALLORY, SCORER, Database, plant_lookalikes

pytestmark = pytest.mark.postgres


@pytest.fixture
def database(postgres_server, postgres_dsn) -> Database:
    return Database(postgres_server, postgres_dsn)


@pytest.mark.parametrize("kernel", ["plpgsql", "cube"])
def test_no_lookalike_is_called_by_the_registry_commands_or_score_table(
    database, cern_mlp_path, kernel, capsys
):
    from nnsql.export.registry.cli import main as models

    alice = database.dsn(ALICE)
    options = ("--kernel", kernel, "--grant-to", SCORER)
    for _ in range(2):
        assert export(alice, cern_mlp_path, "mnist", *options) == 0, capsys.readouterr().err
    row = [0.5] * 784
    with psycopg.connect(database.dsn(MALLORY), autocommit=True) as con:
        con.execute("CREATE TABLE public.images (id integer, features float8[])")  # before the look-alikes
        for i in range(3):
            con.execute("INSERT INTO public.images VALUES (%s, %s::float8[])", [i, row])
        con.execute(f"GRANT SELECT ON public.images TO {SCORER}")
        planted = plant_lookalikes(con)
    assert len(planted) > 500
    capsys.readouterr()

    where = ["--dsn", alice, "--name", "mnist"]
    assert models(["list", *where]) == 0, capsys.readouterr().err
    assert models(["activate", "--version", "1", *where]) == 0, capsys.readouterr().err
    assert models(["remove", "--version", "2", *where]) == 0, capsys.readouterr().err
    with psycopg.connect(database.dsn(SCORER), autocommit=True) as con:
        direct = con.execute("SELECT mnist.score(%s::float8[])", [row]).fetchone()[0]
        table = "mnist.score_table('public.images'::regclass, 'id', 'features')"
        rows = con.execute(f"SELECT * FROM {table}").fetchall()
    assert len(rows) == 3 and all(direct in row for row in rows), rows
    assert database.calls() == 0
