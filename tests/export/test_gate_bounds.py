"""The gate's bounds, per output and per value: a large regression head never loosens a probability head.

The model is a common HEP multi-task shape: a softmax class head beside an energy regression head whose
values lie between 2e4 and 6e4. Its faulty twin computes one class logit 0.5 too high (its bias off by
0.5), which moves probabilities by up to ~0.12 and flips some argmax answers: the gate must refuse it on
every row, whatever the energy beside it, and publish the faithful model.
"""

from __future__ import annotations

import json
from dataclasses import replace

import duckdb
import keras
import numpy as np
import pytest

from nnsql.export.compile import prepare, to_ir
from nnsql.export.duckdb.generator import CAPABILITIES as DUCKDB
from nnsql.export.duckdb.store import DuckDBStore
from nnsql.export.errors import ExportError, ParityError
from nnsql.export.frontend.float64 import predictor
from nnsql.export.publish import parity
from nnsql.export.publish.gate import expectations, gate_for
from nnsql.export.publish.pipeline import ExportRequest, joined, publish
from nnsql.export.publish.samples import sample_inputs

FEATURES = 6
SHIFT = 0.5  # the faulty twin's error in one class logit


def two_heads(shift: float = 0.0) -> keras.Model:
    """Softmax classes (Dense 16 relu → Dense 3) beside an energy of 2e4..6e4 on inputs in [0, 1); the
    first class's logit `shift` higher than the faithful model's."""
    inputs = keras.Input((FEATURES,), name="features")
    hidden = keras.layers.Dense(16, activation="relu", name="hidden")(inputs)
    classes = keras.layers.Dense(3, activation="softmax", name="classes")(hidden)
    energy = keras.layers.Dense(1, name="energy")(inputs)
    model = keras.Model(inputs, [classes, energy])
    generator = np.random.default_rng(31)
    hidden_kernel = generator.normal(0, 1, (FEATURES, 16))
    class_kernel = generator.normal(0, 0.5, (16, 3))
    class_bias = np.array([shift, 0.0, 0.0])
    energy_kernel = np.full((FEATURES, 1), 4e4 / FEATURES)
    weights = [hidden_kernel, np.zeros(16), class_kernel, class_bias, energy_kernel, np.array([2e4])]
    model.set_weights([np.asarray(w, np.float32) for w in weights])
    return model


def scores(model: keras.Model, rows: np.ndarray) -> np.ndarray:
    return joined(model.predict(rows, verbose=0))


def probability_answers(joined_scores: np.ndarray) -> dict[str, list]:
    """What a target computing these scores answers: the argmax of the class head, and its class."""
    score = np.asarray(joined_scores)[:, :3].argmax(axis=1)
    return {"score": score.tolist(), "label": [f"c{i}" for i in score]}


def test_a_shifted_class_logit_beside_a_large_energy_is_refused_numbers_and_answers():
    """The old gate scaled a row's tolerance by its largest |value| over all outputs (the energy, 4e4:
    0.4) and widened answer ties to twice that, so the shift passed both checks."""
    faithful, faulty = two_heads(), two_heads(SHIFT)
    graph = to_ir(faithful, target="duckdb", classes=("c0", "c1", "c2"))
    samples = sample_inputs(graph, {}, 60)
    rows = samples.inputs["features"]
    keras_scores, target = scores(faithful, rows), scores(faulty, rows)
    assert np.abs(target - keras_scores)[:, :3].max() > 0.05  # the premise: probabilities moved a lot
    assert np.abs(keras_scores[:, 3]).min() > 1e4  # ... beside a large energy
    expected, allowed = expectations(graph, samples, keras_scores, 1e-5, False)
    report = parity.compare(expected, target, 1e-5, allowed)
    assert not report.passed and report.rows_over > 0
    checks = parity.check_answers(
        "probabilities", expected[:, :3], graph.classes, probability_answers(target), 1e-5,
        several_outputs=True, allowed=allowed,
    )  # fmt: skip
    assert any(check.disagreements for check in checks), checks


def test_each_value_is_bounded_by_its_own_size_alone():
    reference = np.array([[0.2, 0.3, 0.5, 4e4]])
    energy_off = reference + np.array([[0.0, 0.0, 0.0, 0.3]])  # within 1e-5 of 4e4
    assert parity.compare(reference, energy_off, 1e-5).passed
    report = parity.compare(reference, reference + np.array([[2e-5, -2e-5, 0.0, 0.0]]), 1e-5)
    assert not report.passed and report.first_over is not None and report.first_over.bound == 1e-5


def test_ties_are_decided_from_the_first_outputs_own_bound():
    """A near tie between two classes (3e-6 apart) flipped by the target is a disagreement beside any
    energy: the margin is TIE_MARGIN, not twice the energy's bound."""
    probabilities = np.array([[0.4999985, 0.5000015, 0.0]])
    checks = parity.check_answers(
        "probabilities", probabilities, ("a", "b", "c"), {"score": [0]}, 1e-5, several_outputs=True
    )
    assert checks[0].disagreements == 1
    logits = np.array([[30.0, 29.9999, -5.0]])  # logits: the head's own bound, 2 × 1e-5 × 30, decides
    checks = parity.check_answers("logits", logits, ("a", "b", "c"), {"score": [1]}, 1e-5)
    assert checks[0].compared == 0


