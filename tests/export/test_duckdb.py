"""The DuckDB target on real database files: parity, versions, atomic switch, bad input."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import duckdb
import keras
import numpy as np
import pytest

from export.duckdb.__main__ import main as export_duckdb
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


@pytest.mark.parametrize("fixture", ["cern_mlp_path", "mixed_layers_path", "digits_model"])
def test_in_database_probabilities_match_tensorflow(fixture, request, tmp_path):
    model_path = request.getfixturevalue(fixture)
    db = tmp_path / "models.duckdb"
    assert export(model_path, db) == 0
    model = keras.saving.load_model(model_path)
    shape = tuple(model.inputs[0].shape[1:])
    x = np.random.default_rng(7).random((200, *shape), dtype=np.float32)
    expected = model.predict(x, verbose=0)
    actual = in_db_proba(db, "mnist", x)
    assert np.abs(actual - expected).max() <= 1e-5  # float32 parity (see export/parity.py)
    assert (actual.argmax(1) == expected.argmax(1)).all()


def test_registry_records_version_and_parity(cern_mlp_path, tmp_path):
    db = tmp_path / "m.duckdb"
    assert export(cern_mlp_path, db, "mnist", "--sample-rows", "300") == 0
    with duckdb.connect(str(db), read_only=True) as con:
        row = con.execute(
            "SELECT version, active, parity_rows, parity_max_abs_diff, parity_argmax_agreement, "
            "length(sha256), classes FROM nnsql.models"
        ).fetchone()
        tensors = con.execute("SELECT tensor, shape FROM nnsql.tensors ORDER BY tensor").fetchall()
    assert row[:3] == (1, True, 300)
    assert 0 <= row[3] <= 1e-5 and row[4] == 1.0 and row[5] == 64
    assert tensors == [
        ("hidden.bias", [100]),
        ("hidden.kernel", [100, 784]),
        ("probabilities.bias", [10]),
        ("probabilities.kernel", [10, 100]),
    ]


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


def test_reexport_makes_new_version_and_switches(cern_mlp_path, tmp_path):
    db = tmp_path / "m.duckdb"
    assert export(cern_mlp_path, db) == 0
    other = models.save(models.cern_mlp(seed=99), tmp_path / "v2")
    assert export(other, db) == 0
    assert active_versions(db) == [(1, False), (2, True)]
    x = np.random.default_rng(3).random((20, 784), dtype=np.float32)
    expected = models.cern_mlp(seed=99).predict(x, verbose=0)
    assert np.abs(in_db_proba(db, "mnist", x) - expected).max() <= 1e-5
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.sql("SELECT mnist.version()").fetchone() == (2,)


def test_failed_parity_leaves_previous_version_scoring(cern_mlp_path, tmp_path, capsys):
    db = tmp_path / "m.duckdb"
    assert export(cern_mlp_path, db) == 0
    x = np.random.default_rng(4).random((10, 784), dtype=np.float32)
    before = in_db_proba(db, "mnist", x)
    other = models.save(models.cern_mlp(seed=5), tmp_path / "v2")
    # A tolerance of 0 cannot be met (TensorFlow rounds in float32): parity must reject it.
    assert export(other, db, "mnist", "--tolerance", "0") == 2
    assert "version not published" in capsys.readouterr().err
    assert active_versions(db) == [(1, True)]
    np.testing.assert_array_equal(in_db_proba(db, "mnist", x), before)
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.sql("SELECT count(*) FROM nnsql.tensors WHERE version = 2").fetchone() == (0,)


def test_interrupted_install_rolls_back(cern_mlp_path, tmp_path, monkeypatch):
    from export.duckdb import store

    db = tmp_path / "m.duckdb"
    assert export(cern_mlp_path, db) == 0

    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(store.DuckDBStore, "record", crash)
    other = models.save(models.cern_mlp(seed=6), tmp_path / "v2")
    assert export(other, db) == 130
    assert active_versions(db) == [(1, True)]
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.sql("SELECT mnist.version()").fetchone() == (1,)


@pytest.mark.parametrize(
    ("features", "message"),
    [
        ("[0.5, 0.5, 0.5]", "features must have 784 values, got 3"),
        (
            "list_transform(range(784), lambda i: CASE WHEN i = 7 THEN NULL ELSE 0.1 END)",
            "features contains NULL values",
        ),
    ],
)
def test_wrong_input_in_sql_is_an_error_naming_the_length(cern_mlp_path, tmp_path, features, message):
    db = tmp_path / "m.duckdb"
    assert export(cern_mlp_path, db) == 0
    with duckdb.connect(str(db), read_only=True) as con:
        with pytest.raises(duckdb.InvalidInputException, match=message):
            con.sql(f"SELECT mnist.score({features})").fetchall()
        assert con.sql("SELECT mnist.score(NULL)").fetchone() == (None,)


def test_arrays_of_fixed_size_score_too(cern_mlp_path, tmp_path):
    db = tmp_path / "m.duckdb"
    assert export(cern_mlp_path, db) == 0
    x = np.random.default_rng(8).random(784)
    with duckdb.connect(str(db), read_only=True) as con:
        as_array = con.execute("SELECT mnist.score(?::FLOAT[784])", [x.tolist()]).fetchone()
        as_list = con.execute("SELECT mnist.score(?::DOUBLE[])", [x.tolist()]).fetchone()
    assert as_array == as_list


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--name", "x; drop table t"], "invalid model name 'x; drop table t'"),
        (["--name", "nnsql"], "reserved"),
        (["--model", "missing/model.keras"], "model file not found"),
    ],
)
def test_bad_arguments_fail_before_touching_the_database(cern_mlp_path, tmp_path, capsys, args, message):
    db = tmp_path / "m.duckdb"
    assert export(cern_mlp_path, db) == 0
    before = db.read_bytes()
    options = {"--model": str(cern_mlp_path), "--name": "mnist"}
    options.update(dict(zip(args[::2], args[1::2], strict=True)))
    flat = [item for pair in options.items() for item in pair]
    assert export_duckdb([*flat, "--db", str(db), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert db.read_bytes() == before


def test_file_named_like_the_model_is_refused(cern_mlp_path, tmp_path, capsys):
    assert export(cern_mlp_path, tmp_path / "mnist.duckdb", "mnist") == 2
    assert "collide" in capsys.readouterr().err
    assert not (tmp_path / "mnist.duckdb").exists()


def test_unsupported_layer_fails_and_creates_nothing(tmp_path, capsys):
    path = models.save(models.with_unsupported_layer(), tmp_path / "ln")
    db = tmp_path / "new.duckdb"
    assert export(path, db) == 2
    err = capsys.readouterr().err
    assert "'layer_norm' (LayerNormalization)" in err and "'duckdb'" in err
    assert not db.exists()


def test_cli_exit_status_and_single_error_line(tmp_path):
    not_keras = tmp_path / "model.keras"
    not_keras.write_text("hello")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "export.duckdb",
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
