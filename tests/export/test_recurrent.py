"""Recurrent graphs: Masking + GRU + Concatenate (CERN's Inclusive Classifier) through the IR and every
target; masks reach only the layers Keras masks, and the parity gate catches a mask on the wrong layer."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest

from nnsql.export.compile import to_ir
from nnsql.export.errors import UnsupportedLayer
from nnsql.export.ir import graph as ir
from nnsql.export.ir import reference
from nnsql.export.postgres.__main__ import main as export_postgres
from tests import models


@pytest.fixture(scope="module")
def classifier_path(tmp_path_factory):
    return models.save(
        models.inclusive_classifier(), tmp_path_factory.mktemp("ic"), ["W+jets", "QCD", "ttbar"]
    )


def test_front_end_passes_the_mask_to_the_gru_as_a_value():
    graph = to_ir(models.inclusive_classifier(), target="reference")
    kinds = [node.kind for node in graph.nodes]
    assert kinds == ["StepMask", "Reshape", "Scan", "Concatenate", "Dense", "Dense"]
    mask, _, gru = graph.nodes[:3]
    assert isinstance(gru, ir.Scan) and gru.inputs == (graph.nodes[1].name, mask.name)
    assert (gru.steps, gru.features, gru.output_size) == (801, 19, 50)
    assert [spec.name for spec in graph.inputs] == ["gru_input", "hlf_input"]


def test_reference_gru_matches_keras_with_masked_steps():
    model = models.inclusive_classifier()
    particles, hlf = models.padded_events(4)
    graph = to_ir(model, target="reference")
    got = reference.run(graph, {"gru_input": particles, "hlf_input": hlf})
    assert np.abs(got - model.predict([particles, hlf], verbose=0)).max() <= 1e-5


@pytest.mark.parametrize(
    ("option", "detail"),
    [({"return_state": True}, "return_state=True"), ({"stateful": True}, "stateful=True")],
)
def test_unsupported_recurrent_options_are_named(option, detail):
    import keras

    inputs = keras.Input((5, 3), name="sequence", batch_size=2)
    outputs = keras.layers.GRU(4, name="odd_gru", **option)(inputs)
    outputs = outputs[0] if isinstance(outputs, list | tuple) else outputs
    with pytest.raises(UnsupportedLayer, match=rf"'odd_gru' \(GRU\).*{detail}"):
        to_ir(keras.Model(inputs, outputs), target="duckdb")


@pytest.mark.duckdb
def test_duckdb_scores_the_inclusive_classifier(classifier_path, tmp_path):
    from tests.export.executors import DuckDBExecutor

    executor = DuckDBExecutor(tmp_path)
    # A loaded machine plans the 801-step macro for seconds: the minimum of 10 rows may then outlast the
    # default 20 s; refusing for time is test_budget.py's, so the budget is ample here.
    assert executor.export(classifier_path, "ic", "--parity-seconds", "600") == 0
    particles, hlf = models.padded_events(5, seed=1)
    rows = executor.predict_rows("ic", particles, hlf)
    label = executor.query("SELECT ic.label(?, ?)", [particles[0].ravel().tolist(), hlf[0].tolist()])[0][0]
    expected = models.inclusive_classifier().predict([particles, hlf], verbose=0)
    assert np.abs(rows - expected).max() <= 1e-5
    assert label in ("W+jets", "QCD", "ttbar")


@pytest.mark.postgres
@pytest.mark.parametrize("kernel", ["plpgsql", "plpython", "cube"])
def test_postgres_scores_the_inclusive_classifier(classifier_path, postgres_dsn, kernel):
    """All 10 sample rows are scored on every kernel: the gate's minimum, so no budget cuts them. The
    budget only decides when a slow machine refuses the model (PL/pgSQL takes 0.8 s a row idle, 3.5 s on
    a loaded test machine, past the default 20 s); refusing is test_budget.py's, so it is ample here."""
    base = ["--model", str(classifier_path), "--dsn", postgres_dsn, "--name", "ic", "--quiet"]
    sample = ["--sample-rows", "10", "--parity-seconds", "600"]
    assert export_postgres([*base, *sample, "--kernel", kernel]) == 0
    particles, hlf = models.padded_events(3, seed=2)
    with psycopg.connect(postgres_dsn) as con:
        assert con.execute("SELECT parity_rows FROM nnsql.models WHERE name = 'ic'").fetchall() == [(10,)]
        rows = [
            con.execute("SELECT ic.predict_proba(%s, %s)", [p.ravel().tolist(), h.tolist()]).fetchone()[0]
            for p, h in zip(particles, hlf, strict=True)
        ]
    expected = models.inclusive_classifier().predict([particles, hlf], verbose=0)
    assert np.abs(np.array(rows) - expected).max() <= 1e-5


