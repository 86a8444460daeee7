"""Hand-made IR graphs for golden-text tests of the generators: small enough to read in review."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from nnsql.export.ir import graph as ir
from nnsql.export.ir.lowering import lower

GOLDEN_DIR = Path(__file__).parent
# The folder where `python -m tests.golden.update` collects the texts the tests generate.
STAGING = "NNSQL_GOLDEN_STAGING"


def tiny_graph() -> ir.Graph:
    """3 inputs → Dense(2, relu) → Dense(2, softmax), with round weights."""
    hidden = ir.Dense(
        name="hidden",
        inputs=("features",),
        kernel=ir.Weights(np.array([[1.0, -1.0], [0.5, 0.25], [0.0, 2.0]])),
        bias=ir.Weights(np.array([0.1, -0.1])),
        activation="relu",
    )
    output = ir.Dense(
        name="output",
        inputs=("hidden",),
        kernel=ir.Weights(np.array([[1.0, 0.0], [0.0, 1.0]])),
        bias=None,
        activation="softmax",
    )
    return ir.Graph(
        inputs=(ir.TensorSpec("features", (3,)),),
        nodes=(hidden, output),
        output="output",
        classes=("no", "it's yes"),
    )


def tiny_binary_graph() -> ir.Graph:
    """3 inputs → Dense(1, sigmoid): a binary classifier, whose score is 1 when p > 0.5."""
    output = ir.Dense(
        name="output",
        inputs=("features",),
        kernel=ir.Weights(np.array([[1.0], [-0.5], [0.25]])),
        bias=ir.Weights(np.array([0.1])),
        activation="sigmoid",
    )
    return ir.Graph(
        inputs=(ir.TensorSpec("features", (3,)),),
        nodes=(output,),
        output="output",
        classes=("background", "signal"),
        kind="binary",
    )


def check_golden(text: str, filename: str) -> None:
    """Compare with the stored text; a missing golden file fails. The test never writes the file it checks:
    under `python -m tests.golden.update` it also leaves the text in that command's folder (STAGING), and
    the command copies it into tests/golden/ for review as a diff."""
    staging = os.environ.get(STAGING)
    if staging:
        Path(staging, filename).write_text(text)
    path = GOLDEN_DIR / filename
    assert path.exists(), f"golden file {path} is missing; python -m tests.golden.update writes it"
    assert text == path.read_text(), (
        f"generated text differs from {path}; python -m tests.golden.update to accept"
    )


def tiny_recurrent_graph() -> ir.Graph:
    """A (3 steps × 2 features) sequence → GRU(2) with zero-masking, joined with 1 extra input → softmax."""
    generator = np.random.default_rng(5)
    mask = ir.StepMask(name="mask", inputs=("sequence",), steps=3)
    gru = ir.Recurrent(
        name="gru",
        inputs=("sequence", "mask"),
        cell="gru",
        kernel=ir.Weights(generator.normal(0, 0.5, (2, 6)).round(2)),
        recurrent_kernel=ir.Weights(generator.normal(0, 0.5, (2, 6)).round(2)),
        bias=ir.Weights(generator.normal(0, 0.1, (2, 6)).round(2)),
        steps=3,
    )
    joined = ir.Concatenate(name="joined", inputs=("gru", "extra"))
    output = ir.Dense(
        name="output",
        inputs=("joined",),
        kernel=ir.Weights(generator.normal(0, 0.5, (3, 2)).round(2)),
        activation="softmax",
    )
    return ir.Graph(
        inputs=(ir.TensorSpec("sequence", (3, 2)), ir.TensorSpec("extra", (1,))),
        nodes=tuple(lower([mask, gru, joined, output])),
        output="output",
        classes=("a", "b"),
    )
