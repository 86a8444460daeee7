"""KServe V2 / Open Inference Protocol REST routes, with the binary tensor data extension."""

from __future__ import annotations

import json
from typing import Any

from flask import Blueprint, Response, jsonify, request

from nnsql.export.onnx.fileformat import kind_parameters

from .errors import ScoringError
from .handling import JSON_TYPES, infer, max_values, read_body, repository
from .repository import LoadedModel
from .tensors import (
    HEADER_LENGTH,
    decode_v2_inputs,
    encode_v2_response,
    requested_outputs,
    split_v2_request,
)

blueprint = Blueprint("v2", __name__)
EXTENSIONS = ["binary_tensor_data", "model_configuration", "model_repository", "statistics"]
SERVER = {"name": "nnsql-serve", "version": "0.1.0", "extensions": EXTENSIONS}


@blueprint.get("/v2/health/live")
def live() -> Response:
    return jsonify(live=True)


@blueprint.get("/v2/health/ready")
def ready() -> tuple[Response, int]:
    is_ready = repository().ready
    return jsonify(ready=is_ready), 200 if is_ready else 503


@blueprint.get("/v2")
def server_metadata() -> Response:
    return jsonify(SERVER)


def model_metadata(model: LoadedModel) -> dict:
    versions = sorted(repository().models.get(model.name, {}))
    return {
        "name": model.name,
        "versions": [str(v) for v in versions],
        "platform": "onnxruntime_onnx",
        "inputs": model.inputs,
        "outputs": model.outputs,
        "parameters": {
            "classes": model.classes,
            "version": str(model.version),
            "sha256": model.metadata.get("sha256"),
            # what the first output means (export's output kinds), where the repository metadata says it
            **kind_parameters(model.metadata),
        },
    }


@blueprint.get("/v2/models/<name>")
@blueprint.get("/v2/models/<name>/versions/<version>")
def metadata(name: str, version: str | None = None) -> Response:
    return jsonify(model_metadata(repository().get(name, version)))


@blueprint.get("/v2/models/<name>/ready")
@blueprint.get("/v2/models/<name>/versions/<version>/ready")
def model_ready(name: str, version: str | None = None) -> Response:
    repository().get(name, version)
    return jsonify(name=name, ready=True)


def ready_model(name: str, version: str | None) -> LoadedModel:
    """The version a V2 inference request names, once the server is ready."""
    if not repository().ready:
        raise ScoringError("the server is not ready yet", 503)
    return repository().get(name, version)


def run_v2(model: LoadedModel, request: Any, binary: bytes, protocol: str) -> tuple[dict, bytes]:
    """What every V2 transport does with a request (its JSON document and binary tensors): decode,
    infer through the batcher, encode. The response document, and the binary outputs it announces."""
    feeds = decode_v2_inputs(request, binary, model)
    requested = requested_outputs(request, model)  # refused before the model runs, not after
    return encode_v2_response(model, request, infer(model, feeds, protocol), requested)


@blueprint.post("/v2/models/<name>/infer")
@blueprint.post("/v2/models/<name>/versions/<version>/infer")
def infer_v2(name: str, version: str | None = None) -> Response:
    model = ready_model(name, version)
    header_length = request.headers.get(HEADER_LENGTH)
    kind = (request.mimetype or "").lower()
    if header_length is None and kind not in JSON_TYPES:
        raise ScoringError(
            f"unsupported Content-Type {kind!r}: send application/json, or application/octet-stream "
            f"with {HEADER_LENGTH}",
            415,
        )
    body, binary = split_v2_request(read_body(model), header_length, max_values(model))
    document, raw = run_v2(model, body, binary, "v2")
    if not raw:
        return jsonify(document)
    header = json.dumps(document).encode()
    response = Response(header + raw, mimetype="application/octet-stream")
    response.headers[HEADER_LENGTH] = str(len(header))
    return response