def faithful_prepared(tmp_path, model: keras.Model, name: str, rows: int = 100):
    """`prepare` of the saved model for DuckDB, as `nnsql export duckdb` runs it."""
    directory = tmp_path / name
    directory.mkdir()
    path = directory / "model.keras"
    model.save(path)
    (directory / "metadata.json").write_text(json.dumps({"classes": ["c0", "c1", "c2"]}))
    request = ExportRequest(path, name, sample_rows=rows, quiet=True)
    return request, prepare(request, DUCKDB)


@pytest.mark.duckdb
def test_duckdb_refuses_the_shifted_logit_and_keeps_the_faithful_version(tmp_path):
    faithful = two_heads()
    request, prepared = faithful_prepared(tmp_path, faithful, "hep")
    database = tmp_path / "models.duckdb"
    store = DuckDBStore(database, progress=False)
    try:
        record = publish(store, request, prepared, "duckdb")
        # the faulty twin compiled and staged, judged against the faithful model's Keras
        faulty_request, faulty = faithful_prepared(tmp_path, two_heads(SHIFT), "twin")
        keras_scores = scores(faithful, faulty.samples.inputs["features"])
        gate = gate_for(faulty.graph, faulty.samples, keras_scores, 1e-5, False, predictor(faithful))
        with pytest.raises(ParityError, match="duckdb disagrees with TensorFlow") as refused:
            publish(store, replace(faulty_request, name="hep"), replace(faulty, gate=gate), "duckdb")
        assert "\n" not in str(refused.value)
    finally:
        store.close()
    bounds = json.loads(record.metadata)["parity_bounds"]
    by_output = {output["name"]: output for output in bounds["outputs"]}
    assert by_output["classes"]["max_bound"] == 1e-5  # probabilities: the tolerance itself
    assert by_output["energy"]["max_bound"] > 0.2  # 1e-5 of an energy above 2e4
    assert by_output["classes"]["max_abs_diff"] <= 1e-5
    with duckdb.connect(str(database), read_only=True) as con:
        active = con.execute(
            "SELECT version, metadata FROM nnsql.models WHERE name = 'hep' AND active"
        ).fetchall()
    assert [version for version, _ in active] == [record.version]  # the faithful version keeps scoring
    assert json.loads(active[0][1])["parity_bounds"] == bounds


def test_a_model_with_a_nan_weight_is_refused_at_load_naming_the_tensor(tmp_path):
    model = two_heads()
    weights = model.get_weights()
    weights[2][3, 1] = np.nan
    model.set_weights(weights)
    with pytest.raises(ExportError, match=r"tensor classes/kernel holds NaN or infinite values"):
        faithful_prepared(tmp_path, model, "diverged")


def exact_two_heads(model: keras.Model, rows: np.ndarray) -> np.ndarray:
    """The two-head model computed in numpy float64 from its weights (softmax as Keras defines it)."""
    hidden_kernel, hidden_bias, class_kernel, class_bias, energy_kernel, energy_bias = [
        np.asarray(w, np.float64) for w in model.get_weights()
    ]
    x = rows.astype(np.float64)
    logits = np.maximum(x @ hidden_kernel + hidden_bias, 0.0) @ class_kernel + class_bias
    exps = np.exp(logits - logits.max(axis=1, keepdims=True))
    return np.concatenate([exps / exps.sum(axis=1, keepdims=True), x @ energy_kernel + energy_bias], axis=1)


def test_keras_in_float64_is_exact_where_float32_keras_is_not():
    """Rows of raw magnitudes (1e3..1e4): the rebuilt model agrees with an exact computation to float64's
    rounding (1e-12 of each value), which float32 Keras is far from."""
    model = two_heads()
    rows = np.random.default_rng(5).uniform(-1e4, 1e4, (200, FEATURES)).astype(np.float32)
    exact = exact_two_heads(model, rows)
    size = np.maximum(1.0, np.abs(exact))
    assert (np.abs(predictor(model)([rows]) - exact) <= 1e-12 * size).all()
    assert (np.abs(scores(model, rows) - exact) > 1e-9 * size).any()  # float32 Keras would not pass


def test_keras_in_float64_runs_only_on_the_rows_asked_for():
    model = two_heads()
    graph = to_ir(model, target="duckdb", classes=("c0", "c1", "c2"))
    samples = sample_inputs(graph, {}, 100)
    gate = gate_for(graph, samples, scores(model, samples.inputs["features"]), 1e-5, False, predictor(model))
    gate.expected(np.arange(10))
    gate.allowed(np.arange(10))
    assert sorted(gate.cache) == list(range(10))


def test_without_a_float64_kernel_every_row_is_compared_with_float32_keras(capsys):
    """TensorFlow has no float64 kernel for a dilated transposed convolution: the gate says so once and
    compares every row with float32 Keras, which is still Keras (never the exporter's IR)."""
    image = keras.Input((3, 4, 2), name="image")
    dilated = keras.layers.Conv2DTranspose(2, 2, dilation_rate=2, padding="same", name="up_dilated")(image)
    model = keras.Model(image, keras.layers.Dense(2, activation="softmax")(keras.layers.Flatten()(dilated)))
    graph = to_ir(model, target="duckdb")
    samples = sample_inputs(graph, {}, 40)
    keras_scores = scores(model, samples.inputs["image"])
    gate = gate_for(graph, samples, keras_scores, 1e-5, False, predictor(model))
    rows = np.arange(40)
    assert np.array_equal(gate.expected(rows), keras_scores)
    assert gate.float64 is None and gate.float32_bound(0) == 0.0
    (note,) = capsys.readouterr().err.strip().splitlines()
    assert note == (
        "note: Keras cannot run the model in float64 (InvalidArgumentError); "
        "every row is compared with float32 Keras"
    )
