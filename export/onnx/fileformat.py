"""The model repository's file format, which the exporter writes and the scorer (serve/) reads: the files of
a version (REPO/NAME/VERSION/model.onnx and metadata.json) and what the scorer answers from a model's first
output, by its kind (metadata.json's `output_kinds`; see docs/output-kinds.md): the probabilities, the class
and its label, or the labels above a threshold. A version without `output_kinds` (an earlier export) is
`probabilities`. The exporter checks these answers against Keras before it publishes a version, so both
sides read them from here.

    probabilities  the output as it is; class = argmax (the first of equal values)
    binary         [1 - p, p] of the one sigmoid unit; class = 1 when p > 0.5, else 0
    multilabel     the output as it is; labels = those with p > 0.5; no single class
    logits         softmax (one unit: [1 - sigmoid, sigmoid]); class as above
    values         regression: the values themselves, no class
"""

from __future__ import annotations

from typing import Any

import numpy as np

MODEL_FILE = "model.onnx"
METADATA_FILE = "metadata.json"
KINDS = ("probabilities", "binary", "multilabel", "logits", "values")
THRESHOLD = 0.5


def kind_of(metadata: dict[str, Any]) -> str:
    """The first output's kind: metadata's `kind` where someone named it, else the exporter's
    `output_kinds`, else probabilities (an earlier export)."""
    if isinstance(metadata.get("kind"), str):
        return str(metadata["kind"])
    kinds = metadata.get("output_kinds") or ["probabilities"]
    return str(kinds[0])


def threshold_of(metadata: dict[str, Any]) -> float:
    """The threshold of the labels (multilabel): metadata's `threshold`, else 0.5."""
    value = metadata.get("threshold")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else THRESHOLD


def one_class(kind: str) -> bool:
    return kind in ("probabilities", "binary", "logits")


def probabilities(kind: str, first: np.ndarray) -> np.ndarray:
    """rows × classes probabilities from the first output's rows × units values."""
    values = np.asarray(first, dtype=np.float64)
    if kind == "logits" and values.shape[1] > 1:
        shifted = np.exp(values - values.max(axis=1, keepdims=True))
        return np.asarray(shifted / shifted.sum(axis=1, keepdims=True))
    if kind == "logits":
        values = 1.0 / (1.0 + np.exp(-np.clip(values, -700.0, 700.0)))
    if kind in ("binary", "logits"):
        return np.concatenate([1.0 - values, values], axis=1)
    return values


def classes_of(kind: str, q: np.ndarray) -> np.ndarray:
    """The class of each row from its probabilities: p > 0.5 for one unit, else the argmax."""
    if kind in ("binary", "logits") and q.shape[1] == 2:
        return (q[:, 1] > THRESHOLD).astype(int)
    return np.asarray(q.argmax(axis=1))


def labels_above(q: np.ndarray, classes: list[str], threshold: float = THRESHOLD) -> list[list[str]]:
    return [[classes[i] for i in np.flatnonzero(row > threshold)] for row in q]


def answers(
    kind: str, first: np.ndarray, classes: list[str], threshold: float = THRESHOLD
) -> dict[str, list[Any]]:
    """Everything the scorer can answer for rows of the first output, keyed as the SQL functions that
    answer the same (predict_proba, score, label, labels)."""
    if kind == "values":
        return {}
    q = probabilities(kind, first)
    result: dict[str, list[Any]] = {"predict_proba": q.tolist()}
    if one_class(kind):
        chosen = classes_of(kind, q)
        result["score"] = chosen.tolist()
        result["label"] = [classes[i] for i in chosen]
    else:
        result["labels"] = labels_above(q, classes, threshold)
    return result


def default_classes(kind: str, units: int) -> list[str]:
    count = 0 if kind == "values" else 2 if kind in ("binary", "logits") and units == 1 else units
    return [str(index) for index in range(count)]


def kind_parameters(metadata: dict[str, Any]) -> dict[str, Any]:
    """What V2's model metadata says of the first output (its `parameters`, which the page reads): the
    kind and the threshold its labels use, where the version names them."""
    if not any(key in metadata for key in ("output_kinds", "kind", "threshold")):
        return {}
    return {"kind": kind_of(metadata), "threshold": threshold_of(metadata)}
