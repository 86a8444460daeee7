"""One request, one route, one limit: `nnsql serve` reads a request's path once, and the gate (API key,
body limit), the fast path of V2 inference and the Flask routes all see that one path.

`//v2/models/NAME/infer` was inference to the routes (Werkzeug merges the slashes, and redirects) but
not to the gate, which gave it the 1 MiB limit of other routes: a model taking less than that took a
body past its own limit, and a model taking more was refused what `/v2/...` took. Loopback only."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator

import pytest

from tests.serve.conftest import LiveServer, ServeProcess, onnx_repo, serve_app  # noqa: F401  (fixtures)

ROWS = 100  # --max-request-rows: mnist (784 values a row) takes ~1.9 MB, mixed (64) ~0.2 MB
GENERAL = 1 << 20  # serve.gate.DEFAULT_BODY_LIMIT: what a request to any other route may send
SPELLINGS = (
    "/v2/models/{}/infer",
    "//v2/models/{}/infer",
    "/v2//models/{}//infer",
    "//v2/models/{}/versions/1/infer",
)


MODELS = {"mnist": ("features", [1, 784]), "mixed": ("image", [1, 8, 8])}  # name: input, shape of a row


def padded(model: str, size: int) -> bytes:
    """A valid V2 request for one row of `model`, `size` bytes long: JSON allows any amount of white space
    after the document."""
    name, shape = MODELS[model]
    values = 1
    for extent in shape:
        values *= extent
    tensor = {"name": name, "shape": shape, "datatype": "FP32", "data": [0.5] * values}
    document = json.dumps({"inputs": [tensor]}).encode()
    return document + b" " * (size - len(document))


def post(port: int, path: str, body: bytes) -> tuple[int, str]:
    """POST `path` exactly as spelled (http.client sends the target as given)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("POST", path, body, {"Content-Type": "application/json"})
        answer = connection.getresponse()
        return answer.status, answer.read().decode(errors="replace")
    finally:
        connection.close()


@pytest.fixture(scope="module")
def served(onnx_repo) -> Iterator[ServeProcess]:  # noqa: F811
    with ServeProcess.running(onnx_repo, "--max-request-rows", str(ROWS), "--no-access-log") as server:
        yield server


@pytest.mark.slow
def test_a_body_past_the_models_limit_is_refused_however_the_path_is_spelled(served):
    """mixed takes ~0.2 MB: 0.3 MB is past its limit, under the 1 MiB of other routes."""
    body = padded("mixed", 300_000)
    for spelling in SPELLINGS:
        status, text = post(served.port, spelling.format("mixed"), body)
        assert status == 413 and "model mixed" in text, (spelling, status, text)


@pytest.mark.slow
def test_a_body_within_the_models_limit_is_served_however_the_path_is_spelled(served):
    """mnist takes ~1.9 MB: 1.5 MB is within its limit, past the 1 MiB of other routes."""
    body = padded("mnist", 1_500_000)
    answers = set()
    for spelling in SPELLINGS:
        status, text = post(served.port, spelling.format("mnist"), body)
        assert status == 200, (spelling, status, text[:300])
        answers.add(json.dumps(json.loads(text)["outputs"]))
    assert len(answers) == 1, answers  # one model, one row: one answer


def test_the_app_gives_a_merged_path_its_routes_limit(serve_app):  # noqa: F811
    """Under another WSGI server the app's own check (before_request) reads the path as Werkzeug routes
    it, merging slashes: past the model's limit is 413, within it is Werkzeug's redirect to the one
    spelling of the route (308), never the 1 MiB limit of other routes."""
    server: LiveServer = serve_app(MAX_REQUEST_ROWS=ROWS)
    port = int(server.url.rsplit(":", 1)[1])
    status, text = post(port, "/v2//models/mixed//infer", padded("mixed", 300_000))
    assert status == 413 and "model mixed" in text, (status, text)
    status, text = post(port, "/v2//models/mnist//infer", padded("mnist", 1_500_000))
    assert status == 308, (status, text[:300])