@pytest.mark.oracle
def test_oracle_scores_the_inclusive_classifier(classifier_path, tmp_path):
    from tests.export.executors import OracleScriptExecutor

    executor = OracleScriptExecutor(tmp_path)
    assert executor.export(classifier_path, "ic") == 0
    particles, hlf = models.padded_events(2, seed=3)
    expected = models.inclusive_classifier().predict([particles, hlf], verbose=0)
    assert np.abs(executor.predict_inputs("ic", [particles, hlf]) - expected).max() <= 1e-5


def test_onnx_exports_the_inclusive_classifier(classifier_path, tmp_path):
    import onnxruntime

    from nnsql.export.onnx.__main__ import export

    version, report = export(classifier_path, tmp_path, "ic", 10, 1e-5)
    session = onnxruntime.InferenceSession(str(tmp_path / "ic" / str(version) / "model.onnx"))
    particles, hlf = models.padded_events(3, seed=4)
    got = session.run(None, {"GRU_input": particles, "HLF_input": hlf})[0]
    expected = models.inclusive_classifier().predict([particles, hlf], verbose=0)
    assert report.passed and np.abs(got - expected).max() <= 1e-5


def test_masking_with_another_value_skips_the_steps_holding_it():
    """Masking(-1): steps whose every feature is -1 are skipped by the GRU, as in Keras; a step holding -1
    in some features only is not masked (every target runs this graph: tests/export/test_outside_zoo.py)."""
    import keras

    inputs = keras.Input((5, 3), name="sequence")
    masked = keras.layers.Masking(mask_value=-1.0, name="pad")(inputs)
    model = models._seeded(keras.Model(inputs, keras.layers.GRU(4, name="gru")(masked)), 3)
    x = np.random.default_rng(2).uniform(-1, 1, (30, 5, 3)).astype(np.float32)
    for row in range(30):
        x[row, row % 6 :, :] = -1.0
    x[0, 0, 1] = -1.0  # one feature at the mask value: the step is kept
    graph = to_ir(model, target="duckdb")
    assert np.abs(reference.run(graph, x) - model.predict(x, verbose=0)).max() <= 1e-6


def masked_and_unmasked_gru(seed: int = 6):
    """One sequence input feeding a masked GRU and, beside it, an unmasked one (only the first is masked)."""
    import keras

    sequence = keras.Input((6, 3), name="sequence")
    masked = keras.layers.GRU(4, name="masked_gru")(keras.layers.Masking(0.0, name="mask")(sequence))
    plain = keras.layers.GRU(4, name="plain_gru")(sequence)
    joined = keras.layers.Concatenate(name="joined")([masked, plain])
    outputs = keras.layers.Dense(3, activation="softmax", name="out")(joined)
    return models._seeded(keras.Model(sequence, outputs), seed)


def padded(rows: int, seed: int = 0) -> np.ndarray:
    values = np.random.default_rng(seed).random((rows, 6, 3), dtype=np.float32)
    for row in range(rows):
        values[row, 1 + row % 6 :, :] = 0.0
    return values


def test_only_the_layers_fed_by_masking_are_masked(tmp_path):
    model = masked_and_unmasked_gru()
    graph = to_ir(model, target="reference")
    grus = {node.name: node.masked for node in graph.nodes if isinstance(node, ir.Scan)}
    assert grus == {"masked_gru": True, "plain_gru": False}
    x = padded(30)
    assert np.abs(reference.run(graph, x) - model.predict(x, verbose=0)).max() <= 1e-5


@pytest.mark.duckdb
def test_duckdb_scores_masked_and_unmasked_grus_like_keras(tmp_path):
    from tests.export.executors import DuckDBExecutor

    model = masked_and_unmasked_gru()
    executor = DuckDBExecutor(tmp_path)
    assert executor.export(models.save(model, tmp_path / "m"), "seq") == 0
    x = padded(30, seed=1)
    assert np.abs(executor.predict("seq", x) - model.predict(x, verbose=0)).max() <= 1e-5


@pytest.mark.duckdb
def test_the_parity_gate_catches_a_mask_applied_to_the_wrong_layer(tmp_path, monkeypatch, capsys):
    """The old front end put the mask on the input value itself, so both GRUs skipped padded steps: its
    export must now fail the parity check, because the sample rows hold zero-padded sequences."""
    from nnsql.export.frontend import layers as keras_frontend

    def mask_on_the_input(layer, inputs, ctx):  # the bug, reproduced: the input itself carries the mask
        mask = ir.StepMask(name="bug_mask", inputs=inputs, steps=6)
        value = ir.Reshape(name="bug_value", inputs=inputs, shape=(6, 3))
        ctx.masks[inputs[0]] = ctx.masks[value.name] = mask.name
        return mask, value

    monkeypatch.setitem(keras_frontend.CONVERTERS, "Masking", mask_on_the_input)
    from tests.export.executors import DuckDBExecutor

    executor = DuckDBExecutor(tmp_path)
    assert executor.export(models.save(masked_and_unmasked_gru(), tmp_path / "m"), "seq") == 2
    assert "version not published" in capsys.readouterr().err
