"""PostgreSQL kernels against the real server: a role without superuser exports and scores with the cube
kernel, the cube algebra's error bound holds on large inputs, score_table, and kernel errors."""

from __future__ import annotations

import uuid

import keras
import numpy as np
import psycopg
import pytest

from nnsql.export.postgres.__main__ import main as export_postgres
from nnsql.export.postgres.kernels import UNIT_ROUNDOFF, dot_error_bound
from tests import models
from tests.export.executors import TEST_SAMPLE_ROWS

pytestmark = pytest.mark.postgres


def export(dsn: str, model, name: str, *extra: str) -> int:
    arguments = ["--model", str(model), "--dsn", dsn, "--name", name, "--quiet", *TEST_SAMPLE_ROWS]
    return export_postgres([*arguments, *extra])


@pytest.fixture
def owner_dsn(postgres_server, postgres_dsn) -> str:
    """An ordinary role with CREATE on the test database, as on a managed service: no superuser."""
    dbname = psycopg.conninfo.conninfo_to_dict(postgres_dsn)["dbname"]
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        admin.execute("DROP ROLE IF EXISTS app_owner")
        admin.execute("CREATE ROLE app_owner LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB")
        admin.execute(f"GRANT CREATE ON DATABASE {dbname} TO app_owner")
    yield postgres_server.dsn(dbname, user="app_owner")
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        admin.execute(f"DROP OWNED BY app_owner CASCADE; REVOKE ALL ON DATABASE {dbname} FROM app_owner")


def registry(dsn: str, name: str) -> list[tuple]:
    with psycopg.connect(dsn) as con:
        return con.execute(
            "SELECT version, kernel, active FROM nnsql.models WHERE name = %s ORDER BY version", [name]
        ).fetchall()


def scores(dsn: str, name: str, x: np.ndarray) -> np.ndarray:
    with psycopg.connect(dsn) as con:
        rows = [con.execute(f"SELECT {name}.predict(%s)", [r.tolist()]).fetchone()[0] for r in x]
    return np.array(rows, dtype=np.float64)


def test_role_without_superuser_scores_with_cube(owner_dsn, cern_mlp_path, capsys):
    with psycopg.connect(owner_dsn) as con:
        assert con.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone() == (
            False,
        )
    assert export(owner_dsn, cern_mlp_path, "mnist") == 0
    assert "kernel: cube (chosen by --kernel auto)" in capsys.readouterr().out
    assert registry(owner_dsn, "mnist") == [(1, "cube", True)]
    with psycopg.connect(owner_dsn) as con:
        extensions = {row[0] for row in con.execute("SELECT extname FROM pg_extension").fetchall()}
        language = con.execute(
            "SELECT l.lanname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang "
            "WHERE p.oid = 'mnist.predict(float8[])'::regprocedure"
        ).fetchone()[0]
    assert "cube" in extensions and "plpython3u" not in extensions and language == "plpgsql"
    x = np.random.default_rng(3).random((40, 784))
    expected = keras.saving.load_model(cern_mlp_path).predict(x.astype(np.float32), verbose=0)
    assert np.abs(scores(owner_dsn, "mnist", x) - expected).max() <= 1e-5


def test_kernel_the_role_cannot_use_is_one_line_and_keeps_the_previous_version(
    owner_dsn, cern_mlp_path, capsys
):
    assert export(owner_dsn, cern_mlp_path, "mnist", "--kernel", "cube") == 0
    capsys.readouterr()
    assert export(owner_dsn, cern_mlp_path, "mnist", "--kernel", "plpython") == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "--kernel plpython cannot run here" in error and "superuser" in error
    assert registry(owner_dsn, "mnist") == [(1, "cube", True)]
    assert scores(owner_dsn, "mnist", np.full((1, 784), 0.5)).shape == (1, 10)


def test_cube_products_stay_within_the_stated_bound_on_large_inputs(postgres_dsn, tmp_path):
    """±1e3 inputs against float64 numpy: the cube algebra's rounding stays under dot_error_bound."""
    keras.utils.set_random_seed(5)
    inputs = keras.Input(shape=(784,), name="features")
    model = keras.Model(inputs, keras.layers.Dense(10, name="logits")(inputs))
    path = models.save(model, tmp_path / "linear")
    assert export(postgres_dsn, path, "linear", "--kernel", "cube") == 0
    kernel, bias = (np.asarray(w, dtype=np.float64) for w in model.get_layer("logits").get_weights())
    x = np.random.default_rng(4).uniform(-1e3, 1e3, (30, 784))
    exact = x @ kernel + bias
    error = np.abs(scores(postgres_dsn, "linear", x) - exact)
    bound = dot_error_bound(x, kernel) + 4 * UNIT_ROUNDOFF * np.abs(exact)  # plus the bias addition
    assert registry(postgres_dsn, "linear")[0][1] == "cube"
    assert np.all(error <= bound), f"max error/bound {np.max(error / bound):.2f}"
    assert bound.max() < 1e-4 * np.abs(exact).mean()  # the bound itself says something


