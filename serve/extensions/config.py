"""The model configuration extension: what `get_model_config` returns to Triton's clients.

Triton's configuration (its model_config.proto, in the JSON form Triton's HTTP endpoint answers with)
filled from what this server knows of a version: its tensors, the batching it applies and the
repository metadata. The gRPC service sends the same document as a ModelConfig message.
"""

from __future__ import annotations

import json
from typing import Any

from ..repository import LoadedModel

# A V2 datatype's name in Triton's DataType enum: TYPE_ and the name, except BYTES.
SPECIAL_TYPES = {"BYTES": "TYPE_STRING"}


def data_type(datatype: str) -> str:
    return SPECIAL_TYPES.get(datatype, f"TYPE_{datatype}")


def parameter_values(parameters: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Metadata parameters as Triton's ModelParameter map: strings kept, anything else as JSON."""
    return {
        key: {"string_value": value if isinstance(value, str) else json.dumps(value)}
        for key, value in parameters.items()
        if value is not None
    }


def model_config(
    model: LoadedModel, parameters: dict[str, Any], *, max_request_rows: int, max_batch: int, delay_ms: float
) -> dict[str, Any]:
    """The version's configuration. `max_batch_size` is the most rows a request may hold, so `dims` leave
    out the batch dimension (Triton's convention); the dynamic batcher merges up to `max_batch` rows,
    waiting up to `delay_ms` for them."""
    return {
        "name": model.name,
        "platform": "onnxruntime_onnx",
        "backend": "onnxruntime",
        "version_policy": {"all": {}},
        "max_batch_size": max_request_rows,
        "input": [
            {
                "name": spec["name"],
                "data_type": data_type(spec["datatype"]),
                "format": "FORMAT_NONE",
                "dims": spec["shape"][1:],
            }
            for spec in model.inputs
        ],
        "output": [
            {"name": spec["name"], "data_type": data_type(spec["datatype"]), "dims": spec["shape"][1:]}
            for spec in model.outputs
        ],
        "dynamic_batching": {
            "preferred_batch_size": [max_batch],
            "max_queue_delay_microseconds": round(delay_ms * 1000),
        },
        "parameters": parameter_values(parameters),
    }
