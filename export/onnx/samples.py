"""The ONNX target's sample rows and what onnxruntime's scores of them are compared with (the Gate, as for
every target, when the exporter's IR reads the model; Keras's scores alone when only ONNX converts it)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ExportError
from ..frontend import keras_run
from ..frontend.float64 import Predictor
from ..frontend.model_limits import dtype_name
from ..ir import graph as ir
from ..publish.gate import Gate, gate_for, refuse_nonfinite
from ..publish.samples import SampleSet
from .capabilities import CAPABILITIES

TARGET = CAPABILITIES.target

# Variable dimensions (None, e.g. time steps) are sampled at two lengths: parity must hold for both.
SAMPLE_LENGTHS = (12, 5)
# Whole numbers drawn for an integer input the IR does not read: below 256 (a pixel), or its type's range.
INTEGER_VALUES = 256


@dataclass(frozen=True)
class Samples:
    """Rows keyed by Keras's input names, with what each is compared with (export/publish/gate.py):
    `graph` and `by_ir_name` when the IR compiles the model (then rows at scale are part of the set)."""

    rows: SampleSet
    graph: ir.Graph | None = None
    by_ir_name: SampleSet | None = None

    def gate(
        self, keras_scores: np.ndarray, tolerance: float, float64: Predictor, rounding_at_scale: bool = False
    ) -> Gate:
        """What the rows are compared with (export/publish/gate.py); without the IR every row is an
        ordinary one, compared with Keras's scores (`keras_gate`). `rounding_at_scale`: --tolerance was not
        given, so rows at scale are held to their float32 bound where it exceeds the tolerance."""
        if self.graph is None or self.by_ir_name is None:
            return keras_gate(self.rows, keras_scores, tolerance)
        return gate_for(
            self.graph,
            self.by_ir_name,
            keras_scores,
            tolerance,
            CAPABILITIES.float32,
            float64,
            rounding_at_scale=rounding_at_scale,
        )

    def expected(
        self, keras_scores: np.ndarray, tolerance: float, float64: Predictor
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Every row's reference and tolerance at once (see `gate`)."""
        gate = self.gate(keras_scores, tolerance, float64)
        if self.graph is None or self.by_ir_name is None:
            return keras_scores, None
        rows = np.arange(len(keras_scores))
        return gate.expected(rows), gate.allowed(rows)


def keras_gate(samples: SampleSet, keras_scores: np.ndarray, tolerance: float) -> Gate:
    """The gate of rows of a model the IR does not read: Keras's float32 scores judge every row, within
    `tolerance`, with no allowance for float32 rounding (there is no float64 Keras to measure it by:
    `float32=False` here says that no row is held to a rounding bound). Refuses a model whose own
    scores are NaN or infinite, as every gate does."""
    masked = np.zeros(len(keras_scores), bool)
    flat = refuse_nonfinite(keras_scores, samples, masked)
    feeds = list(samples.inputs.values())
    floats = [np.issubdtype(feed.dtype, np.floating) for feed in feeds]
    return Gate(flat, None, feeds, floats, samples.at_scale, masked, tolerance, float32=False)


def sample_sets(
    model: Any,
    rows: int,
    metadata: dict[str, Any],
    samples_file: Path | None = None,
    kinds: tuple[str, ...] | None = None,
    classes: tuple[str, ...] | None = None,
) -> list[Samples]:
    from ..compile import to_ir
    from ..publish.samples import sample_inputs

    try:
        labels = tuple(metadata.get("classes", ())) if classes is None else classes
        graph = to_ir(model, target=TARGET, classes=labels, kinds=kinds)
    except ExportError:  # a shape or layer our IR lacks: ONNX may still convert it; seeded random rows
        if samples_file is not None:
            raise ExportError("--samples needs a model the exporter's IR reads; this one is not") from None
        variable = any(d is None for t in model.inputs for d in t.shape[1:])
        lengths = SAMPLE_LENGTHS if variable else (1,)
        return [Samples(random_rows(model, rows, length)) for length in lengths]
    samples = sample_inputs(graph, metadata, rows, samples_file)  # keyed by the IR's names: back to Keras's
    keyed = {t.name: samples.inputs[s.name] for t, s in zip(model.inputs, graph.inputs, strict=True)}
    return [Samples(replace(samples, inputs=keyed), graph, samples)]


