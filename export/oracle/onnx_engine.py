"""`--engine onnx`: what Oracle 23ai/26ai's in-database ONNX Runtime takes, and the JSON metadata for it.

Oracle loads an ONNX file with `DBMS_VECTOR.LOAD_ONNX_MODEL` and scores it with `PREDICTION`,
`PREDICTION_PROBABILITY` and `PREDICTION_SET`. Its documented rules, and what is done for each:
- ONNX Runtime 1.15.1 runs inside the database: the file is converted at opset `OPSET` and checked against
  what 1.15 implements (ONNX 1.14: opset ≤ 19, IR version ≤ 9); tests run it in onnxruntime 1.15.1.
- A non-image model has one 2-D input `[batch, n]`: models with sequence, image or several inputs get a
  wrapper graph (export/onnx/flatten.py, export/onnx/flat_model.py) taking one input `features` of every
  value flattened row-major, input after input. Each value is a model attribute `<INPUT>_<k>`.
- The metadata JSON names the function: "classification" with the probabilities output and the labels, or
  "regression" with its output, and maps the input to its attributes.
- A model is at most 1 GB, without external initializers; its name an identifier of at most 123 bytes.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import ExportError
from ..onnx.flat_model import OUTPUT, FlatModel
from ..onnx.flatten import FEATURES

TARGET = "oracle --engine onnx"
ORT_VERSION = "1.15.1"  # the ONNX Runtime Oracle 23ai and 26ai embed
OPSET = 15  # tf2onnx's own default, pinned: a newer converter must not raise it past the runtime's
MAX_OPSET = 19  # ONNX Runtime 1.15 implements ONNX 1.14: opsets up to 19, IR version up to 9
MAX_IR_VERSION = 9
MAX_BYTES = 1 << 30  # "The model size is limited to 1 gigabyte" (DBMS_VECTOR.LOAD_ONNX_MODEL)
MAX_VALUES = 65_535  # bind variables in one SQL statement: the package passes a row as binds


def check_limits(flat: FlatModel) -> None:
    """What ONNX Runtime 1.15 and DBMS_VECTOR.LOAD_ONNX_MODEL accept, and the package can bind."""
    model = flat.model
    opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)
    if opset > MAX_OPSET or model.ir_version > MAX_IR_VERSION:
        raise ExportError(
            f"the ONNX file has opset {opset}, IR version {model.ir_version}; Oracle's ONNX Runtime "
            f"{ORT_VERSION} takes opset <= {MAX_OPSET}, IR version <= {MAX_IR_VERSION}"
        )
    size = model.ByteSize()
    if size > MAX_BYTES:
        raise ExportError(f"the ONNX file has {size:,} bytes; Oracle loads models of at most 1 GB")
    if any(t.data_location == 1 for t in model.graph.initializer):  # TensorProto.EXTERNAL
        raise ExportError("the ONNX file has external initializers, which Oracle does not load")
    if flat.values > MAX_VALUES:
        raise ExportError(
            f"a row has {flat.values:,} values; {TARGET} binds each as a variable, at most {MAX_VALUES:,}"
        )


def metadata_head(flat: FlatModel) -> dict[str, Any]:
    if flat.function == "regression":
        return {"function": "regression", "regressionOutput": OUTPUT}
    return {"function": "classification", "classificationProbOutput": OUTPUT, "labels": list(flat.labels)}


def metadata(flat: FlatModel) -> dict[str, Any]:
    """The JSON DBMS_VECTOR.LOAD_ONNX_MODEL takes: function, output, labels, attributes of the input."""
    names = [name for attributes in flat.attributes for name in attributes.names()]
    return {**metadata_head(flat), "input": {FEATURES: names}}


def metadata_parts(flat: FlatModel) -> tuple[str, str]:
    """The metadata JSON cut where the attribute names go, for the package that writes it in Oracle:
    head + '"NAME_1", "NAME_2", ...' + tail is `json.dumps(metadata(flat))`."""
    marker = "\x00names\x00"
    text = json.dumps({**metadata_head(flat), "input": {FEATURES: [marker]}})
    head, _, tail = text.rpartition(json.dumps(marker))  # the last: a label cannot come after "input"
    return head, tail
