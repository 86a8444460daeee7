"""Flask app factory: configuration, the model repository, protocols, errors, auth, metrics, logs."""

from __future__ import annotations

import hmac
import json
import logging
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
from flask import Flask, Response, current_app, g, jsonify, request
from werkzeug.exceptions import HTTPException

from serve.errors import ScoringError
from serve.metrics import Metrics
from serve.repository import LoadedModel, ModelRepository
from serve.tensors import load_json
from serve.validation import bounded

DEFAULTS: dict[str, Any] = {
    "REPO": "model_repository",
    "MAX_BATCH_SIZE": 32,
    "MAX_BATCH_DELAY_MS": 0.0,
    "POLL_SECONDS": 1.0,
    "MAX_REQUEST_ROWS": 1024,
    "API_KEY_FILE": None,
}
OPEN_PATHS = ("/v2/health/", "/openapi.json", "/static/")
BYTES_PER_JSON_VALUE = 24  # generous upper bound for one number in JSON, separators included
ACCESS_LOG = logging.getLogger("serve.access")


def create_app(config: dict[str, Any] | None = None, config_file: str | None = None) -> Flask:
    """Defaults, then a JSON config file, then the given mapping (tests)."""
    app = Flask(__name__)
    app.config.update(DEFAULTS)
    if config_file:
        app.config.from_file(config_file, load=json.load)
    app.config.update(config or {})
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.extensions["metrics"] = metrics = Metrics()
    app.extensions["api_keys"] = read_api_keys(app.config["API_KEY_FILE"])
    app.extensions["repository"] = ModelRepository(
        Path(app.config["REPO"]),
        max_batch=int(app.config["MAX_BATCH_SIZE"]),
        delay_ms=float(app.config["MAX_BATCH_DELAY_MS"]),
        poll_seconds=float(app.config["POLL_SECONDS"]),
        observe_batch=metrics.observe_batch,
    ).start()
    register_hooks(app)
    from serve import tfserving, v2, web

    for blueprint in (v2.blueprint, tfserving.blueprint, web.blueprint):
        app.register_blueprint(blueprint)
    return app


def read_api_keys(path: str | None) -> frozenset[str]:
    """The keys, one per line; ValueError (one line) for a file that is unreadable, empty or not ASCII."""
    if not path:
        return frozenset()
    try:
        text = Path(path).read_bytes().decode("ascii")
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"API key file {path}: {error}") from None
    keys = frozenset(line.strip() for line in text.splitlines() if line.strip())
    if not keys:
        raise ValueError(f"API key file {path} holds no API key")
    if any(not key.isprintable() or " " in key for key in keys):
        raise ValueError(f"API key file {path}: a key holds spaces or control characters")
    return keys


def repository() -> ModelRepository:
    return current_app.extensions["repository"]


def metrics() -> Metrics:
    return current_app.extensions["metrics"]


def authorised() -> bool:
    keys = current_app.extensions["api_keys"]
    if not keys or request.path == "/" or request.path.startswith(OPEN_PATHS):
        return True
    header = request.headers.get("Authorization", "")
    given = header[7:] if header.startswith("Bearer ") else request.headers.get("X-API-Key", "")
    # bytes, not str: compare_digest refuses non-ASCII strings, and a header may hold anything
    offered = given.encode("utf-8", "surrogateescape")
    return any(hmac.compare_digest(offered, key.encode()) for key in keys)


def register_hooks(app: Flask) -> None:
    @app.before_request
    def start() -> Response | None:
        g.started = time.perf_counter()
        if not authorised():
            response = jsonify(error="missing or invalid API key: send Authorization: Bearer <key>")
            response.status_code = 401
            response.headers["WWW-Authenticate"] = "Bearer"
            return response
        return None

    @app.after_request
    def log(response: Response) -> Response:
        elapsed = time.perf_counter() - g.get("started", time.perf_counter())
        ACCESS_LOG.info(
            json.dumps(
                {
                    "method": request.method,
                    "path": request.path,
                    "status": response.status_code,
                    "ms": round(1000 * elapsed, 3),
                    "model": g.get("model_name"),
                    "bytes_in": request.content_length or 0,
                    "bytes_out": response.calculate_content_length() or 0,
                }
            )
        )
        return response

    @app.errorhandler(ScoringError)
    def scoring_error(error: ScoringError) -> tuple[Response, int]:
        return jsonify(error=error.message), error.status

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException) -> tuple[Response, int]:
        return jsonify(error=error.description or error.name), error.code or 500

    @app.errorhandler(Exception)
    def unexpected(error: Exception) -> tuple[Response, int]:
        app.logger.exception("unexpected error")
        return jsonify(error=f"internal error ({type(error).__name__})"), 500


def request_limit(model: LoadedModel) -> int:
    rows = int(current_app.config["MAX_REQUEST_ROWS"])
    return rows * model.row_size() * BYTES_PER_JSON_VALUE + 64 * 1024


def read_body(model: LoadedModel) -> bytes:
    """The request body, refused with 413 past the limit derived from the model's input shapes."""
    limit = request_limit(model)
    rows = current_app.config["MAX_REQUEST_ROWS"]
    message = (
        f"request body exceeds the limit of {limit} bytes for model {model.name} "
        f"({rows} rows of {model.row_size()} values)"
    )
    if (request.content_length or 0) > limit:
        raise ScoringError(message, 413)
    body = request.stream.read(limit + 1)
    if len(body) > limit:
        raise ScoringError(message, 413)
    return body


def max_lists(model: LoadedModel) -> int:
    """The most JSON lists a request within the row limit can need: per row, one per input and one per
    step of its inner dimensions (a (801, 19) input nests 801 lists in each row), plus a few wrappers."""
    per_row = sum(1 + math.prod(bounded(spec["shape"][1:-1])) for spec in model.inputs)
    return int(current_app.config["MAX_REQUEST_ROWS"]) * per_row + 64


def read_json(model: LoadedModel) -> Any:
    """The request body parsed as JSON, after the size and structure checks."""
    return load_json(read_body(model), max_lists(model))


def require_json() -> None:
    kind = (request.mimetype or "").lower()
    if kind != "application/json":
        raise ScoringError(f"unsupported Content-Type {kind or '(none)'!r}: send application/json", 415)


def infer(model: LoadedModel, feeds: dict[str, np.ndarray], protocol: str) -> dict[str, np.ndarray]:
    """Run through the model's batcher, enforcing the row limit and counting the request."""
    g.model_name = model.name
    rows = len(next(iter(feeds.values())))
    limit = int(current_app.config["MAX_REQUEST_ROWS"])
    if rows > limit:
        raise ScoringError(f"{rows} rows exceed the limit of {limit} rows per request", 413)
    started = time.perf_counter()
    status = "error"
    try:
        cast = {name: values.astype(np.float32, copy=False) for name, values in feeds.items()}
        assert model.batcher is not None
        outputs = model.batcher.submit(cast)
        status = "ok"
        return outputs
    finally:
        metrics().requests.labels(model.name, str(model.version), protocol, status).inc()
        metrics().latency.labels(protocol).observe(time.perf_counter() - started)
