"""TF Serving REST routes: /v1/models/{name}[/versions/{v}][:predict | :classify | /metadata]."""

from __future__ import annotations

import re

import numpy as np
from flask import Blueprint, Response, jsonify

from nnsql.export.onnx import fileformat as kinds

from .errors import bad_request, echoed, not_found
from .handling import check_rows, infer, max_values, read_body, repository, require_json
from .jsonbody import holds_booleans
from .repository import LoadedModel
from .tensors import check_finite, decode_tfserving, expected_shape, load_json, to_array
from .validation import V2_DATATYPES

blueprint = Blueprint("tfserving", __name__)
SIGNATURE = "serving_default"
SPEC = re.compile(r"(?P<name>[^/:]+)(?:/versions/(?P<version>\d+))?(?P<suffix>:predict|:classify|/metadata)?")


def parse(spec: str) -> tuple[str, str | None, str]:
    match = SPEC.fullmatch(spec)
    if not match:
        raise not_found(f"no route /v1/models/{echoed(spec)}")
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
            metadata={"signature_def": {"signature_def": {SIGNATURE: signature}}},
        )
    if suffix:
        raise not_found(f"use POST for /v1/models/{echoed(spec)}")
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
    if suffix not in (":predict", ":classify"):
        raise not_found(f"no route POST /v1/models/{echoed(spec)}: use :predict or :classify")
    model = repository().get(name, version)
    require_json()
    raw = read_body(model)
    body = load_json(raw, max_values(model))
    if not isinstance(body, dict):
        raise bad_request("the request must be a JSON object")
    check_signature(body.get("signature_name"))
    if suffix == ":classify":
        return classify(model, body, holds_booleans(raw))
    feeds, form = decode_tfserving(body, model, holds_booleans(raw))
    outputs = infer(model, feeds, "tfserving")
    if len(outputs) == 1:
        values = outputs[model.outputs[0]["name"]].tolist()
        return jsonify(predictions=values) if form == "row" else jsonify(outputs=values)
    if form == "row":  # TF Serving's row format: one object per row, an entry per named output
        rows = len(next(iter(outputs.values())))
        return jsonify(predictions=[{k: v[i].tolist() for k, v in outputs.items()} for i in range(rows)])
    return jsonify(outputs={k: v.tolist() for k, v in outputs.items()})


def check_signature(name: object) -> None:
    """TF Serving answers 400 for a signature the model does not have; the one signature here is
    serving_default (see the metadata), which an absent or empty name also means."""
    if name in (None, "", SIGNATURE):
        return
    shown = echoed(name) if isinstance(name, str) else f"of type {type(name).__name__}"
    raise bad_request(f"signature_name {shown} not found: the model's one signature is {SIGNATURE}")


def classify(model: LoadedModel, body: dict, booleans: bool) -> Response:
    """TF Serving's Classify: {"examples": [{input: values}, ...], "context": {...}} → {"result": [[[label,
    probability], ...] per example]}, the probabilities of the model's kind (export/onnx/fileformat.py). A
    regression or multi-label model has no class distribution to give: refused in one line."""
    kind = model.kind
    if kind == "values":
        raise bad_request(
            f"model {model.name} outputs values (regression): :classify has no meaning for it; use :predict"
        )
    if not kinds.one_class(kind):
        raise bad_request(
            f"model {model.name} is multi-label (independent probabilities, no single class): "
            ":classify has no meaning for it; use :predict"
        )
    first = infer(model, decode_examples(body, model, booleans), "tfserving")[model.outputs[0]["name"]]
    q = kinds.probabilities(kind, first)
    classes = model.classes or kinds.default_classes(kind, first.shape[1])
    return jsonify(result=[[[label, float(p)] for label, p in zip(classes, row, strict=True)] for row in q])


def decode_examples(body: dict, model: LoadedModel, booleans: bool) -> dict[str, np.ndarray]:
    """Each input from every example (or from the shared `context`), as a flat list of its values.
    `booleans`: the body may hold true or false (serve.jsonbody.holds_booleans)."""
    examples, context = body.get("examples"), body.get("context", {})
    if not isinstance(examples, list) or not examples or not all(isinstance(e, dict) for e in examples):
        raise bad_request("send 'examples': a non-empty list of objects, one per row, keyed by input name")
    if not isinstance(context, dict):
        raise bad_request("'context' must be an object keyed by input name")
    check_rows(model, len(examples))  # an empty example, 3 bytes, stands for a whole row of the context
    feeds = {}
    for spec in model.inputs:
        name = spec["name"]
        if -1 in spec["shape"][1:]:
            raise bad_request(f"input {name!r} has a variable length: use :predict")
        values = [example.get(name, context.get(name)) for example in examples]
        if any(value is None for value in values):
            raise bad_request(f"missing input {name!r} in an example (and not in 'context')")
        dtype = V2_DATATYPES[spec["datatype"]]
        shape = expected_shape(spec, len(values))
        feeds[name] = check_finite(name, to_array(name, values, dtype, shape, booleans=booleans))
    return feeds