def test_score_table_scores_every_row_as_the_caller(postgres_server, postgres_dsn, cern_mlp_path):
    assert export(postgres_dsn, cern_mlp_path, "mnist", "--kernel", "cube") == 0
    x = np.random.default_rng(6).random((12, 784))
    table, id_column, features = '"Images; DROP TABLE x"', 'Row "id"', "pixels')--"
    dbname = psycopg.conninfo.conninfo_to_dict(postgres_dsn)["dbname"]
    with psycopg.connect(postgres_dsn, autocommit=True) as con:
        con.execute(f'CREATE TABLE {table} ("Row ""id""" integer, "pixels\')--" real[])')
        for i, row in enumerate(x):
            con.execute(f"INSERT INTO {table} VALUES (%s, %s)", [i, row.tolist()])
        rows = con.execute(
            "SELECT id, score, probabilities FROM mnist.score_table(%s, %s, %s) ORDER BY id",
            [table, id_column, features],
        ).fetchall()
        single = [
            con.execute("SELECT mnist.score(%s)", [r.astype(np.float32).tolist()]).fetchone()[0] for r in x
        ]
        con.execute("DROP ROLE IF EXISTS reader; CREATE ROLE reader LOGIN")
        con.execute(
            "GRANT USAGE ON SCHEMA mnist TO reader; GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA mnist TO reader"
        )
        with pytest.raises(psycopg.errors.UndefinedColumn):
            con.execute("SELECT * FROM mnist.score_table(%s, 'id', 'no such')", [table])
        con.execute("CREATE TABLE named (id uuid, features real[])")
        con.execute("INSERT INTO named VALUES (gen_random_uuid(), %s)", [x[0].tolist()])
        with pytest.raises(psycopg.errors.DatatypeMismatch) as refused:
            con.execute("SELECT * FROM mnist.score_table('named', 'id', 'features')")
        kept = con.execute(
            "SELECT id FROM mnist.score_table('named', 'id', 'features', NULL::uuid)"
        ).fetchone()
    assert [r[0] for r in rows] == list(range(12))  # integers, sorted as numbers: 10 after 9, not after 1
    assert (
        "mnist.score_table('public.named', 'id', 'features', NULL::uuid)"
        in str(refused.value).splitlines()[0]
    )
    assert isinstance(kept[0], uuid.UUID)
    assert [r[1] for r in rows] == single
    denied = pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied for table")
    with psycopg.connect(postgres_server.dsn(dbname, user="reader")) as reader, denied:
        reader.execute("SELECT * FROM mnist.score_table(%s, %s, %s)", [table, id_column, features])


@pytest.mark.parametrize("kernel", ["plpgsql", "cube", "plpython"])
def test_every_kernel_scores_under_a_parallel_plan(postgres_dsn, cern_mlp_path, kernel):
    """Big tables get parallel plans; PL/Python's plpy.execute cannot run in a parallel worker."""
    assert export(postgres_dsn, cern_mlp_path, "mnist", "--kernel", kernel) == 0
    x = np.random.default_rng(8).random((64, 784))
    with psycopg.connect(postgres_dsn) as con:
        con.execute(
            "CREATE TABLE images AS SELECT i AS id, %s::float8[] AS features FROM generate_series(1, 0) i",
            [[0.0]],
        )
        for i, row in enumerate(x):
            con.execute("INSERT INTO images VALUES (%s, %s)", [i, row.tolist()])
        con.execute("ANALYZE images")
        for setting in ("parallel_setup_cost", "parallel_tuple_cost", "min_parallel_table_scan_size"):
            con.execute(f"SET {setting} = 0")
        con.execute("SET max_parallel_workers_per_gather = 2")
        query = "SELECT id, mnist.score(features) FROM images ORDER BY id"
        plan = "\n".join(row[0] for row in con.execute(f"EXPLAIN {query}").fetchall())
        scored = [row[1] for row in con.execute(query).fetchall()]
        table = con.execute("SELECT count(*) FROM mnist.score_table('images', 'id', 'features')").fetchone()[
            0
        ]
    expected = keras.saving.load_model(cern_mlp_path).predict(x.astype(np.float32), verbose=0).argmax(1)
    assert scored == expected.tolist() and table == 64
    assert ("Gather" in plan) == (kernel != "plpython")  # PL/Python's functions keep the plan serial


