"""The extensions over HTTP, at Triton's paths: model configuration, statistics, and the model
repository (index, load, unload)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request

from ..errors import ScoringError, bad_request
from ..gate import control_refusal
from ..tensors import load_json
from . import service

blueprint = Blueprint("extensions", __name__)
MAX_CONTROL_BODY = 64 * 1024  # bytes: a repository request holds a flag or two


def small_json_body() -> dict[str, Any]:
    """The optional JSON object of a repository request ({} when the body is empty)."""
    body = request.stream.read(MAX_CONTROL_BODY + 1)
    if len(body) > MAX_CONTROL_BODY:
        raise ScoringError(f"the body exceeds {MAX_CONTROL_BODY} bytes", 413)
    if not body.strip():
        return {}
    document = load_json(body, max_values=4096)
    if not isinstance(document, dict):
        raise bad_request("the body must be a JSON object")
    return document


def parameters_of(document: dict[str, Any]) -> dict[str, Any]:
    value = document.get("parameters", {})
    if not isinstance(value, dict):
        raise bad_request("'parameters' must be an object")
    return value


@blueprint.get("/v2/models/<name>/config")
@blueprint.get("/v2/models/<name>/versions/<version>/config")
def config(name: str, version: str | None = None) -> Response:
    return jsonify(service.config_document(name, version))


@blueprint.get("/v2/models/stats")
@blueprint.get("/v2/models/<name>/stats")
@blueprint.get("/v2/models/<name>/versions/<version>/stats")
def statistics(name: str = "", version: str | None = None) -> Response:
    return jsonify(service.statistics_document(name, version))


@blueprint.post("/v2/repository/index")
def repository_index() -> Response:
    ready = small_json_body().get("ready", False)
    if not isinstance(ready, bool):
        raise bad_request("'ready' must be true or false")
    return jsonify(service.index_document(ready))


def require_admin_key() -> None:
    """Loading and unloading check the admin key themselves, whatever path spelling led here: the gate
    in front reads the path as sent, Flask's routing merges repeated slashes."""
    refusal = control_refusal(
        current_app.extensions["admin_keys"],
        request.headers.get("Authorization"),
        request.headers.get("X-Api-Key"),
    )
    if refusal is not None:
        raise ScoringError(refusal.message, refusal.status)


@blueprint.post("/v2/repository/models/<name>/load")
def load(name: str) -> Response:
    require_admin_key()
    service.load_model(name, parameters_of(small_json_body()))
    return jsonify({})


@blueprint.post("/v2/repository/models/<name>/unload")
def unload(name: str) -> Response:
    require_admin_key()
    parameters_of(small_json_body())  # unload_dependents: no model here depends on another
    service.unload_model(name)
    return jsonify({})
