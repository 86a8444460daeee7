"""A registry made by the last release that stored weights as real[], then used by this one: the
registry's upgrade widens the column to float8[] and drops the real[] overloads, the new version scores as
Keras in float64, and `nnsql.activate` of the old version (which installs its stored script again) scores
exactly as it did before the upgrade, with every kernel. A role without the owner's privileges cannot
widen the column: its export refuses in one line.

The earlier release's registry is rebuilt from this tree (no git history needed, as in a shallow clone or
an sdist): this release exports, then `as_earlier_release` turns what it left into what that release
left, by what differs between their registries: nnsql.tensors.value real[] (uncompressed, as registry.sql
stores it), the library's weight parameters real[], the stored scripts' weight variables real[]."""

from __future__ import annotations

import re
from pathlib import Path

import keras
import numpy as np
import psycopg
import pytest

from nnsql.export.frontend.float64 import predictor
from nnsql.export.postgres.__main__ import main as export_postgres
from nnsql.export.postgres.generator import TEMPLATES
from tests import models
from tests.export.conftest import postgres_executor
from tests.export.executors import TEST_SAMPLE_ROWS
from tests.export.test_derived_weights import FLOAT64, derived, far, rows_at_scale
from tests.export.test_postgres import export

pytestmark = pytest.mark.postgres

KERNELS = ("postgres", "postgres+cube", "postgres+plpython")
# The library's functions that take weights, and their weight parameters (sql/postgres/library.sql).
WEIGHT_FUNCTIONS = ("dense", "gather", "patch_dense", "lookup", "affine")
WEIGHT_PARAMETERS = re.compile(r"\b(kernel|bias|indices|table_|scale|shift) float8\[\]")
# A generated script's weight variables (export/postgres/generator.py: weight_variable).
WEIGHT_VARIABLES = re.compile(r"^(\s+w_\w+) float8\[\];$", re.MULTILINE)
EARLIER_TENSORS = (
    "ALTER TABLE nnsql.tensors ALTER COLUMN value TYPE real[], ALTER COLUMN value SET STORAGE EXTERNAL"
)


def as_earlier_release(dsn: str) -> None:
    """What the earlier release left where this one exported: its weights rounded to float32 in a real[]
    column (the cast rounds to nearest, as numpy's float32 does), the library's weight functions with
    real[] parameters only, and each version's stored script declaring real[] weight variables, installed
    again by that release's nnsql.activate (the same procedure as today's). Run as the registry's owner."""
    library = WEIGHT_PARAMETERS.sub(r"\1 real[]", (TEMPLATES / "library.sql").read_text())
    with psycopg.connect(dsn) as con:
        con.execute(EARLIER_TENSORS)
        functions = con.execute(
            "SELECT oid::regprocedure::text FROM pg_proc "
            "WHERE pronamespace = 'nnsql'::regnamespace AND proname = ANY(%s)",
            [list(WEIGHT_FUNCTIONS)],
        ).fetchall()
        for (function,) in functions:
            con.execute(f"DROP FUNCTION {function}")
        con.execute(library)
        for name, version, script in con.execute(
            "SELECT name, version, script FROM nnsql.installs"
        ).fetchall():
            earlier = WEIGHT_VARIABLES.sub(r"\1 real[];", script)
            con.execute(
                "UPDATE nnsql.installs SET script = %s WHERE name = %s AND version = %s",
                [earlier, name, version],
            )
        installed = con.execute("SELECT name, version FROM nnsql.models WHERE active").fetchall()
    for name, version in installed:
        activate(dsn, name, version)


def arguments(dsn: str, model: Path, name: str, kernel: str, *extra: str) -> list[str]:
    option = {"postgres": "plpgsql", "postgres+cube": "cube", "postgres+plpython": "plpython"}[kernel]
    common = ["--model", str(model), "--dsn", dsn, "--name", name, "--quiet", *TEST_SAMPLE_ROWS]
    return [*common, "--kernel", option, *extra]


def column_type(dsn: str) -> str:
    with psycopg.connect(dsn) as con:
        row = con.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = 'nnsql.tensors'::regclass AND attname = 'value'"
        ).fetchone()
    assert row is not None
    return str(row[0])


def real_overloads(dsn: str) -> list[str]:
    """The library's functions that still take a real[] (the earlier release's signatures)."""
    with psycopg.connect(dsn) as con:
        rows = con.execute(
            "SELECT p.oid::regprocedure::text FROM pg_proc p WHERE p.pronamespace = 'nnsql'::regnamespace "
            "AND 'real[]'::regtype = ANY(p.proargtypes::oid[]) ORDER BY 1"
        ).fetchall()
    return [row[0] for row in rows]


def earlier_scripts(dsn: str) -> int:
    """How many stored scripts declare real[] weight variables (the earlier release's)."""
    with psycopg.connect(dsn) as con:
        row = con.execute(
            r"SELECT count(*) FROM nnsql.installs WHERE script ~ '\mw_\w+ real\[\];'"
        ).fetchone()
    assert row is not None
    return int(row[0])


def compressed(dsn: str) -> int:
    """How many tensors are stored compressed (every call would decompress them)."""
    with psycopg.connect(dsn) as con:
        row = con.execute("SELECT count(pg_column_compression(value)) FROM nnsql.tensors").fetchone()
    assert row is not None
    return int(row[0])