def test_cube_kernel_reads_no_table_per_call_and_score_table_goes_parallel(postgres_dsn, cern_mlp_path):
    """The cube kernel's weights are literals of its code: a call reads no table. score_table weighs a
    parallel plan by the cost of scoring, so a table of 600 rows gets workers with the default settings,
    although its features, stored compressed, leave it a few pages small."""
    assert export(postgres_dsn, cern_mlp_path, "mnist", "--kernel", "cube") == 0
    plans: list[str] = []
    with psycopg.connect(postgres_dsn) as con:
        con.execute(
            "CREATE TABLE images AS SELECT i AS id, array_fill((i % 7) / 7.0::real, ARRAY[784]) AS features "
            "FROM generate_series(1, 600) i"
        )
        con.execute("ANALYZE images")
        con.commit()
        for i in range(1, 21):
            con.execute("SELECT mnist.predict(features) FROM images WHERE id = %s", [i]).fetchone()
        reads = con.execute(
            "SELECT coalesce(sum(seq_scan + coalesce(idx_scan, 0)), 0) FROM pg_stat_xact_user_tables "
            "WHERE schemaname = 'nnsql'"
        ).fetchone()[0]
        con.commit()
        con.add_notice_handler(lambda notice: plans.append(notice.message_primary or ""))
        for setting in ("log_min_duration = 0", "log_nested_statements = on", "log_level = notice"):
            con.execute(f"LOAD 'auto_explain'; SET auto_explain.{setting}")
        scored = con.execute("SELECT count(*) FROM mnist.score_table('images', 'id', 'features')").fetchone()
    assert reads == 0 and scored == (600,)
    table_plans = [plan for plan in plans if "predict_proba" in plan and "Seq Scan on images" in plan]
    assert table_plans and all("Workers Planned: 2" in plan for plan in table_plans), table_plans


def test_scoring_calls_no_sql_function_which_each_call_would_parse_again(postgres_dsn, cern_mlp_path):
    """A LANGUAGE sql function that is not inlined (SECURITY DEFINER, SET search_path) parses every
    LANGUAGE sql function it calls again on each of its own calls: what users query is PL/pgSQL, which
    keeps what it parsed, and calls no LANGUAGE sql function per row."""
    assert export(postgres_dsn, cern_mlp_path, "mnist", "--kernel", "cube") == 0
    with psycopg.connect(postgres_dsn) as con:
        con.execute(
            "CREATE TABLE images AS SELECT i AS id, array_fill(i / 7.0::float8, ARRAY[784]) AS features "
            "FROM generate_series(1, 5) i"
        )
        con.execute("SET track_functions = 'all'")
        query = (
            "SELECT mnist.score(features), mnist.label(features), mnist.predict_proba(features) FROM images"
        )
        scored = con.execute(query).fetchall()
        called = con.execute(
            "SELECT l.lanname, p.proname, s.calls FROM pg_stat_xact_user_functions s "
            "JOIN pg_proc p ON p.oid = s.funcid JOIN pg_language l ON l.oid = p.prolang ORDER BY 2"
        ).fetchall()
    assert len(scored) == 5 and ("plpgsql", "predict", 15) in called  # the calls are counted
    assert [row for row in called if row[0] == "sql"] == []


OLD_SCORE_TABLE = """
CREATE FUNCTION mnist.score_table(source regclass, id_column text, features_column text)
RETURNS TABLE (id text, score integer, probabilities float8[])
LANGUAGE sql AS $$ SELECT NULL::text, 0, NULL::float8[] $$
"""


def test_a_registry_from_an_earlier_release_is_brought_up_to_date(postgres_dsn, cern_mlp_path):
    """Columns added, score_table's id no longer text, and a scoring role keeps every function, the new
    ones (predict, labels) included."""
    assert export(postgres_dsn, cern_mlp_path, "mnist", "--kernel", "plpgsql") == 0
    with psycopg.connect(postgres_dsn, autocommit=True) as con:  # as the previous release left it
        con.execute("ALTER TABLE nnsql.models DROP COLUMN kernel, DROP COLUMN output_kind")
        con.execute("ALTER TABLE nnsql.tensors ALTER COLUMN value SET STORAGE EXTENDED")
        con.execute("DROP FUNCTION mnist.score_table(regclass, text, text, anyelement)")
        for function in ("predict", "predict_logits", "labels", "score_table"):
            con.execute(f"DROP FUNCTION mnist.{function}")
        con.execute(OLD_SCORE_TABLE)
        con.execute("DROP ROLE IF EXISTS analyst; CREATE ROLE analyst")
        con.execute("GRANT USAGE ON SCHEMA mnist TO analyst")
        con.execute("GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA mnist TO analyst")
    assert export(postgres_dsn, cern_mlp_path, "mnist", "--kernel", "cube") == 0
    assert registry(postgres_dsn, "mnist") == [(1, None, False), (2, "cube", True)]
    with psycopg.connect(postgres_dsn) as con:
        storage = con.execute(
            "SELECT attstorage FROM pg_attribute "
            "WHERE attrelid = 'nnsql.tensors'::regclass AND attname = 'value'"
        ).fetchone()[0]
        kinds = con.execute("SELECT output_kind FROM nnsql.models ORDER BY version").fetchall()
        id_type = con.execute(
            "SELECT pg_get_function_result('mnist.score_table(regclass, text, text)'::regprocedure)"
        ).fetchone()[0]
        granted = con.execute(
            "SELECT p.proname FROM pg_proc p WHERE p.pronamespace = 'mnist'::regnamespace "
            "AND has_function_privilege('analyst', p.oid, 'EXECUTE') ORDER BY 1"
        ).fetchall()
    assert storage == "e" and kinds == [(None,), ("probabilities",)]
    assert id_type.startswith("TABLE(id bigint")
    assert {"predict", "labels", "score", "score_table", "predict_proba"} <= {row[0] for row in granted}
