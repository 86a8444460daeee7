"""The load pass: a Keras file → the built model, at the sequence length SQL compiles, and its metadata.

The file is read as data first, from one private copy of it (export/frontend/model.py's `open_model`: code
refused unless trusted, sizes checked before any weight is allocated); nothing is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..frontend.model import at_sequence_length, open_model
from ..names import check_model_name
from ..publish.pipeline import ExportRequest
from ..publish.samples import longest_sequence


@dataclass(frozen=True)
class Loaded:
    """The model as the later passes read it: the Keras model, metadata.json's content, the class labels
    (--classes, else metadata.json's)."""

    model: Any
    metadata: dict[str, Any]
    classes: tuple[str, ...]
    loss: Any = None  # the loss the file saved, read with the model (export/frontend/outputs.py)


def load(request: ExportRequest) -> Loaded:
    """The requested model, its variable-length inputs fixed at --sequence-length (or the longest of
    --samples), with its metadata and class labels."""
    check_model_name(request.name)
    opened = open_model(
        request.model_path,
        trust_code=request.trust_model_code,
        limits=request.limits,
        as_float32=request.as_float32,
    )
    steps = request.sequence_length or longest_sequence(request.samples_file)
    model = at_sequence_length(opened.model, steps)
    metadata = opened.metadata  # from the same directory, at the moment the model was copied
    classes = request.classes or tuple(metadata.get("classes", ()))
    return Loaded(model=model, metadata=metadata, classes=classes, loss=opened.loss)
