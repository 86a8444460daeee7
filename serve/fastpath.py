"""V2 inference without Flask's request machinery: a WSGI middleware in front of the app.

A one-row V2 request costs a few hundred µs of CPU, and Flask's part of it (request context, routing,
request and response objects, hook dispatch, header objects) was about a third. This middleware answers
`POST /v2/models/NAME[/versions/V]/infer` itself, inside an app context (the views' helpers read
`current_app` and `g`), with what the app's view, hooks and error handlers would answer: the same body
and status, the security and CORS headers, the access log entry. Every other request, and one whose
headers serve/server.py has not checked (another WSGI server), goes to Flask.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Iterable
from typing import Any

import orjson
from flask import Flask
from werkzeug.exceptions import HTTPException
from werkzeug.http import HTTP_STATUS_CODES, parse_options_header
from werkzeug.wsgi import get_input_stream

from . import accesslog, web
from .errors import ScoringError
from .gate import Gate
from .handling import JSON_TYPES, max_values, request_limit, too_large
from .repository import LoadedModel
from .tensors import HEADER_LENGTH, split_v2_request
from .v2 import ready_model, run_v2

INFER = re.compile(r"/v2/models/(?P<name>[^/]+)(?:/versions/(?P<version>[^/]+))?/infer")
Answer = tuple[int, list[tuple[str, str]], bytes]


class V2Inference:
    """WSGI middleware: `app.wsgi_app = V2Inference(app, app.wsgi_app)`."""

    def __init__(self, app: Flask, wsgi_app: Callable) -> None:
        self.app = app
        self.wsgi_app = wsgi_app
        self.gate: Gate = app.extensions["gate"]

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        # the path serve/server.py admitted (slashes merged, read as UTF-8), set with nnsql.admitted
        path = environ.get("nnsql.path", "") if environ.get("nnsql.admitted") else ""
        match = INFER.fullmatch(path) if environ["REQUEST_METHOD"] == "POST" else None
        if match is None:
            return self.wsgi_app(environ, start_response)
        started = time.perf_counter()
        with self.app.app_context() as context:
            context.g.started = started
            status, headers, body = self.answer(environ, match["name"], match["version"])
            headers += [(name, value) for name, value in web.SECURITY_HEADERS.items()]
            headers += list(self.gate.cors_headers(environ.get("HTTP_ORIGIN")).items())
            headers.append(("Content-Length", str(len(body))))
            self.log(environ, path, status, started, len(body), context.g)
        start_response(f"{status} {HTTP_STATUS_CODES.get(status, 'UNKNOWN').upper()}", headers)
        return [body]

    def answer(self, environ: dict, name: str, version: str | None) -> Answer:
        """The view's answer, or the app's error handlers' (serve/app.py) for what it raises."""
        try:
            return infer(environ, ready_model(name, version))
        except ScoringError as error:
            return error_answer(error.status, error.message)
        except HTTPException as error:
            return error_answer(error.code or 500, error.description or error.name)
        except Exception as error:
            self.app.logger.exception("unexpected error")
            return error_answer(500, f"internal error ({type(error).__name__})")

    def log(self, environ: dict, path: str, status: int, started: float, size: int, context: Any) -> None:
        """The entry, with the least work a request can do: in a busy worker each step is cold by its
        turn (the app context's `g` read without its proxy, the ms rounded without round(x, 3)'s dtoa)."""
        if accesslog.ACCESS_LOG.isEnabledFor(logging.INFO):
            model = getattr(context, "model_name", None)
            accesslog.inference(path, status, started, model, environ.get("CONTENT_LENGTH", ""), size)


def error_answer(status: int, message: str) -> Answer:
    return status, [("Content-Type", "application/json")], dumps({"error": message})


def content_length(environ: dict) -> int | None:
    text = environ.get("CONTENT_LENGTH", "")
    return int(text) if text.isdigit() else None


def read_body(environ: dict, model: LoadedModel) -> bytes:
    """As serve.handling.read_body: the body, refused with 413 past the model's limit."""
    limit = request_limit(model)
    if (content_length(environ) or 0) > limit:
        raise too_large(model)
    body = get_input_stream(environ).read(limit + 1)
    if len(body) > limit:
        raise too_large(model)
    return body


def infer(environ: dict, model: LoadedModel) -> Answer:
    """As serve.v2.infer_v2, from the WSGI environ."""
    header_length = environ.get("HTTP_" + HEADER_LENGTH.upper().replace("-", "_"))
    kind = parse_options_header(environ.get("CONTENT_TYPE", ""))[0].lower()
    if header_length is None and kind not in JSON_TYPES:
        raise ScoringError(
            f"unsupported Content-Type {kind!r}: send application/json, or application/octet-stream "
            f"with {HEADER_LENGTH}",
            415,
        )
    body, binary = split_v2_request(read_body(environ, model), header_length, max_values(model))
    document, raw = run_v2(model, body, binary, "v2")
    if not raw:
        return 200, [("Content-Type", "application/json")], dumps(document)
    header = json.dumps(document).encode()
    headers = [("Content-Type", "application/octet-stream"), (HEADER_LENGTH, str(len(header)))]
    return 200, headers, header + raw


def dumps(document: Any) -> bytes:
    """As `jsonify` writes a response with the app's JSON provider (serve/app.py): a line."""
    return orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS) + b"\n"
