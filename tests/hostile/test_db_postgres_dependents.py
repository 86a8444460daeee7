"""An object of another role that depends on a model's function never stops the next export.

Found live (hostile pass of issue #32): every export dropped `MODEL.score_table(regclass, text, text)`
before creating it again (the form earlier exports made returned the id as text, which CREATE OR
REPLACE cannot change). A role granted scoring (`--grant-to`) made a view of its own, in a schema of
its own, over that function: PostgreSQL refuses the DROP while anything depends on it, so every later
export of the model failed ("cannot drop function mnist.score_table(regclass,text,text) because other
objects depend on it") and the model stayed at its version for good. A reader's ordinary report view
did the same without meaning to. The function is now dropped only while it is the earlier form.
"""

from __future__ import annotations

import psycopg
import pytest

from tests.export.test_postgres import export
from tests.hostile.test_db_postgres_lookalikes import ALICE, MALLORY, Database

pytestmark = pytest.mark.postgres


@pytest.fixture
def database(postgres_server, postgres_dsn) -> Database:
    return Database(postgres_server, postgres_dsn)


def test_a_readers_view_over_score_table_does_not_stop_the_next_export(database, cern_mlp_path, capsys):
    options = ("--kernel", "plpgsql", "--grant-to", MALLORY)
    assert export(database.dsn(ALICE), cern_mlp_path, "mnist", *options) == 0, capsys.readouterr().err
    with psycopg.connect(database.dsn(MALLORY), autocommit=True) as con:
        con.execute("CREATE TABLE public.images (id integer, features float8[])")
        con.execute("INSERT INTO public.images SELECT 1, array_fill(0.5::float8, ARRAY[784])")
        con.execute(
            "CREATE VIEW public.scored AS SELECT id, score "
            "FROM mnist.score_table('public.images'::regclass, 'id', 'features')"
        )
        before = con.execute("SELECT id, score FROM public.scored").fetchall()
    capsys.readouterr()
    code = export(database.dsn(ALICE), cern_mlp_path, "mnist", *options)
    assert code == 0, capsys.readouterr().err
    with psycopg.connect(database.dsn(MALLORY), autocommit=True) as con:
        assert con.execute("SELECT id, score FROM public.scored").fetchall() == before
    with database.admin() as con:
        assert con.execute("SELECT max(version) FROM nnsql.models WHERE name = 'mnist'").fetchone() == (2,)
