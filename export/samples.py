"""Sample rows for the parity check that ends every export.

Real rows are best: the test split of the data set named in the model's metadata, when it loads here
and fits the input. Otherwise seeded uniform [0, 1) rows, which still exercise every weight.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from export import ir

SEED = 20161122


@dataclass(frozen=True)
class SampleSet:
    inputs: dict[str, np.ndarray]
    source: str

    @property
    def rows(self) -> int:
        return len(next(iter(self.inputs.values())))


def _dataset_rows(graph: ir.Graph, metadata: dict[str, Any], rows: int) -> SampleSet | None:
    name = metadata.get("dataset")
    if not name or len(graph.inputs) != 1:
        return None
    import imagedata as data

    try:
        dataset = data.load(name)
    except data.DataUnavailable:
        return None
    spec = graph.inputs[0]
    if dataset.x_test.shape[1] != spec.size:
        return None
    chosen = dataset.x_test[:rows].reshape((-1, *spec.shape))
    return SampleSet({spec.name: chosen}, f"{name} test split, first {len(chosen)} rows")


def zero_padded(values: np.ndarray) -> np.ndarray:
    """Sequence rows (rows × steps × features) zero-padded after varied lengths, as masked inputs arrive:
    in turn all steps kept, all but one, one, half, and a length that walks through every value. The
    parity check then sees what masking changes; an unmasked layer simply reads the zeros."""
    if values.ndim != 3:
        return values
    steps = values.shape[1]
    for row in range(len(values)):
        kept = (steps, steps - 1, 1, max(1, steps // 2), row % steps + 1)[row % 5]
        values[row, kept:, :] = 0.0
    return values


def random_rows(generator: np.random.Generator, spec: ir.TensorSpec, rows: int) -> np.ndarray:
    """Uniform [0, 1) values, or for an integer input indices below its bound; sequences zero-padded."""
    if spec.dtype == "int32":
        indices = generator.integers(0, spec.bound or 1, (rows, *spec.shape)).astype(np.float32)
        return zero_padded(indices[..., None])[..., 0]  # index 0 pads, as mask_zero expects
    return zero_padded(generator.random((rows, *spec.shape), dtype=np.float32))


def sample_inputs(graph: ir.Graph, metadata: dict[str, Any], rows: int) -> SampleSet:
    found = _dataset_rows(graph, metadata, rows)
    if found is not None:
        return found
    generator = np.random.default_rng(SEED)
    inputs = {spec.name: random_rows(generator, spec, rows) for spec in graph.inputs}
    padded = any(len(spec.shape) == 2 for spec in graph.inputs)
    return SampleSet(
        inputs, f"{rows} seeded uniform random rows" + (", sequences zero-padded" if padded else "")
    )
