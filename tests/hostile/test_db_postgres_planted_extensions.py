"""Trusted extensions another role puts in schemas it may not create in (found live, hostile pass of
issue #32).

PostgreSQL does not check CREATE on the target schema of `CREATE EXTENSION`, and runs a trusted
extension's script as the bootstrap superuser: Mallory, with only CREATE on the database, puts hstore in
Alice's `nnsql` or in a model's schema, and intarray, citext, btree_gist... in `pg_catalog`. Their
objects belong to a superuser, so an owner check of the objects alone trusts them; Mallory owns the
extension and controls them. The exporter refuses such an extension in its own schemas
(export/postgres/ownership.py); in pg_catalog it cannot refuse what every session searches, and this
proves that none of their functions is ever called by an export or by scoring (their code is the
extensions' own, fixed: an exact-type overload among them would give a wrong answer, not Mallory's code).
She may put them in `nnsql` or the model's schema after the export too: none of their functions takes
the name of one the scoring code or its readers call there.
"""

from __future__ import annotations

import time

import psycopg
import pytest

from tests.export.test_postgres import export
from tests.hostile.test_db_postgres_lookalikes import ALICE, MALLORY, SCORER, Database, expected_class

pytestmark = pytest.mark.postgres

# Every trusted contrib extension but cube (the kernel's own) and plpgsql (there already).
TRUSTED = (
    "btree_gin",
    "btree_gist",
    "citext",
    "dict_int",
    "fuzzystrmatch",
    "hstore",
    "intarray",
    "isn",
    "lo",
    "ltree",
    "pg_trgm",
    "pgcrypto",
    "seg",
    "tablefunc",
    "tcn",
    "tsm_system_rows",
    "tsm_system_time",
    "unaccent",
    "uuid-ossp",
)


@pytest.fixture
def database(postgres_server, postgres_dsn) -> Database:
    return Database(postgres_server, postgres_dsn)


@pytest.mark.parametrize("schema", ["nnsql", "mnist"])
def test_an_extension_another_role_put_in_an_export_schema_is_refused(
    database, cern_mlp_path, schema, capsys
):
    assert export(database.dsn(ALICE), cern_mlp_path, "mnist", "--kernel", "plpgsql") == 0
    with psycopg.connect(database.dsn(MALLORY), autocommit=True) as con:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # the schema is closed to her...
            con.execute(f"CREATE FUNCTION {schema}.f() RETURNS int LANGUAGE sql AS 'SELECT 1'")
        con.execute(f"CREATE EXTENSION hstore SCHEMA {schema}")  # ...but not to her extension
    assert export(database.dsn(ALICE), cern_mlp_path, "mnist", "--kernel", "plpgsql") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"extension hstore is owned by role '{MALLORY}', not by '{ALICE}'" in err
    refused = pytest.raises(psycopg.errors.InsufficientPrivilege, match="extension hstore")
    with psycopg.connect(database.dsn(ALICE), autocommit=True) as con, refused:  # activation too
        con.execute("CALL nnsql.activate('mnist', 1)")


def test_no_function_of_extensions_another_role_put_in_pg_catalog_is_called(database, cern_mlp_path, capsys):
    with database.admin() as con:
        con.execute(f"ALTER DATABASE {database.dbname} SET track_functions = 'all'")
    planted = []
    with psycopg.connect(database.dsn(MALLORY), autocommit=True) as con:
        for extension in TRUSTED:
            try:
                con.execute(f'CREATE EXTENSION "{extension}" SCHEMA pg_catalog')
                planted.append(extension)
            except psycopg.Error:  # a name pg_catalog holds already (pgcrypto), a cast only a superuser makes
                pass
    assert len(planted) >= 15, planted
    options = ("--kernel", "cube", "--grant-to", SCORER)
    assert export(database.dsn(ALICE), cern_mlp_path, "mnist", *options) == 0, capsys.readouterr().err
    row = [0.25] * 784
    with psycopg.connect(database.dsn(SCORER), autocommit=True) as con:
        answer = con.execute("SELECT mnist.score(%s::real[])", [row]).fetchone()[0]
    assert answer == expected_class(cern_mlp_path, row)
    calls = """
        SELECT coalesce(sum(s.calls) FILTER (WHERE d.objid IS NOT NULL), 0),
               coalesce(sum(s.calls) FILTER (WHERE s.schemaname = 'mnist'), 0)
          FROM pg_stat_user_functions s
          LEFT JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = s.funcid AND d.deptype = 'e'
               AND d.refobjid IN (SELECT oid FROM pg_extension WHERE extowner = %s::regrole)
    """
    with database.admin() as con:
        for _ in range(50):  # the sessions' counts reach the statistics as they end
            planted_calls, scoring_calls = con.execute(calls, [MALLORY]).fetchone()
            if scoring_calls > 0:
                break
            time.sleep(0.1)
            con.execute("SELECT pg_stat_clear_snapshot()")
    assert scoring_calls > 0  # the counting works: the scoring functions were counted
    assert planted_calls == 0
    # She may also put them in nnsql or the model's schema after the export (no CREATE needed there):
    # none of their functions takes a name the readers or the scoring code call qualified
    with database.admin() as con:
        shared = con.execute(
            "SELECT DISTINCT p.proname::text FROM pg_proc p JOIN pg_depend d ON d.classid = "
            "'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e' JOIN pg_extension e ON e.oid = "
            "d.refobjid WHERE e.extowner = %s::regrole AND p.proname IN (SELECT proname FROM pg_proc "
            "WHERE pronamespace IN ('nnsql'::regnamespace, 'mnist'::regnamespace))",
            [MALLORY],
        ).fetchall()
    assert shared == []
