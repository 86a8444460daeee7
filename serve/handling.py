"""What every protocol's views do with a request: the app's resources, the body's size limits, JSON
reading, and inference through the model's batcher. The blueprints (v2, tfserving, web) import these;
the app factory (serve/app.py) only registers the blueprints."""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from flask import current_app, g, request

from .errors import ScoringError
from .metrics import Metrics
from .repository import LoadedModel, ModelRepository
from .tensors import check_tokens, load_json
from .validation import V2_DATATYPES, bounded

BYTES_PER_JSON_VALUE = 24  # generous upper bound for one number in JSON, separators included


def repository() -> ModelRepository:
    return current_app.extensions["repository"]


def metrics() -> Metrics:
    return current_app.extensions["metrics"]


def body_limit(model: LoadedModel, max_rows: int) -> int:
    """The largest body a request for `model` may send: `max_rows` rows in JSON."""
    return max_rows * model.row_size() * BYTES_PER_JSON_VALUE + 64 * 1024


def request_limit(model: LoadedModel) -> int:
    return body_limit(model, int(current_app.config["MAX_REQUEST_ROWS"]))


def too_large(model: LoadedModel) -> ScoringError:
    rows = current_app.config["MAX_REQUEST_ROWS"]
    return ScoringError(
        f"request body exceeds the limit of {request_limit(model)} bytes for model {model.name} "
        f"({rows} rows of {model.row_size()} values)",
        413,
    )


def read_body(model: LoadedModel) -> bytes:
    """The request body, refused with 413 past the limit derived from the model's input shapes."""
    limit = request_limit(model)
    if (request.content_length or 0) > limit:
        raise too_large(model)
    body = request.stream.read(limit + 1)
    if len(body) > limit:
        raise too_large(model)
    return body


def max_values(model: LoadedModel) -> int:
    """The most JSON values a request within the row limit can hold: per row, every number of every
    input and one list per input and per step of its inner dimensions (a (801, 19) input nests 801 lists
    in each row), plus a few thousand for names, shapes, parameters and wrappers."""
    lists = sum(1 + math.prod(bounded(spec["shape"][1:-1])) for spec in model.inputs)
    return int(current_app.config["MAX_REQUEST_ROWS"]) * (model.row_size() + lists) + 4096


def read_json(model: LoadedModel) -> Any:
    """The request body parsed as JSON, after the size checks (serve.jsonbody)."""
    return load_json(read_body(model), max_values(model))


# Content-Types a JSON body may come with: curl -d sends the form type, and TF Serving reads the body as
# JSON whatever the header says. Browsers cannot use this to score from a foreign page: serve.gate refuses
# a foreign Origin.
JSON_TYPES = ("application/json", "", "application/x-www-form-urlencoded")


def require_json() -> None:
    kind = (request.mimetype or "").lower()
    if kind not in JSON_TYPES:
        raise ScoringError(f"unsupported Content-Type {kind!r}: send application/json", 415)


def check_rows(model: LoadedModel, rows: int) -> None:
    """413 beyond the row limit, 400 beyond a Triton model's max_batch_size. Called before a tensor is
    built wherever a few bytes of the body stand for a whole row (TF Serving's shared `context`), and by
    `infer` for every request."""
    limit = int(current_app.config["MAX_REQUEST_ROWS"])
    if rows > limit:
        raise ScoringError(f"{rows} rows exceed the limit of {limit} rows per request", 413)
    most = model.metadata.get("max_batch_size") or rows  # a Triton model's config.pbtxt
    if rows > most:
        raise ScoringError(f"{rows} rows exceed model {model.name}'s max_batch_size of {most}", 400)


def infer(model: LoadedModel, feeds: dict[str, np.ndarray], protocol: str) -> dict[str, np.ndarray]:
    """Run through the model's batcher, enforcing the row limit and counting the request."""
    g.model_name = model.name
    rows = len(next(iter(feeds.values())))
    check_rows(model, rows)
    check_tokens(model, feeds)
    started = time.perf_counter()
    ok = False
    try:
        cast = {name: values.astype(declared(model, name), copy=False) for name, values in feeds.items()}
        assert model.batcher is not None
        outputs = model.batcher.submit(cast)
        refuse_nonfinite(outputs)
        ok = True
        return outputs
    finally:
        seconds = time.perf_counter() - started
        metrics().observe_request(model.name, model.version, protocol, ok, seconds, rows)


def declared(model: LoadedModel, name: str) -> np.dtype:
    """The type the version declares for an input, the one its ONNX graph reads (uint8 pixels, int32
    token ids, float32 features): every input fed as float32 made each request to an integer input's
    model an internal error."""
    spec = next((spec for spec in model.inputs if spec["name"] == name), None)
    return V2_DATATYPES[spec["datatype"]] if spec is not None else np.dtype(np.float32)


def refuse_nonfinite(outputs: dict[str, np.ndarray]) -> None:
    """A row whose outputs are NaN or infinite: the model overflowed float32 on it (inputs within float32's
    range but far beyond the data's scale). Refused, not answered with NaN (whose argmax is class 0);
    docs/security.md says how the SQL targets, which compute in float64, differ."""
    for name, values in outputs.items():
        finite = np.isfinite(values).reshape(len(values), -1).all(axis=1)
        if not finite.all():
            row = int(np.flatnonzero(~finite)[0])
            raise ScoringError(
                f"output {name!r} of row {row} is not finite: the model overflowed float32 on this input "
                "(values far beyond the data's scale)",
                422,
            )
