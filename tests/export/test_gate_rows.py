"""Which rows the parity gate scores (export/publish/samples.py), what each is compared with
(export/publish/pipeline.py), and what happens when the database raises on one: one line naming the row and
the function, and the previous version keeps scoring."""

from __future__ import annotations

import keras
import numpy as np
import psycopg
import pytest

from nnsql.export.compile import to_ir
from nnsql.export.errors import ExportError, ParityError
from nnsql.export.ir import activations
from nnsql.export.ir.activations import X, call, if_positive
from nnsql.export.publish import budget, parity
from nnsql.export.publish.samples import sample_inputs
from tests import models
from tests.export.executors import TEST_SAMPLE_ROWS, DuckDBExecutor, PostgresExecutor


def elu_model() -> keras.Model:
    features = keras.Input((6,), name="features")
    hidden = keras.layers.Dense(5, activation="elu", name="hidden")(features)
    return models._seeded(keras.Model(features, keras.layers.Dense(3, activation="softmax")(hidden)), 3)


@pytest.fixture(scope="module")
def elu_path(tmp_path_factory):
    return models.save(elu_model(), tmp_path_factory.mktemp("elu"))


def test_samples_add_rows_at_scale_to_the_ordinary_ones():
    graph = to_ir(elu_model(), target="duckdb")
    samples = sample_inputs(graph, {}, 100)
    x = samples.inputs["features"]
    assert samples.rows == 100 and samples.at_scale.sum() == 30
    ordinary = x[~samples.at_scale]
    assert np.abs(ordinary).max() < 1  # uniform [0, 1)

    def group(suffix: str) -> np.ndarray:
        return np.array([row for row, origin in enumerate(samples.origins) if origin.endswith(suffix)])

    hundred, ten_thousand, random = group("×100"), group("×10000"), group("0.01 to 1e4")
    assert np.allclose(x[hundred], ordinary[:10] * 100)
    assert np.allclose(x[ten_thousand], ordinary[:10] * 1e4, rtol=1e-6)
    assert np.abs(x[random]).max() > 1e3 and np.abs(x[random]).min() < 0.1 and (x[random] < 0).any()
    assert samples.describe(random[5]) == f"sample row {random[5]} (row 5 of magnitudes 0.01 to 1e4)"
    assert samples.describe(ten_thousand[5]) == f"sample row {ten_thousand[5]} (uniform row 5 ×10000)"
    assert "30 rows at scale" in samples.source


def test_the_first_rows_hold_every_group_the_budget_may_stop_after_them():
    """The parity budget scores only the first rows on a slow target (export/publish/budget.py)."""
    graph = to_ir(elu_model(), target="duckdb")
    samples = sample_inputs(graph, {}, 1000)
    first = samples.origins[: budget.MINIMUM_ROWS]
    for suffix in ("×100", "×10000", "0.01 to 1e4"):
        assert sum(origin.endswith(suffix) for origin in first) == 1
    assert [origin for origin in first if origin.startswith("uniform") and "×" not in origin] == [
        f"uniform row {i}" for i in range(7)
    ]


def test_user_samples_file_gives_the_ordinary_rows(tmp_path):
    graph = to_ir(elu_model(), target="duckdb")
    mine = np.random.default_rng(0).normal(0, 500, (40, 6)).astype(np.float32)
    np.save(tmp_path / "mine.npy", mine)
    samples = sample_inputs(graph, {}, 50, tmp_path / "mine.npy")
    assert np.array_equal(samples.inputs["features"][~samples.at_scale], mine)
    assert samples.at_scale.sum() == 5 and samples.rows == 45  # no scaled copies of the user's own rows
    third = samples.origins.index("mine.npy row 3")
    assert np.array_equal(samples.inputs["features"][third], mine[3])
    assert samples.describe(third) == f"sample row {third} (mine.npy row 3)"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (np.zeros((3, 5)), "rows hold 5 values; the input takes 6"),
        (np.array([[np.nan] * 6]), "NaN or infinite"),
        (np.array(["a"] * 6), "numeric array"),
        (np.array([{"x": 1}], dtype=object), "cannot read it"),  # a pickle: refused, never loaded
    ],
)
def test_a_bad_samples_file_is_one_line(tmp_path, content, message):
    graph = to_ir(elu_model(), target="duckdb")
    np.save(tmp_path / "bad.npy", content, allow_pickle=True)
    with pytest.raises(ExportError, match=message) as raised:
        sample_inputs(graph, {}, 50, tmp_path / "bad.npy")
    assert "\n" not in str(raised.value)


