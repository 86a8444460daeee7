"""The parity gate on the user's own rows at the scale of raw physics features (`--samples`): float32
Keras's rounding alone moves such a row's score beyond 1e-5: a correct float64 target, compared with Keras
in float64, must still publish (export/publish/pipeline.py's Gate), a wrong one is still refused, and a
float32 target is refused naming the tolerance it could meet.

The models read momenta in MeV (1e3..1e5, signed) directly, as a HEP filter without a normalisation
layer does: a binary classifier Dense(16, relu) → Dense(1, sigmoid) whose rows lie near p = 0.5 (its
pre-activation sums ~1e5: float32 Keras is ~1e-4 from the exact p there), and an energy regression
whose values are ~5e4 (float32 Keras is ~1e-3 from the exact value)."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from nnsql.export.compile import to_ir
from nnsql.export.errors import ParityError
from nnsql.export.frontend.float64 import predictor
from nnsql.export.ir import reference
from nnsql.export.publish import parity
from nnsql.export.publish.gate import expectations, gate_for
from nnsql.export.publish.samples import SampleSet
from tests.export.executors import DuckDBExecutor

FEATURES = 6


def momenta(rows: int, seed: int) -> np.ndarray:
    generator = np.random.default_rng(seed)
    return generator.uniform(-1e5, 1e5, (rows, FEATURES)).astype(np.float32)


def network(units: int, activation: str | None, seed: int, out: float = 0.05) -> keras.Model:
    """Dense(16, relu) → Dense(units, activation), normal weights (the output layer's × `out`)."""
    keras.utils.set_random_seed(seed)
    model = keras.Sequential(
        [
            keras.Input((FEATURES,), name="features"),
            keras.layers.Dense(16, activation="relu", name="hidden"),
            keras.layers.Dense(units, activation=activation, name="out"),
        ]
    )
    generator = np.random.default_rng(seed)
    weights = [generator.normal(0, 1, w.shape) for w in model.get_weights()]
    weights[2] *= out
    model.set_weights([w.astype(np.float32) for w in weights])
    return model


def classifier() -> tuple[keras.Model, np.ndarray]:
    """The binary classifier and 40 rows of momenta whose exact p lies on both sides of 0.5, near it."""
    model = network(1, "sigmoid", 28)
    candidates = momenta(200_000, 1)
    exact = reference.run(to_ir(model, target="duckdb"), candidates)[:, 0]
    near = np.argsort(np.abs(exact - 0.5))[:40]
    assert (exact[near] > 0.5).any() and (exact[near] < 0.5).any()
    return model, candidates[near]


def prepared(model: keras.Model, rows: np.ndarray, float32: bool) -> tuple[np.ndarray, np.ndarray]:
    graph = to_ir(model, target="duckdb")
    samples = SampleSet({"features": rows}, "user rows", np.zeros(len(rows), bool))
    return expectations(graph, samples, model.predict(rows, verbose=0), 1e-5, float32, predictor(model))


def float32_target(model: keras.Model, rows: np.ndarray) -> np.ndarray:
    """What a float32 target computes, summing in another order than TensorFlow (as onnxruntime may)."""
    w1, b1, w2, b2 = model.get_weights()
    hidden = np.maximum(rows[:, ::-1] @ w1[::-1] + b1, np.float32(0))
    z = hidden[:, ::-1] @ w2[::-1] + b2
    return (1 / (1 + np.exp(-z.astype(np.float32)))).astype(np.float32)


def test_keras_itself_drifts_beyond_the_tolerance_on_these_rows():
    model, rows = classifier()
    drift = np.abs(model.predict(rows, verbose=0) - reference.run(to_ir(model, target="duckdb"), rows))
    assert drift.max() > 1e-4  # the premise: comparing with Keras within 1e-5 refuses any exact target


def test_a_float64_target_scoring_raw_momenta_exactly_passes_the_gate():
    model, rows = classifier()
    expected, allowed = prepared(model, rows, float32=False)
    exact = reference.run(to_ir(model, target="duckdb"), rows)
    assert parity.compare(expected, exact, 1e-5, allowed).passed
    checks = parity.check_answers("binary", expected, ("0", "1"), answers(exact), 1e-5, allowed=allowed)
    assert all(check.disagreements == 0 for check in checks), checks


def test_a_float32_target_that_cannot_meet_the_tolerance_is_refused_naming_its_float32_bound():
    """--tolerance is an upper bound on float32 targets too: on these rows float32 rounding alone moves p
    beyond 1e-5, so a correct float32 target is refused in one line naming the bound it could meet, and
    passes when that bound is asked for."""
    model, rows = classifier()
    graph = to_ir(model, target="duckdb")
    samples = SampleSet({"features": rows}, "user rows", np.zeros(len(rows), bool))
    gate = gate_for(graph, samples, model.predict(rows, verbose=0), 1e-5, True, predictor(model))
    everything = np.arange(len(rows))
    target = float32_target(model, rows)
    report = parity.compare(gate.expected(everything), target, 1e-5, gate.allowed(everything))
    with pytest.raises(
        ParityError, match=r"cannot meet --tolerance 1e-05 on sample row \d+: .*float32 bound"
    ):
        parity.require(report, "onnx", gate.float32_bound)
    met = max(gate.float32_bound(row) for row in everything)
    assert met < 1e-2
    assert parity.compare(gate.expected(everything), target, met, np.full(len(rows), met)).passed


def answers(first: np.ndarray) -> dict[str, list]:
    p = np.asarray(first, np.float64)[:, 0]
    return {"predict_proba": np.stack([1 - p, p], axis=1).tolist(), "score": (p > 0.5).astype(int).tolist()}


@pytest.mark.parametrize("float32", [False, True])
def test_a_wrong_weight_is_still_refused_on_those_rows(float32):
    model, rows = classifier()
    expected, allowed = prepared(model, rows, float32)
    wrong = network(1, "sigmoid", 28)
    weights = wrong.get_weights()
    weights[3] = weights[3] + np.float32(0.05)  # the output bias, off by 0.05: Δp ≈ 0.0125 near 0.5
    wrong.set_weights(weights)
    assert not parity.compare(
        expected, reference.run(to_ir(wrong, target="duckdb"), rows), 1e-5, allowed
    ).passed


def test_keras_far_from_the_reference_beyond_rounding_is_still_the_judge():
    """A distance float32 rounding cannot explain (a front end that lowered a layer wrongly) keeps the row
    compared with Keras: the target computing the wrong graph is refused."""
    model = network(1, "sigmoid", 28)
    rows = np.random.default_rng(3).uniform(0, 1, (20, FEATURES)).astype(np.float32)
    graph = to_ir(model, target="duckdb")
    samples = SampleSet({"features": rows}, "user rows", np.zeros(len(rows), bool))
    keras_scores = model.predict(rows, verbose=0) + 0.01  # what Keras says, unlike the graph
    expected, allowed = expectations(graph, samples, keras_scores, 1e-5, float32=True)
    assert np.array_equal(expected, keras_scores.astype(np.float64)) and (allowed == 1e-5).all()
    assert not parity.compare(expected, reference.run(graph, rows), 1e-5, allowed).passed


def test_values_that_grow_with_the_input_are_held_to_1e_5_of_their_size():
    model = network(1, None, 5)
    rows = momenta(30, 2)
    expected, allowed = prepared(model, rows, float32=False)
    exact = reference.run(to_ir(model, target="duckdb"), rows)
    assert np.abs(exact).max() > 1e4
    assert parity.compare(expected, exact, 1e-5, allowed).passed
    assert not parity.compare(expected, exact * (1 + 1e-4), 1e-5, allowed).passed


@pytest.mark.duckdb
def test_a_binary_classifier_on_raw_momenta_publishes_with_the_users_rows(tmp_path):
    model, rows = classifier()
    model.compile(loss="binary_crossentropy")
    model.save(tmp_path / "model.keras")
    np.save(tmp_path / "mine.npy", rows)
    target = DuckDBExecutor(tmp_path)
    assert target.export(tmp_path / "model.keras", "m", "--samples", str(tmp_path / "mine.npy")) == 0
    exact = reference.run(to_ir(model, target="duckdb"), rows)
    assert np.abs(target.predict("m", rows) - exact).max() < 1e-9
