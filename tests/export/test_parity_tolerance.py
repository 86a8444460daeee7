"""The tolerance printed is the tolerance applied: `--tolerance` is an upper bound on float32 targets too.

Before, ONNX allowed a row at scale a multiple of Keras's own distance from the reference, so `--tolerance
0` published and an export could print `max |Δ| = 1.27e-04 (tolerance 1e-05)`. Now every printed figure
is within the bound, or the export is refused in one line naming the float32 bound it could meet.
"""

from __future__ import annotations

import json
import re

import keras
import numpy as np
import pytest

from tests import models
from tests.export.executors import OnnxExecutor


def refusal(tolerance: str) -> re.Pattern:
    """One line: the tolerance asked for, the row, its |Δ| and bound, and the float32 bound there."""
    asked = re.escape(f"{float(tolerance):g}")
    return re.compile(
        rf"^error: onnx (cannot meet --tolerance {asked} on sample row \d+ \(.*\): max \|Δ\| \S+ "
        r"\(its bound \S+\); the float32 bound there is \S+|disagrees with TensorFlow: .*"
        r"\(float32 bound there \S+\)); version not published$"
    )


@pytest.fixture(scope="module")
def large_weights(tmp_path_factory):
    """784 → 100 sigmoid → 10 softmax with large weights: pre-activations of tens, logits of hundreds."""
    keras.utils.set_random_seed(7)
    model = keras.Sequential(
        [
            keras.Input((784,), name="pixels"),
            keras.layers.Dense(100, activation="sigmoid", name="hidden"),
            keras.layers.Dense(10, activation="softmax", name="out"),
        ]
    )
    generator = np.random.default_rng(7)
    model.set_weights(
        [
            generator.normal(0, 0.5, (784, 100)).astype(np.float32),
            generator.normal(0, 1, 100).astype(np.float32),
            generator.normal(0, 3, (100, 10)).astype(np.float32),
            generator.normal(0, 1, 10).astype(np.float32),
        ]
    )
    return models.save(model, tmp_path_factory.mktemp("large"))


def printed_differences(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"max \|Δ\| = (\S+) ", text)]


@pytest.mark.parametrize("tolerance", ["1e-07", "0"])
def test_onnx_meets_the_tolerance_asked_for_or_refuses_in_one_line(
    tolerance, large_weights, tmp_path, capsys
):
    target = OnnxExecutor(tmp_path)
    status = target.export(large_weights, "large", "--tolerance", tolerance)
    out, err = capsys.readouterr()
    if status == 0:
        assert tolerance != "0", out  # float32 cannot be exact on every row at scale
        differences = printed_differences(out)
        assert differences and max(differences) <= float(tolerance), out
        metadata = json.loads(
            next((tmp_path / "model_repository" / "large").glob("*/metadata.json")).read_text()
        )
        assert metadata["parity"]["max_abs_diff"] <= float(tolerance)
        assert metadata["parity"]["bounds"]["tolerance"] == float(tolerance)
        return
    assert status == 2 and not list((tmp_path / "model_repository").glob("large/*/model.onnx"))
    line = err.strip()
    assert "\n" not in line and refusal(tolerance).match(line), line


def test_onnx_names_the_bound_it_could_meet_and_publishes_within_the_one_asked_for(
    large_weights, tmp_path, capsys
):
    """Asked for 1e-5, float32 rounding alone moves a row at scale further (measured here: 1.7e-5 on a ×100
    row, whose float32 bound is 1.4e-4): refused, naming that bound. Asked for 1e-3 the export publishes,
    every figure within it, and metadata.json records the bound applied per output."""
    target = OnnxExecutor(tmp_path)
    assert target.export(large_weights, "large", "--tolerance", "1e-5") == 2
    assert "the float32 bound there is" in capsys.readouterr().err
    assert target.export(large_weights, "large", "--tolerance", "1e-3") == 0
    out = capsys.readouterr().out
    assert max(printed_differences(out)) <= 1e-3, out
    metadata = json.loads(next((tmp_path / "model_repository" / "large").glob("*/metadata.json")).read_text())
    bounds = metadata["parity"]["bounds"]
    (output,) = bounds["outputs"]
    assert bounds["tolerance"] == 1e-3 and output["max_abs_diff"] <= output["max_bound"] == 1e-3


def test_onnx_at_default_holds_rows_at_scale_to_their_float32_bound_and_says_so(
    large_weights, tmp_path, capsys
):
    """Without --tolerance, the same model publishes: its ordinary rows within 1e-5, its rows at scale
    within their own float32 bound, and the printed summary names that rule (docs/numerics.md)."""
    assert OnnxExecutor(tmp_path).export(large_weights, "large") == 0
    out = capsys.readouterr().out
    assert "rows at scale within their float32 bound" in out, out