def test_parity_holds_each_row_to_its_own_tolerance_and_nan_to_nan_only_where_masked():
    reference = np.array([[0.2, 0.8], [np.nan, np.nan], [0.5, 0.5]])
    candidate = np.array([[0.2, 0.8], [np.nan, np.nan], [0.5003, 0.4997]])
    assert not parity.compare(reference, candidate).passed
    allowed = np.array([1e-5, 1e-5, 1e-3])
    report = parity.compare(reference, candidate, allowed=allowed, masked=np.array([False, True, False]))
    assert report.passed and report.rows_over == 0
    # NaN = NaN is agreement only on a fully masked row (Keras's 0/0), never on an ordinary one
    unmasked = parity.compare(reference, candidate, allowed=allowed)
    assert not unmasked.passed and unmasked.first_over is not None and unmasked.first_over.row == 1
    with pytest.raises(ParityError, match="NaN"):
        parity.compare(reference, np.nan_to_num(candidate), masked=np.array([False, True, False]))
    assert parity.compare(reference, candidate + 1, allowed=np.array([np.inf] * 3)).rows == 0


def unclamped_elu(monkeypatch) -> None:
    """A deliberately unclamped exp in elu: PostgreSQL raises on exp(-1e4) (underflow)."""
    monkeypatch.setitem(activations.FORMULAS, "elu", if_positive(X, X, call("exp", X) - 1.0))


@pytest.mark.postgres
def test_a_database_error_fails_the_export_naming_row_and_function(
    postgres_dsn, elu_path, tmp_path, monkeypatch, capsys
):
    target = PostgresExecutor(postgres_dsn)
    assert target.export(elu_path, "m") == 0
    capsys.readouterr()
    unclamped_elu(monkeypatch)
    assert target.export(elu_path, "m") == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1, error
    rows = int(TEST_SAMPLE_ROWS[TEST_SAMPLE_ROWS.index("--sample-rows") + 1])
    first_at_1e4 = sample_inputs(to_ir(elu_model(), target="postgres"), {}, rows).origins.index(
        "uniform row 0 ×10000"
    )
    assert f"postgres raised on sample row {first_at_1e4} (uniform row 0 ×10000)" in error
    assert "m.predict line" in error and "value out of range: underflow" in error
    with psycopg.connect(postgres_dsn) as con:  # version 1 still active, and scoring
        assert con.execute("SELECT version FROM nnsql.models WHERE active").fetchall() == [(1,)]
    assert target.predict("m", np.full((1, 6), 0.5)).shape == (1, 3)


@pytest.mark.duckdb
def test_a_duckdb_error_names_the_row_found_in_a_scratch_copy(elu_path, tmp_path, monkeypatch, capsys):
    """DuckDB raises on ln of a negative number; the row is found in an in-memory copy of the version."""
    target = DuckDBExecutor(tmp_path)
    assert target.export(elu_path, "m") == 0
    capsys.readouterr()
    monkeypatch.setitem(activations.FORMULAS, "elu", if_positive(X, X, call("ln", X)))
    assert target.export(elu_path, "m") == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1, error
    assert "duckdb raised on sample row" in error and "in m.predict: Out of Range Error" in error
    assert target.query("SELECT version FROM nnsql.models WHERE active") == [(1,)]


def test_scoring_and_the_answers_share_the_parity_budget(tmp_path):
    """The answers rerun the network once per function: given as many rows as `predict` scored, they
    doubled a slow target's parity time (PL/pgSQL: 55 s of a 60 s export). `predict` now gets half."""
    target = DuckDBExecutor(tmp_path)
    path = models.save(models.cern_mlp(n_features=16), tmp_path / "mlp")
    assert target.export(path, "m", "--parity-seconds", "0.001") == 0
    (source,) = target.query("SELECT parity_sample_source FROM nnsql.models WHERE name = 'm'")[0]
    assert "sized to 0.0005 s of the 0.001 s parity budget" in source, source
