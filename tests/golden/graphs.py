"""Hand-made IR graphs for golden-text tests of the generators: small enough to read in review."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from export import ir

GOLDEN_DIR = Path(__file__).parent


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


def check_golden(text: str, filename: str) -> None:
    """Compare with the stored text; UPDATE_GOLDEN=1 rewrites it (review the diff)."""
    path = GOLDEN_DIR / filename
    if os.environ.get("UPDATE_GOLDEN") == "1" or not path.exists():
        path.write_text(text)
    assert text == path.read_text(), f"generated text differs from {path}; UPDATE_GOLDEN=1 to accept"
