"""Models built the way GitHub authors build them (tests/their_models.py), brought to every target as a new
user would: `nnsql export TARGET --model FILE`, then scored independently of the exporter's own gate (the
database's functions, onnxruntime, Oracle's scripts run by the numpy interpreter) against Keras on rows of
the model's own kind: max |Δp| ≤ 1e-5 (float32 parity) and the same classes.

Token inputs are token inputs whatever dtype they declare: the gate's rows are valid ids with padding,
`--samples` rows of ids are used as given, and a bad id is refused in one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nnsql.export.compile import to_ir
from nnsql.export.errors import ExportError
from nnsql.export.frontend.model import load_model
from nnsql.export.publish.pipeline import joined
from nnsql.export.publish.samples import sample_inputs
from tests import their_models
from tests.their_models import STEPS, THEIRS, VOCABULARY

SCORED_ROWS = 24


@pytest.fixture(scope="module")
def their_model(tmp_path_factory):
    """Each model of tests/their_models.py built and saved once: name → path."""
    built: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in built:
            built[name] = THEIRS[name].build(tmp_path_factory.mktemp(name))
        return built[name]

    return get


# Keras's scores by model file and rows: the six targets of a model compare with the same ones.
KERAS_SCORES: dict[tuple[Path, bytes], np.ndarray] = {}


def keras_scores(path: Path, rows: np.ndarray) -> np.ndarray:
    key = (path, rows.tobytes())
    if key not in KERAS_SCORES:
        KERAS_SCORES[key] = joined(load_model(path).predict(rows, verbose=0))
    return KERAS_SCORES[key]


def test_a_float32_input_read_by_embedding_compiles_as_token_ids(their_model):
    model = load_model(their_model("keras2_text"))
    assert "float32" in str(model.inputs[0].dtype)  # as Keras 2 declares it
    (spec,) = to_ir(model, target="duckdb").inputs
    assert spec.dtype == "int32" and spec.bound == model.layers[0].input_dim


def test_the_gates_token_rows_are_ids_with_padding_and_never_scaled(their_model):
    """No row ×100, ×1e4 or negative: Keras itself raised on those ids inside the exporter."""
    model = load_model(their_model("keras2_text"))
    graph = to_ir(model, target="duckdb")
    (spec,) = graph.inputs
    samples = sample_inputs(graph, {}, 200)
    ids = samples.inputs[spec.name]
    assert ((ids >= 0) & (ids < VOCABULARY) & (ids == np.round(ids))).all()
    assert (ids == 0).all(axis=1).any()  # a row of padding only
    assert ((ids[:, 0] > 0) & (ids[:, -1] == 0)).any()  # rows padded after their tokens
    assert (ids == VOCABULARY - 1).any()  # the vocabulary's last id
    assert np.isfinite(model.predict(ids, verbose=0)).all()


def test_samples_of_token_ids_are_used_as_given(their_model, tmp_path):
    model = load_model(their_model("keras2_text"))
    graph = to_ir(model, target="duckdb")
    rows = their_models.token_rows(30)
    np.save(tmp_path / "tokens.npy", rows.astype(np.int64))
    samples = sample_inputs(graph, {}, 1000, tmp_path / "tokens.npy")
    assert samples.rows == len(rows)
    np.testing.assert_array_equal(samples.inputs[graph.inputs[0].name], rows)


@pytest.mark.parametrize(("value", "shown"), [(VOCABULARY, str(VOCABULARY)), (-1, "-1"), (2.5, "2.5")])
def test_samples_with_a_bad_token_id_are_refused_in_one_line(their_model, tmp_path, value, shown):
    graph = to_ir(load_model(their_model("keras2_text")), target="duckdb")
    rows = their_models.token_rows(8)
    rows[3, 2] = value
    np.save(tmp_path / "tokens.npy", rows)
    with pytest.raises(ExportError) as raised:
        sample_inputs(graph, {}, 100, tmp_path / "tokens.npy")
    message = str(raised.value)
    assert "\n" not in message and f"row 3 position 2 holds {shown}" in message
    assert f"from 0 to {VOCABULARY - 1}" in message


@pytest.mark.parametrize("name", list(THEIRS))
def test_their_models_publish_on_every_target_and_score_like_keras(name, any_target, their_model):
    theirs, path = THEIRS[name], their_model(name)
    options = theirs.options if any_target.target != "onnx" else ()  # ONNX keeps variable lengths
    assert any_target.export(path, "theirs", *options) == 0
    rows = theirs.rows(SCORED_ROWS)
    expected = keras_scores(path, rows)
    actual = any_target.predict_inputs("theirs", [rows])
    assert np.abs(actual - expected).max() <= 1e-5
    assert (actual.argmax(1) == expected.argmax(1)).all()


@pytest.mark.duckdb
def test_a_token_id_outside_the_vocabulary_is_refused_by_the_database(their_model, tmp_path):
    from tests.export.executors import DuckDBExecutor

    duckdb_target = DuckDBExecutor(tmp_path)
    assert duckdb_target.export(their_model("keras2_text"), "theirs") == 0
    rows = their_models.token_rows(1)
    rows[0, 1] = VOCABULARY
    with pytest.raises(duckdb_target.error, match=f"whole numbers from 0 to {VOCABULARY - 1}"):
        duckdb_target.predict("theirs", rows)


@pytest.mark.duckdb
def test_a_variable_length_input_without_a_length_is_refused_in_one_line(their_model, tmp_path, capsys):
    from tests.export.executors import DuckDBExecutor

    assert DuckDBExecutor(tmp_path).export(their_model("imdb_bilstm"), "theirs") == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "variable length" in err and "--sequence-length N" in err


@pytest.mark.duckdb
def test_the_longest_sequence_of_samples_sets_the_length(their_model, tmp_path, capsys):
    """Without --sequence-length, rows of --samples fix it; scored rows of that length match Keras."""
    from tests.export.executors import DuckDBExecutor

    path, target = their_model("imdb_bilstm"), DuckDBExecutor(tmp_path)
    samples = their_models.token_rows(20, steps=STEPS + 3)
    np.save(tmp_path / "reviews.npy", samples)
    assert target.export(path, "theirs", "--samples", str(tmp_path / "reviews.npy")) == 0
    rows = their_models.token_rows(6, steps=STEPS + 3, seed=9)
    assert np.abs(target.predict("theirs", rows) - keras_scores(path, rows)).max() <= 1e-5
    longer = their_models.token_rows(1, steps=STEPS + 4)
    with pytest.raises(target.error, match=f"must have at most {STEPS + 3} values .*, got {STEPS + 4}"):
        target.predict("theirs", longer)


@pytest.mark.duckdb
def test_a_variable_length_sequence_of_features_compiles_at_the_length_given(tmp_path):
    """`Input(shape=(None, features))` behind a Masking layer, at --sequence-length 10: rows padded with
    0 after their own lengths score as Keras does."""
    from tests.export.executors import DuckDBExecutor

    path, target = their_models.masked_sensor_gru(tmp_path / "sensors"), DuckDBExecutor(tmp_path)
    assert target.export(path, "sensors", "--sequence-length", str(STEPS)) == 0
    rows = their_models.padded_sequence_rows(8)
    assert np.abs(target.predict("sensors", rows) - keras_scores(path, rows)).max() <= 1e-5


TEXT_LENGTH = 200  # as IMDB examples pad reviews
# The gate's rows of the 200-step export: what is checked here is that a model of that length publishes
# and scores like Keras on rows of its own; how the gate picks and bounds its rows is test_gate_rows.py's.
# Each gate row runs 200 steps of a bidirectional LSTM, row by row in PL/pgSQL and in the PL/SQL
# interpreter: 20 rows instead of the grid's 100 (Oracle's 50), the 4 rows scored here unchanged.
IMDB_GATE_ROWS = 20


@pytest.mark.slow
def test_an_imdb_style_model_publishes_at_200_steps(their_model, scorer):
    path = their_model("imdb_bilstm")
    length = ["--sequence-length", str(TEXT_LENGTH), "--sample-rows", str(IMDB_GATE_ROWS)]
    assert scorer.export(path, "imdb", *length) == 0
    rows = their_models.token_rows(4, steps=TEXT_LENGTH, seed=17)
    expected = keras_scores(path, rows)
    actual = scorer.predict_inputs("imdb", [rows])
    assert np.abs(actual - expected).max() <= 1e-5
