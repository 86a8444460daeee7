"""The page a person can use (any model: inputs drawn, typed or pasted; labels and probabilities or
values), /score, /metrics, /openapi.json."""

from __future__ import annotations

import numpy as np
from flask import Blueprint, Response, jsonify, request, send_from_directory

from nnsql.export.onnx import fileformat as outputs
from nnsql.files import shipped

from .errors import bad_request
from .handling import infer, metrics, read_json, repository, require_json
from .openapi import document
from .repository import LoadedModel
from .tensors import check_finite, to_array
from .validation import V2_DATATYPES

blueprint = Blueprint("web", __name__)
STATIC = shipped("serve", "static")
# The page's scripts and styles come from /static only: no inline script, no inline style sheet, no
# plugin, no framing; it talks to this server alone. A label or a model name that holds markup stays text.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


@blueprint.after_app_request
def security_headers(response: Response) -> Response:
    """On every response: JSON and errors too, should a browser be made to open one as a page."""
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    return response


@blueprint.get("/")
def page() -> Response:
    return send_from_directory(STATIC, "index.html")


@blueprint.post("/score")
def score() -> Response:
    """{"features": [...]} (one row) → the answer by the model's kind; ?model=NAME&version=V (NAME may be
    left out when one model is loaded)."""
    name = request.args.get("model")
    model = repository().get(name, request.args.get("version")) if name else repository().default()
    require_json()
    body = read_json(model)
    if not isinstance(body, dict) or "features" not in body:
        raise bad_request('send {"features": [...]} with one row of values')
    if "model" in body or "version" in body:  # scored by whichever model the query chose: refuse
        raise bad_request("name the model in the query (/score?model=NAME&version=V), not in the body")
    spec = model.inputs[0]
    if len(model.inputs) != 1:
        raise bad_request(f"/score serves single-input models; {model.name} has {len(model.inputs)} inputs")
    values = check_finite(
        spec["name"],
        to_array(spec["name"], body["features"], V2_DATATYPES[spec["datatype"]], [1, *spec["shape"][1:]]),
    )
    first = infer(model, {spec["name"]: values}, "score")[model.outputs[0]["name"]]
    return jsonify(model=model.name, version=model.version, **answer(model, first))


def answer(model: LoadedModel, first: np.ndarray) -> dict:
    """One row's answer by the model's kind (export/onnx/fileformat.py): the class, its label and the
    probabilities; the labels above 0.5 (multilabel); or the values (regression)."""
    kind = model.kind
    if kind == "values":
        return {"kind": kind, "values": [float(v) for v in first[0]]}
    classes = model.classes or outputs.default_classes(kind, first.shape[1])
    q = outputs.probabilities(kind, first)
    rounded = [round(float(p), 7) for p in q[0]]
    if not outputs.one_class(kind):
        labels = outputs.labels_above(q, classes, outputs.threshold_of(model.metadata))[0]
        return {"kind": kind, "labels": labels, "probabilities": rounded, "classes": classes}
    best = int(outputs.classes_of(kind, q)[0])
    return {
        "kind": kind,
        "class": best,
        "label": classes[best],
        "probabilities": rounded,
        "classes": classes,
    }


@blueprint.get("/metrics")
def prometheus() -> Response:
    depths = {
        f"{name}/{number}": model.batcher.depth() if model.batcher else 0
        for name, versions in repository().models.items()
        for number, model in versions.items()
    }
    return Response(metrics().render(depths), mimetype="text/plain; version=0.0.4")


@blueprint.get("/openapi.json")
def openapi() -> Response:
    return jsonify(document())
