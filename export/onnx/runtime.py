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


# onnxruntime's names of numpy's types where they differ; every other numeric name is numpy's own.
ONNX_NAMES = {"float": "float32", "double": "float64"}


def numpy_type(onnx_type: str) -> np.dtype[Any]:
    """The numpy type of an onnxruntime input type, `tensor(uint8)` for pixels, `tensor(int32)` for token
    indices, `tensor(float16)`, ...; float32 for one numpy lacks (bfloat16). Feeding float32 to any
    input not declared float32 ended the export in onnxruntime's traceback."""
    name = onnx_type.removeprefix("tensor(").removesuffix(")")
    try:
        dtype = np.dtype(ONNX_NAMES.get(name, name))
    except TypeError:
        return np.dtype(np.float32)
    return dtype if dtype.kind in "biuf" else np.dtype(np.float32)


# KServe V2's names of the input types a version may declare, by onnxruntime's type names.
V2_NAMES = {
    "bool": "BOOL",
    "uint8": "UINT8",
    "uint16": "UINT16",
    "uint32": "UINT32",
    "uint64": "UINT64",
    "int8": "INT8",
    "int16": "INT16",
    "int32": "INT32",
    "int64": "INT64",
    "float16": "FP16",
    "float": "FP32",
    "double": "FP64",
}


def declared_inputs(session: Any, specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The repository document's inputs, each with the datatype the converted graph reads it in (the
    scorer feeds it so): Keras's converter keeps an input's own type, uint8 pixels or int32 token ids,
    and a document declaring FP32 for those made every scoring request an internal error."""
    types = {argument.name: argument.type for argument in session.get_inputs()}
    declared = []
    for spec in specs:
        onnx_type = types.get(spec["name"], "tensor(float)")
        name = V2_NAMES.get(onnx_type.removeprefix("tensor(").removesuffix(")"))
        if name is None:
            raise ExportError(f"input {spec['name']!r} is read as {onnx_type}, a type the scorer cannot send")
        declared.append({**spec, "datatype": name})
    return declared
