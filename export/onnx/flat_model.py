"""A Keras model as ONNX with one 2-D input `[batch, n]` and a classification or regression output: the
form of scorers that take a row of n values (Oracle's in-database ONNX Runtime, export/oracle/onnx_engine.py).

The conversion is this target's own (`convert`, Keras's exporter, at a pinned opset); flatten.py adds the
wrapper graph. The first output decides the function: softmax probabilities are a classification as they
are, one sigmoid probability p a classification over [1 − p, p], one value a regression; anything else is
refused in one line. The export-time parity check scores the flat rows with onnxruntime against Keras.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ExportError
from ..frontend import float64
from ..frontend.base import Context
from ..frontend.model import open_model
from ..publish import budget, parity
from ..publish.gate import fully_masked
from ..publish.samples import SampleSet
from .flatten import FEATURES, Segment, flat_rows, flatten_inputs, producer, two_class_output

OUTPUT = "probabilities"  # the first output's name after `convert`


@dataclass(frozen=True)
class Attributes:
    """The columns of the flat row holding one original input: PREFIX_1 .. PREFIX_size."""

    prefix: str
    parameter: str  # the input's name as a plain lower-case identifier
    segment: Segment

    @property
    def last(self) -> int:
        return self.segment.offset + self.segment.size

    def names(self) -> list[str]:
        return [f"{self.prefix}_{k}" for k in range(1, self.segment.size + 1)]


@dataclass(frozen=True)
class FlatModel:
    model: Any  # onnx.ModelProto
    attributes: tuple[Attributes, ...]
    function: str  # "classification" or "regression"
    two_class: bool  # a sigmoid probability given as [1 - p, p]
    labels: tuple[str, ...]
    source_metadata: dict  # the model's metadata.json (data set, classes, training figures)

    @property
    def values(self) -> int:
        return sum(a.segment.size for a in self.attributes)

    def expected(self, keras_scores: np.ndarray) -> np.ndarray:
        """Keras's joined scores as this model gives them (a binary classifier's p as [1 − p, p])."""
        if not self.two_class:
            return keras_scores
        p = keras_scores[:, :1]
        return np.concatenate([1.0 - p, p, keras_scores[:, 1:]], axis=1)


@dataclass(frozen=True)
class Verified:
    """The sample rows, the expected scores as the flat model gives them, and the export-time parity."""

    samples: SampleSet
    expected: np.ndarray
    allowed: np.ndarray  # per row: the tolerance it was held to (export/publish/gate.py)
    report: parity.ParityReport
    sample_source: str


def attributes_of(layout: list[Segment], target: str) -> tuple[Attributes, ...]:
    """A column prefix and a parameter name per input, from its name made a plain identifier."""
    names = Context(target, {})
    return tuple(Attributes(names.name_for(s.name).upper(), names.name_for(s.name), s) for s in layout)


def output_function(model: Any, target: str) -> tuple[str, bool]:
    """("classification" | "regression", two_class) from the op computing the first output."""
    output = model.graph.output[0]
    width = output.type.tensor_type.shape.dim[-1].dim_value
    node = producer(model, output.name)
    op = node.op_type if node is not None else "none"
    if op == "Softmax":
        return "classification", False
    if op == "Sigmoid" and width == 1:
        return "classification", True
    if width == 1:
        return "regression", False
    raise ExportError(
        f"the first output ({width} columns, computed by {op}) is neither softmax probabilities, one sigmoid "
        f"probability nor one value, which is what {target} scores; use the PL/SQL route (--engine plsql)"
    )


def build(keras_model: Any, source_metadata: dict, opset: int, target: str) -> FlatModel:
    """Convert at `opset`, flatten the inputs and shape the output (the model must have been called)."""
    import onnx

    from . import emit

    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "model.onnx"
        emit.convert(keras_model, path, opset=opset)
        model = onnx.load(str(path))
    model, layout = flatten_inputs(model, target)
    labels = tuple(str(label) for label in source_metadata.get("classes", ()))
    function, two_class = output_function(model, target)
    if two_class:
        model = two_class_output(model, OUTPUT)
    if function == "classification":
        width = 2 if two_class else model.graph.output[0].type.tensor_type.shape.dim[-1].dim_value
        labels = labels if len(labels) == width else tuple(str(i) for i in range(width))
    else:
        labels = ()
    return FlatModel(model, attributes_of(layout, target), function, two_class, labels, source_metadata)


def score_flat(session: Any, rows: np.ndarray, start: int, stop: int) -> np.ndarray:
    from ..publish.pipeline import joined

    return joined(session.run(None, {FEATURES: rows[start:stop]}))


def verify(
    flat: FlatModel,
    wanted: np.ndarray,
    allowed: np.ndarray | None,
    samples: SampleSet,
    limits: budget.Budget,
    tolerance: float,
    target: str,
    progress: bool,
) -> Verified:
    """onnxruntime's scores of the flat rows against what they are compared with (Keras's, or the float64
    reference for rows at scale, each within its `allowed` tolerance), within the parity budget; raises
    ParityError."""
    import onnxruntime

    expected = flat.expected(wanted)
    allowed = np.full(len(expected), tolerance) if allowed is None else allowed
    rows = flat_rows(samples.inputs, [a.segment for a in flat.attributes])
    session = onnxruntime.InferenceSession(flat.model.SerializeToString(), providers=["CPUExecutionProvider"])
    actual, outcome = budget.score_within_budget(
        partial(score_flat, session, rows), len(rows), limits, where="onnxruntime", progress=progress
    )
    masked = fully_masked(list(samples.inputs.values()), len(rows))[: outcome.rows]
    report = parity.compare(
        expected[: outcome.rows], actual, tolerance, allowed[: outcome.rows], masked=masked
    )
    parity.require(report, target)
    return Verified(samples, expected, allowed, report, outcome.describe(samples.source))


def prepare(
    model_path: Path,
    rows: int,
    tolerance: float,
    limits: budget.Budget,
    opset: int,
    target: str,
    progress: bool,
) -> tuple[FlatModel, Verified]:
    """Load the model, convert and flatten it, and check its parity on sample rows."""
    from .samples import keras_predict, sample_sets

    opened = open_model(model_path)  # the model and its metadata.json, from one copy of their directory
    keras_model, metadata = opened.model, opened.metadata
    each = sample_sets(keras_model, rows, metadata)[0]  # fixed shapes: one set (flatten refuses others)
    # Keras's scores before the export (Keras exports called models), and what each row is compared with
    wanted, allowed = each.expected(
        keras_predict(keras_model, each.rows), tolerance, float64.predictor(keras_model)
    )
    flat = build(keras_model, metadata, opset, target)
    return flat, verify(flat, wanted, allowed, each.rows, limits, tolerance, target, progress)
