"""A registry made by the last release that stored weights as real[] (EARLIER: nnsql.tensors real[], the
library's real[] signatures, stored scripts declaring real[] variables), exported into by that release's
own code, then used by this one: the registry's upgrade widens the column to float8[] and drops the
real[] overloads, the new version scores as Keras in float64, and `nnsql.activate` of the old version
(which installs its stored script again) scores exactly as it did before the upgrade, with every kernel.
A role without the owner's privileges cannot widen the column: its export refuses in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import psycopg
import pytest

from nnsql.export.frontend.float64 import predictor
from tests import models
from tests.export.conftest import postgres_executor
from tests.export.executors import TEST_SAMPLE_ROWS
from tests.export.test_derived_weights import FLOAT64, derived, far, rows_at_scale
from tests.export.test_postgres import export

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]
EARLIER = "de09556cc12d1975dc7732ce3d8584b1e611b726"  # the last commit whose registry held real[] weights
KERNELS = ("postgres", "postgres+cube", "postgres+plpython")
OLD_EXPORT = """
import json, sys
from nnsql.export.postgres.__main__ import main
for arguments in json.loads(sys.argv[1]):
    if main(arguments) != 0:
        sys.exit(f"the earlier release refused: {arguments}")
"""


def earlier_release(folder: Path) -> Path:
    """The EARLIER commit's tree (git archive of this repository), as a user of that release had it."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", EARLIER], capture_output=True, check=False, timeout=120
    )
    assert archive.returncode == 0, f"this test needs the repository's history: {archive.stderr!r}"
    folder.mkdir()
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True, timeout=120)
    return folder


def export_with_earlier_release(tree: Path, runs: list[list[str]]) -> None:
    """Each argument list given to that release's `nnsql export postgres`, in one process of its own."""
    environment = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-c", OLD_EXPORT, json.dumps(runs)],
        cwd=tree,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]


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
    (nnsql.gather's indices): exported by the earlier release, then again by this one."""
    model = derived("average_pooling")
    path = models.save(model, tmp_path / "model")
    x = rows_at_scale(100, 6)
    reference = predictor(model)([x])
    tree = earlier_release(tmp_path / "earlier")
    runs = [arguments(postgres_dsn, path, name_of(k), k, "--output", "values") for k in KERNELS]
    export_with_earlier_release(tree, runs)
    assert column_type(postgres_dsn) == "real[]" and real_overloads(postgres_dsn)
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
    tree = earlier_release(tmp_path / "earlier")
    export_with_earlier_release(tree, [arguments(alice, path, "derived", "postgres", "--output", "values")])
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
