"""Flask app factory: configuration, the model repository, protocols, errors, auth, metrics, logs."""

from __future__ import annotations

import hmac
import json
import logging
import time
from pathlib import Path
from typing import Any

from flask import Flask, Response, current_app, g, jsonify, request
from werkzeug.exceptions import HTTPException

from serve import tfserving, v2, web
from serve.errors import ScoringError
from serve.extensions import routes as extensions
from serve.extensions.control import RepositoryControl
from serve.metrics import Metrics
from serve.repository import ModelRepository

DEFAULTS: dict[str, Any] = {
    "REPO": "model_repository",
    "MAX_BATCH_SIZE": 32,
    "MAX_BATCH_DELAY_MS": 0.0,
    "POLL_SECONDS": 1.0,
    "MAX_REQUEST_ROWS": 1024,
    "API_KEY_FILE": None,
    "STATE_DIR": None,  # shared by the worker processes: which models a client unloaded
}
OPEN_PATHS = ("/v2/health/", "/openapi.json", "/static/")
ACCESS_LOG = logging.getLogger("serve.access")
KEY_REFUSED = "missing or invalid API key: send Authorization: Bearer <key>"


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
        observe_run=metrics.observe_run,
        control=RepositoryControl(app.config["STATE_DIR"]),
    ).start()
    register_hooks(app)

    for blueprint in (v2.blueprint, extensions.blueprint, tfserving.blueprint, web.blueprint):
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


def key_accepted(authorization: str, api_key: str, keys: frozenset[str]) -> bool:
    """An `Authorization: Bearer <key>` or `X-API-Key: <key>` holds one of the keys (HTTP headers and gRPC
    metadata alike)."""
    given = authorization[7:] if authorization.startswith("Bearer ") else api_key
    # bytes, not str: compare_digest refuses non-ASCII strings, and a header may hold anything
    offered = given.encode("utf-8", "surrogateescape")
    return any(hmac.compare_digest(offered, key.encode()) for key in keys)


def authorised() -> bool:
    keys = current_app.extensions["api_keys"]
    if not keys or request.path == "/" or request.path.startswith(OPEN_PATHS):
        return True
    headers = request.headers
    return key_accepted(headers.get("Authorization", ""), headers.get("X-API-Key", ""), keys)


def register_hooks(app: Flask) -> None:
    @app.before_request
    def start() -> Response | None:
        g.started = time.perf_counter()
        if not authorised():
            response = jsonify(error=KEY_REFUSED)
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
