"""The DuckDB target on real database files: parity, versions, atomic switch, bad input."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import duckdb
import numpy as np
import pytest

from nnsql.export.duckdb.__main__ import main as export_duckdb
from tests import models
from tests.conftest import REPO

pytestmark = pytest.mark.duckdb


def export(model, db, name="mnist", *extra: str) -> int:
    return export_duckdb(["--model", str(model), "--db", str(db), "--name", name, "--quiet", *extra])


def in_db_proba(db, name: str, x: np.ndarray) -> np.ndarray:
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute(
            f"SELECT {name}.predict_proba(f) FROM (SELECT unnest(?) AS f)",
            [x.reshape(len(x), -1).astype(np.float64).tolist()],
        ).fetchall()
    finally:
        con.close()
    return np.array([row[0] for row in rows])


def active_versions(db, name: str = "mnist") -> list[tuple[int, bool]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(
            "SELECT version, active FROM nnsql.models WHERE name = ? ORDER BY version", [name]
        ).fetchall()


def test_any_duckdb_client_scores_without_our_code(digits_model, tmp_path):
    db = tmp_path / "models.duckdb"
    assert export(digits_model, db, "digits", "--load-test-data") == 0
    script = textwrap.dedent(
        f"""
        import duckdb
        con = duckdb.connect({str(db)!r}, read_only=True)
        print(con.sql("SELECT avg((digits.score(features) = label)::INT), count(*) "
                      "FROM digits.testdata").fetchone())
        print(con.sql("SELECT digits.label(features) FROM digits.testdata WHERE id = 0").fetchone())
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    accuracy_line, label_line = out.stdout.strip().splitlines()
    accuracy, rows = eval(accuracy_line)  # a tuple printed by the child
    assert rows == 450 and accuracy >= 0.95
    assert eval(label_line)[0] in [str(d) for d in range(10)]


def test_interrupted_install_rolls_back(cern_mlp_path, tmp_path, monkeypatch):
    from nnsql.export.duckdb import store

    db = tmp_path / "m.duckdb"
    assert export(cern_mlp_path, db) == 0

    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(store.DuckDBStore, "activate", crash)
    other = models.save(models.cern_mlp(seed=6), tmp_path / "v2")
    assert export(other, db) == 130
    assert active_versions(db) == [(1, True)]
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.sql("SELECT mnist.version()").fetchone() == (1,)


def test_arrays_of_fixed_size_score_too(cern_mlp_path, tmp_path):
    db = tmp_path / "m.duckdb"
    assert export(cern_mlp_path, db) == 0
    x = np.random.default_rng(8).random(784)
    with duckdb.connect(str(db), read_only=True) as con:
        as_array = con.execute("SELECT mnist.score(?::FLOAT[784])", [x.tolist()]).fetchone()
        as_list = con.execute("SELECT mnist.score(?::DOUBLE[])", [x.tolist()]).fetchone()
    assert as_array == as_list


def test_file_named_like_the_model_is_refused(cern_mlp_path, tmp_path, capsys):
    assert export(cern_mlp_path, tmp_path / "mnist.duckdb", "mnist") == 2
    assert "collide" in capsys.readouterr().err
    assert not (tmp_path / "mnist.duckdb").exists()


def test_cli_exit_status_and_single_error_line(tmp_path):
    not_keras = tmp_path / "model.keras"
    not_keras.write_text("hello")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "nnsql.export.duckdb",
            "--model",
            str(not_keras),
            "--db",
            "x.duckdb",
            "--name",
            "mnist",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("error: ")
    assert "not a valid .keras file" in result.stderr
    assert not (REPO / "x.duckdb").exists()
