"""What a model's output means, which functions answer for it, and how Keras users read it.

Every compiled model has an output kind (ir.Graph.kind, one of ir.OUTPUT_KINDS):

- probabilities: softmax over classes. `score` is the argmax (the first on ties), `label` its class.
- binary: one sigmoid unit p. `predict_proba` is [1 - p, p]; `score` is 1 when p > 0.5, else 0: Keras's
  own rule (`keras.metrics.binary_accuracy` thresholds at 0.5 with `>`), so p = 0.5 exactly gives 0.
- multilabel: k independent sigmoid units. `labels(features, threshold = 0.5)` lists the classes whose
  p > threshold (the same `>`); there is no single class, so `score` and `label` refuse.
- logits: a linear last layer (or a loss with from_logits=True). `predict_logits` returns them,
  `predict_proba` applies softmax (sigmoid for one unit, as [1 - p, p]), `score` and `label` read the
  probabilities as the matching probability kind does.
- values: regression. `predict` returns the values; there is nothing to classify.

`predict` returns what `model.predict` returns, for every kind. This module knows no Keras and no SQL:
the front end chooses the kind (export/frontend/outputs.py), the generators write the functions, and
the parity gate compares their answers with `keras_answers` (export/publish/parity.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ExportError
from . import graph as ir

THRESHOLD = 0.5  # Keras's: binary_accuracy and a user's `p > 0.5`
FUNCTIONS = ("predict", "predict_proba", "predict_logits", "score", "label", "labels")


@dataclass(frozen=True)
class Kind:
    """One output kind: the functions that answer for it and the rule a Keras user applies."""

    name: str
    functions: tuple[str, ...]
    rule: str  # how a Keras user reads model.predict, in words (the export report and the docs)
    reads: str  # what the front end reads it from (the support table)


KINDS: dict[str, Kind] = {
    kind.name: kind
    for kind in (
        Kind(
            "probabilities",
            ("predict", "predict_proba", "score", "label"),
            "argmax",
            "softmax over 2 or more units",
        ),
        Kind(
            "binary",
            ("predict", "predict_proba", "score", "label"),
            "1 when p > 0.5, else 0",
            "one sigmoid unit",
        ),
        Kind(
            "multilabel",
            ("predict", "predict_proba", "labels"),
            "the labels with p > threshold",
            "several sigmoid units",
        ),
        Kind(
            "logits",
            ("predict", "predict_logits", "predict_proba", "score", "label"),
            "softmax (sigmoid for one unit), then argmax (p > 0.5)",
            "a linear or log_softmax last layer, or a loss with from_logits=True",
        ),
        Kind(
            "values",
            ("predict",),
            "the values themselves",
            "a regression loss (mse, mae, ...), or no activation at the end (features joined or pooled)",
        ),
    )
}
assert tuple(KINDS) == ir.OUTPUT_KINDS


def offers(kind: str, function: str, *, several_outputs: bool = False) -> bool:
    """Whether `function` answers for a model whose (first) output has this kind. A model with several
    outputs keeps `predict_proba` (every output joined, as Keras returns them) whatever its kinds."""
    if several_outputs and function == "predict_proba":
        return True
    if several_outputs and function == "predict_logits":
        return False
    return function in KINDS[kind].functions


def refusal(model: str, kind: str, function: str) -> str:
    """The one line a function that does not answer for this kind raises, naming the one to use."""
    if kind == "values":
        return (
            f"{model} outputs values (regression): {function} has no meaning for it; "
            f"use {model}.predict(features)"
        )
    if kind == "multilabel" and function in ("score", "label"):
        return (
            f"{model} is multi-label (independent probabilities): {function} has no single class; "
            f"use {model}.labels(features, threshold) (threshold defaults to {THRESHOLD})"
        )
    if function == "labels":
        return f"{model} gives one class per row ({kind}): use {model}.label(features)"
    return f"{model} outputs {kind}, not logits: use {model}.predict_proba(features)"


def one_class_per_row(kind: str) -> bool:
    """score and label answer (probabilities, binary, logits)."""
    return kind in ("probabilities", "binary", "logits")


def two_columns(kind: str, units: int) -> bool:
    """The first output's probabilities are [1 - p, p] of one value p (binary, or one logit)."""
    return kind == "binary" or (kind == "logits" and units == 1)