def activate(dsn: str, name: str, version: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as con:
        con.execute("CALL nnsql.activate(%s, %s)", [name, version])


def name_of(kernel: str) -> str:
    return kernel.replace("postgres", "derived").replace("+", "_")


def test_a_registry_of_the_earlier_release_is_widened_and_its_versions_score_as_before(
    postgres_dsn, tmp_path
):
    """An average pool's 1/count (a tensor every kernel reads, the cube kernel's too) and its windows
    (nnsql.gather's indices): in a registry as the earlier release left it, then exported by this one."""
    model = derived("average_pooling")
    path = models.save(model, tmp_path / "model")
    x = rows_at_scale(100, 6)
    reference = predictor(model)([x])
    for kernel in KERNELS:
        assert (
            export_postgres(arguments(postgres_dsn, path, name_of(kernel), kernel, "--output", "values")) == 0
        )
    # Tensors of 800 and 1,000 weights (3.2 and 4 KB as real[], twice as float8[]): stored out of line,
    # where a rewrite with the type's default storage would compress the widened rows (their float32
    # values leave the low 29 bits of each float8 zero); the average pool's are too small to be.
    mlp = models.save(models.cern_mlp(8), tmp_path / "mlp")
    assert export_postgres(arguments(postgres_dsn, mlp, "widened_mlp", "postgres")) == 0
    as_earlier_release(postgres_dsn)
    assert column_type(postgres_dsn) == "real[]" and real_overloads(postgres_dsn)
    assert compressed(postgres_dsn) == 0 and earlier_scripts(postgres_dsn) == 3  # plpython's has none
    executors = {kernel: postgres_executor(kernel, postgres_dsn) for kernel in KERNELS}
    before = {kernel: executors[kernel].predict(name_of(kernel), x) for kernel in KERNELS}
    rounded = {k: far(before[k], reference) for k in KERNELS}
    assert min(rounded.values()) > FLOAT64, rounded  # float32 weights: what is widened now

    for kernel in KERNELS:
        assert executors[kernel].export(path, name_of(kernel), "--output", "values") == 0
    assert column_type(postgres_dsn) == "double precision[]" and real_overloads(postgres_dsn) == []
    assert compressed(postgres_dsn) == 0  # the widened rows of the earlier versions too
    for kernel in KERNELS:
        name = name_of(kernel)
        gap = far(executors[kernel].predict(name, x), reference)
        assert gap <= FLOAT64, f"{kernel}: {gap:.2e} from Keras in float64"
        activate(postgres_dsn, name, 1)  # the earlier release's script, installed again
        # exactly: the same script over the same numbers (real to float8 is exact, and back), its real[]
        # variables now passed to the float8[] functions, which compute what the real[] ones did
        assert np.array_equal(executors[kernel].predict(name, x), before[kernel]), kernel
        activate(postgres_dsn, name, 2)
        assert far(executors[kernel].predict(name, x), reference) <= FLOAT64, kernel


def test_a_role_that_cannot_widen_the_column_refuses_in_one_line(
    postgres_server, postgres_dsn, tmp_path, capsys
):
    """Alice's registry of the earlier release; Bob, who trusts her registry and may create in it but has
    none of her privileges, cannot ALTER her table: his export says so in one line and changes nothing."""
    dbname = psycopg.conninfo.conninfo_to_dict(postgres_dsn)["dbname"]
    with psycopg.connect(postgres_dsn, autocommit=True) as con:
        for role in ("widen_alice", "widen_bob"):
            if not con.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone():
                con.execute(f"CREATE ROLE {role} LOGIN")
        con.execute(f"GRANT CREATE ON DATABASE {dbname} TO widen_alice, widen_bob")
    alice, bob = (postgres_server.dsn(dbname, user=f"widen_{r}") for r in ("alice", "bob"))
    path = models.save(derived("average_pooling"), tmp_path / "model")
    assert export_postgres(arguments(alice, path, "derived", "postgres", "--output", "values")) == 0
    as_earlier_release(alice)
    assert column_type(postgres_dsn) == "real[]"
    capsys.readouterr()  # Alice's export's note on --output values: Bob's export is the one read below
    with psycopg.connect(alice, autocommit=True) as con:  # what Bob needs to reach the registry's tables
        con.execute("GRANT USAGE, CREATE ON SCHEMA nnsql TO widen_bob")

    code = export(bob, path, "derived", "--kernel", "plpgsql", "--registry-owner", "widen_alice")
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "nnsql.tensors stores weights as real[]" in err and "only its owner 'widen_alice'" in err
    assert column_type(postgres_dsn) == "real[]"
    with psycopg.connect(alice, autocommit=True) as con:
        con.execute("REVOKE CREATE ON SCHEMA nnsql FROM widen_bob")
    assert export(alice, path, "derived", "--kernel", "plpgsql", "--output", "values") == 0
    assert column_type(postgres_dsn) == "double precision[]"


def test_a_derived_weight_below_float32s_range_is_stored_as_zero(postgres_dsn, tmp_path):
    """Three linear Dense of weight 1e-30 fold into one of 1e-90 in float64, which float32 rounded to 0.
    Stored as such, an input of 1e-249 (the library's kernels skip only those below 1e-250) makes a
    product that rounds to 0, which PostgreSQL raises on ("value out of range: underflow", measured with
    the weight kept); stored as 0, the value is 0, as Keras computes it in float32 and float64 alike."""
    x = features = keras.Input((1,), name="features")
    tiny = keras.initializers.Constant(1e-30)
    for name in ("first", "second", "third"):
        x = keras.layers.Dense(1, use_bias=False, kernel_initializer=tiny, name=name)(x)
    path = models.save(keras.Model(features, x), tmp_path / "model")
    target = postgres_executor("postgres", postgres_dsn)
    assert target.export(path, "tiny", "--output", "values") == 0
    assert target.query("SELECT tiny.predict(ARRAY[1e-249]::float8[])") == [([0.0],)]
