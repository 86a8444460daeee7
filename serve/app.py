"""Flask app factory: configuration, the model repository, protocols, errors, auth, metrics, logs."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from flask import Flask, Response, g, jsonify, request
from flask.json.provider import DefaultJSONProvider
from werkzeug.exceptions import HTTPException

from . import accesslog, tfserving, v2, web
from .accesslog import ACCESS_LOG
from .errors import ScoringError
from .extensions import routes as extensions
from .fastpath import V2Inference
from .gate import KEY_REFUSED, Gate, Refusal, key_accepted, merged, read_admin_key, read_api_keys
from .handling import body_limit
from .metrics import Metrics
from .repository import ModelRepository

DEFAULTS: dict[str, Any] = {
    "REPO": "model_repository",
    "MAX_BATCH_SIZE": 32,
    "MAX_BATCH_DELAY_MS": 0.0,
    "POLL_SECONDS": 1.0,
    "MAX_REQUEST_ROWS": 1024,
    "API_KEY_FILE": None,
    "LISTEN_HOST": "127.0.0.1",
    "ALLOWED_HOSTS": [],
    "ALLOWED_ORIGINS": [],
    "RUN_DIR": None,  # nnsql serve's run directory: the repository follows the master's plan there
    "WORKER_INDEX": 0,
    "MODEL_CONTROL": "none",  # "explicit": the repository API may load and unload models
    "ADMIN_KEY_ENV": None,  # the environment variable holding the admin key that loading needs
}
__all__ = ["ACCESS_LOG", "KEY_REFUSED", "create_app", "key_accepted"]  # serve/rpc uses the last three


class JsonProvider(DefaultJSONProvider):
    """orjson writes the responses (three to ten times faster than the standard library here; numpy
    arrays directly)."""

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        return orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS).decode()

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        return orjson.loads(s)


class ScorerApp(Flask):
    """Flask, remembering which views and hooks are synchronous: Flask asks `inspect` on every call of
    each of them otherwise (a tenth of the cost of a small request)."""

    json_provider_class = JsonProvider

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.synchronous: dict[Callable, Callable] = {}

    def ensure_sync(self, func: Callable) -> Callable:
        known = self.synchronous.get(func)
        if known is None:
            known = self.synchronous[func] = super().ensure_sync(func)
        return known


def create_app(config: dict[str, Any] | None = None, config_file: str | None = None) -> Flask:
    """Defaults, then a JSON config file, then the given mapping (tests)."""
    app = ScorerApp(__name__)
    app.config.update(DEFAULTS)
    if config_file:
        app.config.from_file(config_file, load=json.load)
    app.config.update(config or {})
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.extensions["metrics"] = metrics = Metrics()
    app.extensions["api_keys"] = read_api_keys(app.config["API_KEY_FILE"])
    app.extensions["admin_keys"] = read_admin_key(app.config["MODEL_CONTROL"], app.config["ADMIN_KEY_ENV"])
    app.extensions["repository"] = ModelRepository(
        Path(app.config["REPO"]),
        max_batch=int(app.config["MAX_BATCH_SIZE"]),
        delay_ms=float(app.config["MAX_BATCH_DELAY_MS"]),
        poll_seconds=float(app.config["POLL_SECONDS"]),
        observe_batch=metrics.observe_batch,
        observe_run=metrics.observe_run,
        queue_changed=metrics.queue_changed,
        state=Path(app.config["RUN_DIR"]) / "repository" if app.config["RUN_DIR"] else None,
        worker=int(app.config["WORKER_INDEX"]),
    ).start()
    app.extensions["gate"] = make_gate(app)
    register_hooks(app)

    for blueprint in (v2.blueprint, extensions.blueprint, tfserving.blueprint, web.blueprint):
        app.register_blueprint(blueprint)
    app.wsgi_app = V2Inference(app, app.wsgi_app)  # type: ignore[method-assign]
    return app


def make_gate(app: Flask) -> Gate:
    repository: ModelRepository = app.extensions["repository"]
    rows = int(app.config["MAX_REQUEST_ROWS"])

    def limit_for_model(name: str, version: str | None) -> tuple[int, str]:
        model = repository.get(name, version) if name else repository.default()
        return body_limit(model, rows), f"model {model.name} ({rows} rows of {model.row_size()} values)"

    return Gate(
        app.extensions["api_keys"],
        limit_for_model,
        listen_host=str(app.config["LISTEN_HOST"]),
        allowed_hosts=app.config["ALLOWED_HOSTS"],
        allowed_origins=app.config["ALLOWED_ORIGINS"],
        admin_keys=app.extensions["admin_keys"],
    )


def refusal_response(refusal: Refusal) -> Response:
    response = jsonify(error=refusal.message)
    response.status_code = refusal.status
    response.headers.update(refusal.headers)
    return response


def register_hooks(app: Flask) -> None:
    """The hooks every request passes. Each resolves `request` and `g` once: an attribute read through
    Flask's proxies costs a few µs, as much as the rest of a hook."""
    gate: Gate = app.extensions["gate"]

    @app.before_request
    def start() -> Response | None:
        g._get_current_object().started = time.perf_counter()
        incoming = request._get_current_object()  # type: ignore[attr-defined]
        if incoming.environ.get("nnsql.admitted"):  # serve/server.py checked the headers already
            return None
        verdict = gate.admit(
            incoming.method, merged(incoming.path), incoming.query_string.decode("latin-1"), incoming.headers
        )
        return refusal_response(verdict) if isinstance(verdict, Refusal) else None

    @app.after_request
    def cors(response: Response) -> Response:
        allowed = gate.cors_headers(request._get_current_object().headers.get("Origin"))  # type: ignore[attr-defined]
        if allowed:
            response.headers.update(allowed)
        return response

    @app.after_request
    def log(response: Response) -> Response:
        if not ACCESS_LOG.isEnabledFor(logging.INFO):  # --no-access-log: not even built
            return response
        incoming, context = request._get_current_object(), g._get_current_object()  # type: ignore[attr-defined]
        started = getattr(context, "started", None)
        accesslog.log(
            method=incoming.method,
            path=incoming.path,
            status=response.status_code,
            ms=round(1e6 * (time.perf_counter() - started)) / 1000 if started else 0.0,
            model=getattr(context, "model_name", None),
            bytes_in=accesslog.bytes_in(incoming.environ),
            bytes_out=response.calculate_content_length() or 0,
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
