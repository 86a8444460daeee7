"""onnxruntime on a converted model: the sessions the parity check and a version's activation score with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ExportError
from ..publish.pipeline import joined

TARGET = "onnx"


def load_session(model: Path | bytes) -> Any:
    """An onnxruntime session on the converted model (its file, or bytes already read), or a one-line
    error."""
    import onnxruntime

    source = model if isinstance(model, bytes) else str(model)
    try:
        return onnxruntime.InferenceSession(source, providers=["CPUExecutionProvider"])
    except Exception as error:  # onnxruntime raises its own Fail/InvalidGraph types
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ExportError(
            f"onnxruntime cannot load the converted model for target '{TARGET}': {first}"
        ) from None


def session_predict(session: Any, inputs: dict[str, np.ndarray]) -> np.ndarray:
    feeds: dict[str, np.ndarray] = {
        i.name: inputs[i.name].astype(numpy_type(i.type)) for i in session.get_inputs()
    }
    return joined(session.run(None, feeds))  # every output, joined as Keras's are


ONNX_TYPES: dict[str, type[np.generic]] = {
    "tensor(float)": np.float32,
    "tensor(int32)": np.int32,
    "tensor(int64)": np.int64,
}


def numpy_type(onnx_type: str) -> type[np.generic]:
    """The numpy type of an onnxruntime input type (token indices are integers, features float32)."""
    return ONNX_TYPES.get(onnx_type, np.float32)
