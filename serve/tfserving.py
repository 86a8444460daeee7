"""TF Serving REST routes: /v1/models/{name}[/versions/{v}][:predict | /metadata]."""

from __future__ import annotations

import re

from flask import Blueprint, Response, jsonify

from serve.errors import bad_request, not_found
from serve.handling import infer, max_values, read_body, repository, require_json
from serve.jsonbody import holds_booleans
from serve.tensors import decode_tfserving, load_json

blueprint = Blueprint("tfserving", __name__)
SPEC = re.compile(r"(?P<name>[^/:]+)(?:/versions/(?P<version>\d+))?(?P<suffix>:predict|/metadata)?")


def parse(spec: str) -> tuple[str, str | None, str]:
    match = SPEC.fullmatch(spec)
    if not match:
        raise not_found(f"no route /v1/models/{spec}")
    return match["name"], match["version"], match["suffix"] or ""


def tensor_infos(specs: list[dict]) -> dict:
    """TF Serving's TensorInfo for each input or output spec of the repository metadata."""
    return {
        spec["name"]: {
            "dtype": "DT_FLOAT",
            "tensor_shape": {"dim": [{"size": str(d)} for d in spec["shape"]]},
            "name": spec["name"],
        }
        for spec in specs
    }


@blueprint.get("/v1/models/<path:spec>")
def status_or_metadata(spec: str) -> Response:
    name, version, suffix = parse(spec)
    model = repository().get(name, version)
    if suffix == "/metadata":
        signature = {
            "inputs": tensor_infos(model.inputs),
            "outputs": tensor_infos(model.outputs),
            "method_name": "tensorflow/serving/predict",
        }
        return jsonify(
            model_spec={"name": name, "signature_name": "", "version": str(model.version)},
            metadata={"signature_def": {"signature_def": {"serving_default": signature}}},
        )
    if suffix:
        raise not_found(f"use POST for /v1/models/{spec}")
    versions = [model.version] if version else sorted(repository().models.get(name, {}), reverse=True)
    return jsonify(
        model_version_status=[
            {"version": str(v), "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}
            for v in versions
        ]
    )


@blueprint.post("/v1/models/<path:spec>")
def predict(spec: str) -> Response:
    name, version, suffix = parse(spec)
    if suffix != ":predict":
        raise not_found(f"no route POST /v1/models/{spec}: use :predict")
    model = repository().get(name, version)
    require_json()
    raw = read_body(model)
    body = load_json(raw, max_values(model))
    if not isinstance(body, dict):
        raise bad_request("the request must be a JSON object")
    feeds, form = decode_tfserving(body, model, holds_booleans(raw))
    outputs = infer(model, feeds, "tfserving")
    if len(outputs) == 1:
        values = outputs[model.outputs[0]["name"]].tolist()
        return jsonify(predictions=values) if form == "row" else jsonify(outputs=values)
    if form == "row":  # TF Serving's row format: one object per row, an entry per named output
        rows = len(next(iter(outputs.values())))
        return jsonify(predictions=[{k: v[i].tolist() for k, v in outputs.items()} for i in range(rows)])
    return jsonify(outputs={k: v.tolist() for k, v in outputs.items()})