def class_count(kind: str, units: int) -> int:
    """How many class labels an output of `units` values has: two for one unit (0 and 1); a values
    output may name each of its values (or nothing)."""
    return 2 if two_columns(kind, units) else units


def default_classes(kind: str, units: int) -> tuple[str, ...]:
    """'0', '1', ... for each class; a values output has none unless its values are named."""
    return () if kind == "values" else tuple(str(index) for index in range(class_count(kind, units)))


def check_classes(kind: str, units: int, labels: tuple[str, ...]) -> tuple[str, ...]:
    """The labels given (metadata or --classes), or the default ones; a count that does not fit the
    output is one line."""
    if not labels:
        return default_classes(kind, units)
    expected = class_count(kind, units)
    if kind == "values" and len(labels) != expected:
        raise ExportError(
            f"{len(labels)} labels for a values (regression) output of {units}: name each value, or none "
            "(or choose another kind with --output)"
        )
    if len(labels) != expected:
        shape = "one unit (labels for 0 and 1)" if two_columns(kind, units) else f"{units} outputs"
        raise ExportError(f"{len(labels)} class labels for a {kind} model with {shape}")
    return labels


# -- Keras's reading of model.predict, for the parity gate --------------------------------------------


def softmax(z: np.ndarray) -> np.ndarray:
    shifted = np.exp(z - z.max(axis=1, keepdims=True))
    normalized: np.ndarray = shifted / shifted.sum(axis=1, keepdims=True)
    return normalized


def sigmoid(z: np.ndarray) -> np.ndarray:
    squashed: np.ndarray = np.exp(-np.logaddexp(0.0, -z))
    return squashed


def probabilities(kind: str, first: np.ndarray) -> np.ndarray:
    """The probabilities Keras users derive from the first output (rows × units): as they are, [1 - p, p]
    of one sigmoid unit, or the logits' softmax (sigmoid)."""
    first = np.asarray(first, dtype=np.float64)
    if kind == "logits":
        if first.shape[1] != 1:
            return softmax(first)
        first = sigmoid(first)
    if two_columns(kind, first.shape[1]):
        return np.concatenate([1.0 - first, first], axis=1)
    return first


def argmax_ties(q: np.ndarray, margin: float | np.ndarray) -> np.ndarray:
    """Rows whose two best probabilities lie within `margin`: either may win in another float order."""
    if q.shape[1] < 2:
        return np.zeros(len(q), dtype=bool)
    top = np.sort(q, axis=1)[:, -2:]
    tied: np.ndarray = (top[:, 1] - top[:, 0]) <= margin
    return tied


@dataclass(frozen=True)
class Expected:
    """What a Keras user computes for each function, and the rows where the answer is a near-tie (the
    model's value within `margin` of the threshold, or its two best classes within it): any answer
    there is right."""

    answers: dict[str, list[Any]]
    undecided: dict[str, np.ndarray]


def keras_answers(
    kind: str,
    first: np.ndarray,
    classes: tuple[str, ...],
    margin: float | np.ndarray,
    *,
    several_outputs: bool = False,
) -> Expected:
    """The answers of every function a user queries (but `predict`, compared value by value), from
    Keras's first output (rows × units), in the Keras user's convention."""
    q = probabilities(kind, first) if kind != "values" else np.asarray(first, np.float64)
    answers: dict[str, list[Any]] = {}
    undecided: dict[str, np.ndarray] = {}
    if offers(kind, "predict_proba") and not several_outputs:
        answers["predict_proba"] = q.tolist()
        undecided["predict_proba"] = np.zeros(len(q), dtype=bool)
    if one_class_per_row(kind):
        if two_columns(kind, np.asarray(first).shape[1]):
            score = (q[:, 1] > THRESHOLD).astype(int)
            near = np.abs(q[:, 1] - THRESHOLD) <= margin
        else:
            score = q.argmax(axis=1)  # numpy's argmax: the first of equal values, as score() takes
            near = argmax_ties(q, margin)
        answers["score"] = score.tolist()
        answers["label"] = [classes[index] for index in score]
        undecided["score"] = undecided["label"] = near
    if kind == "multilabel":
        answers["labels"] = [[classes[i] for i in np.flatnonzero(row > THRESHOLD)] for row in q]
        per_row = np.reshape(margin, (-1, 1)) if np.ndim(margin) else margin
        undecided["labels"] = np.any(np.abs(q - THRESHOLD) <= per_row, axis=1)
    return Expected(answers, undecided)