def random_rows(model: Any, rows: int, length: int) -> SampleSet:
    """Random rows in each input's own type (`drawn`), `length` steps where a dimension is variable, the
    last quarter of each sequence zero (padding, which a Masking layer skips)."""
    generator = np.random.default_rng(0)
    inputs: dict[str, np.ndarray] = {}
    for tensor in model.inputs:
        shape = [length if d is None else int(d) for d in tensor.shape[1:]]
        values = drawn(generator, model, tensor, (rows, *shape))
        if None in tensor.shape[1:2]:
            values[:, length - length // 4 :] = 0
        inputs[tensor.name] = values
    source = f"{rows} seeded uniform random rows" + (f", {length} steps" if length > 1 else "")
    return SampleSet(inputs, source)


def drawn(generator: np.random.Generator, model: Any, tensor: Any, shape: tuple[int, ...]) -> np.ndarray:
    """Uniform [0, 1) values for a floating-point input, in its own type (float16 included); whole
    numbers from 0 below `integer_bound` for an integer one (pixels as uint8, counts). Uniform [0, 1)
    values read by an integer input are 0 on every row: the gate compared the zero input only."""
    dtype = input_dtype(tensor)
    if dtype.kind in "biu":
        return generator.integers(0, integer_bound(model, tensor, dtype), shape).astype(dtype)
    return generator.random(shape, dtype=np.float32).astype(dtype)


def input_dtype(tensor: Any) -> np.dtype[Any]:
    """An input's numpy type (Keras 3 names it, tf.keras gives a TensorFlow DType); float32 for a type
    numpy lacks (bfloat16)."""
    try:
        dtype = np.dtype(dtype_name(tensor.dtype))
    except TypeError:
        return np.dtype(np.float32)
    return dtype if dtype.kind in "biuf" else np.dtype(np.float32)


def integer_bound(model: Any, tensor: Any, dtype: np.dtype[Any]) -> int:
    """One past the largest whole number drawn for an integer input: INTEGER_VALUES, below the type's
    own range and the smallest table a layer reading the input indexes (Embedding, CategoryEncoding)."""
    if dtype.kind == "b":
        return 2
    tables = [size for layer in readers(model, tensor) for size in table_sizes(layer)]
    return max(1, min([INTEGER_VALUES, int(np.iinfo(dtype).max) + 1, *tables]))


def readers(model: Any, tensor: Any) -> list[Any]:
    """The layers of `model` called on `tensor` (Keras 3 and tf.keras nodes)."""
    found = []
    for layer in getattr(model, "layers", []):
        for node in getattr(layer, "_inbound_nodes", []):
            tensors = getattr(node, "input_tensors", getattr(node, "keras_inputs", ()))
            if any(each is tensor for each in (tensors if isinstance(tensors, list | tuple) else [tensors])):
                found.append(layer)
    return found


def table_sizes(layer: Any) -> list[int]:
    """The sizes of the tables `layer` indexes with its input: its own (Embedding's `input_dim`,
    CategoryEncoding's `num_tokens`), a wrapped layer's (TimeDistributed) or a nested model's readers'."""
    sizes = [getattr(layer, name, None) for name in ("input_dim", "num_tokens")]
    found = [int(size) for size in sizes if isinstance(size, int)]
    if getattr(layer, "layer", None) is not None:
        found += table_sizes(layer.layer)
    if hasattr(layer, "layers"):  # a nested model: the layers reading its own inputs
        for tensor in getattr(layer, "inputs", None) or ():
            found += [size for reader in readers(layer, tensor) for size in table_sizes(reader)]
    return found


def token_inputs(model: Any, sets: list[Samples]) -> dict[str, int]:
    """Each input that holds token ids, by its Keras name, with the size of the vocabulary it indexes:
    the scorer refuses an id outside it (ONNX's Gather would read a negative one from the end)."""
    graph = sets[0].graph
    if graph is None:
        return {}
    return {
        tensor.name: int(spec.bound or 1)
        for tensor, spec in zip(model.inputs, graph.inputs, strict=True)
        if spec.dtype == "int32"
    }


def scored_sets(model: Any, sets: list[Samples]) -> list[tuple[Samples, np.ndarray]]:
    return [(each, keras_predict(model, each.rows)) for each in sets]


def keras_predict(model: Any, samples: SampleSet) -> np.ndarray:
    feeds = [samples.inputs[t.name] for t in model.inputs]
    return keras_run.run_joined(model, feeds)
