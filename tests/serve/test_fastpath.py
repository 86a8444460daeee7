"""V2 inference answered by serve.fastpath (what `nnsql serve` runs) is the answer the Flask view, its
hooks and error handlers give: status, headers, body and access log entry, for answers and refusals."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
from werkzeug.test import EnvironBuilder

from nnsql.serve.app import create_app
from nnsql.serve.fastpath import V2Inference

ROW = np.linspace(0, 1, 784, dtype=np.float32).reshape(1, 784)


def v2_body(**changes) -> bytes:
    tensor = {"name": "features", "shape": [1, 784], "datatype": "FP32", "data": ROW.ravel().tolist()}
    return json.dumps({"inputs": [tensor | changes]}).encode()


def binary_body() -> tuple[bytes, str]:
    raw = ROW.tobytes()
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "features",
                    "shape": [1, 784],
                    "datatype": "FP32",
                    "parameters": {"binary_data_size": len(raw)},
                }
            ],
            "outputs": [{"name": "probabilities", "parameters": {"binary_data": True}}],
            "id": "a-7",
        }
    ).encode()
    return header + raw, str(len(header))


@pytest.fixture(scope="module")
def app(onnx_repo):
    made = create_app(
        {"REPO": str(onnx_repo), "POLL_SECONDS": 60, "ALLOWED_ORIGINS": ["https://page.example"]}
    )
    yield made
    made.extensions["repository"].close()


def call(wsgi, path: str, body: bytes, headers: dict[str, str]) -> tuple[str, dict, bytes]:
    environ = EnvironBuilder(path=path, method="POST", data=body, headers=headers).get_environ()
    environ["nnsql.admitted"] = True  # serve/server.py checked the headers
    environ["wsgi.input_terminated"] = True  # and read the whole body, a chunked one too
    answer: list = []
    chunks = wsgi(environ, lambda status, headers, exc_info=None: answer.extend([status, headers]))
    body = b"".join(chunks)
    getattr(chunks, "close", lambda: None)()
    return answer[0], dict(answer[1]), body


def entries(caplog) -> list[dict]:
    found = [json.loads(r.getMessage()) for r in caplog.records if r.name == "serve.access"]
    caplog.clear()
    return [{k: v for k, v in entry.items() if k != "ms"} for entry in found]


BINARY, LENGTH = binary_body()
CASES = {
    "one row": ("/v2/models/mnist/infer", v2_body(), {"Content-Type": "application/json"}),
    "a version, from an allowed page": (
        "/v2/models/mnist/versions/1/infer",
        v2_body(),
        {"Content-Type": "application/json", "Origin": "https://page.example"},
    ),
    "binary": (
        "/v2/models/mnist/infer",
        BINARY,
        {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": LENGTH},
    ),
    "bad datatype": ("/v2/models/mnist/infer", v2_body(datatype="INT8"), {}),
    "not JSON": ("/v2/models/mnist/infer", b"{", {"Content-Type": "application/json"}),
    "unknown model": ("/v2/models/nothere/infer", v2_body(), {}),
    "unknown version": ("/v2/models/mnist/versions/9/infer", v2_body(), {}),
    "foreign type": ("/v2/models/mnist/infer", v2_body(), {"Content-Type": "text/csv"}),
    "too large": ("/v2/models/mnist/infer", b" " * (64 << 20), {}),
    "chunked": (
        "/v2/models/mnist/infer",
        v2_body(),
        {"Content-Type": "application/json", "Transfer-Encoding": "chunked"},
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_the_answer_and_the_log_entry_are_the_flask_views(app, caplog, case):
    caplog.set_level(logging.INFO, logger="serve.access")
    assert isinstance(app.wsgi_app, V2Inference)
    path, body, headers = CASES[case]
    fast = call(app.wsgi_app, path, body, headers)
    fast_log = entries(caplog)
    flask = call(app.wsgi_app.wsgi_app, path, body, headers)
    assert fast == flask
    assert fast_log == entries(caplog) and len(fast_log) == 1
