"""At default settings (no --tolerance) a float32 target's rows at scale are held to their float32 bound,
so a sound model is not refused for float32 rounding alone, while a tolerance asked for bounds every row and
a wrong model is refused either way (export/publish/gate.py, docs/numerics.md).

The rows: momenta of 1e3..1e5 MeV flagged as rows at scale, on which a binary classifier's p lies near 0.5
(tests/export/test_gate_rounding.py): float32 rounding moves p there beyond 1e-5, a wrong bias by 1e-2."""

from __future__ import annotations

import numpy as np
import pytest

from nnsql.export.compile import to_ir
from nnsql.export.errors import ParityError
from nnsql.export.frontend.float64 import predictor
from nnsql.export.publish import parity
from nnsql.export.publish.gate import FLOAT32_CAP, Gate, gate_for
from nnsql.export.publish.samples import SampleSet
from tests.export.test_gate_rounding import classifier, float32_target, network


def gate(model, rows: np.ndarray, rounding_at_scale: bool) -> Gate:
    samples = SampleSet({"features": rows}, "rows at scale", np.ones(len(rows), bool))
    graph = to_ir(model, target="onnx")
    scores = model.predict(rows, verbose=0)
    return gate_for(graph, samples, scores, 1e-5, True, predictor(model), rounding_at_scale=rounding_at_scale)


def checked(gate: Gate, actual: np.ndarray) -> parity.ParityReport:
    everything = np.arange(len(actual))
    return parity.compare(gate.expected(everything), actual, 1e-5, gate.allowed(everything))


def test_a_sound_float32_target_passes_at_default_where_an_asked_tolerance_refuses_it():
    model, rows = classifier()
    target = float32_target(model, rows)
    asked = checked(gate(model, rows, rounding_at_scale=False), target)
    with pytest.raises(ParityError, match=r"cannot meet --tolerance 1e-05 .*float32 bound"):
        parity.require(asked, "onnx", gate(model, rows, False).float32_bound)
    default = gate(model, rows, rounding_at_scale=True)
    report = checked(default, target)
    assert report.passed, report.first_over
    allowed = default.allowed(np.arange(len(rows)))
    assert (allowed >= 1e-5).all() and (allowed <= FLOAT32_CAP).all() and (allowed > 1e-5).any()
    # the bound applied is the one reported: the output's largest bound exceeds the tolerance
    assert report.outputs[0].max_bound > 1e-5 and report.max_abs_diff <= report.outputs[0].max_bound


def test_each_rows_default_tolerance_is_its_float32_bound_over_its_size():
    model, rows = classifier()
    default = gate(model, rows, rounding_at_scale=True)
    allowed = default.allowed(np.arange(len(rows)))
    bounds = np.array([default.float32_bound(row) for row in range(len(rows))])
    assert np.allclose(np.maximum(bounds, 1e-5), allowed)  # p ≤ 1: the bound is absolute


@pytest.mark.parametrize("shift", [0.05, 1e-2])
def test_a_wrong_bias_is_refused_at_default_on_those_rows(shift):
    model, rows = classifier()
    wrong = network(1, "sigmoid", 28)
    weights = wrong.get_weights()
    weights[3] = weights[3] + np.float32(shift)  # Δp ≈ shift / 4 near p = 0.5
    wrong.set_weights(weights)
    report = checked(gate(model, rows, rounding_at_scale=True), float32_target(wrong, rows))
    assert not report.passed
    with pytest.raises(ParityError, match="disagrees with TensorFlow"):
        parity.require(report, "onnx", gate(model, rows, True).float32_bound)


@pytest.mark.parametrize(
    ("target", "float32", "at_scale"),
    [("onnx", True, False), ("duckdb", False, True)],
    ids=["ordinary rows of a float32 target", "rows at scale of a float64 target"],
)
def test_the_default_loosens_nothing_else(target, float32, at_scale):
    """Only rows at scale of a float32 target are held to their float32 bound at default: ordinary rows,
    and every row of a float64 target, keep the tolerance."""
    model, rows = classifier()
    kind = "rows at scale" if at_scale else "user rows"
    samples = SampleSet({"features": rows}, kind, np.full(len(rows), at_scale))
    default = gate_for(
        to_ir(model, target=target),
        samples,
        model.predict(rows, verbose=0),
        1e-5,
        float32,
        predictor(model),
        rounding_at_scale=True,
    )
    assert (default.allowed(np.arange(len(rows))) == 1e-5).all()
