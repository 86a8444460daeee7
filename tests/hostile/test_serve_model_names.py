"""Model names as `nnsql serve` answers to them, through the server users run (loopback only).

A model directory's name is the model's name: `nnsql export onnx --name` takes any name, and `nnsql models
list` shows it as it is. A name that is not ASCII reaches the server percent-encoded as UTF-8 (tritonclient
quotes it so, as browsers and curl do): the admission of a request read it as Latin-1 and answered 404 for
a model that `GET /v2/models/NAME` described."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from urllib.parse import quote

import numpy as np
import pytest
import requests
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton_http
from tritonclient.utils import InferenceServerException

from tests.fixtures import free_port
from tests.serve.conftest import ServeProcess, onnx_repo  # noqa: F401  (the fixture, used below)

pytestmark = pytest.mark.slow
NAMES = ("modèle", "模型", "ß-ü")  # Latin-1 letters, CJK, and a name Latin-1 cannot even hold
ROW = np.linspace(0, 1, 784, dtype=np.float32).reshape(1, 784)


@pytest.fixture(scope="module")
def served(onnx_repo, tmp_path_factory) -> Iterator[tuple[ServeProcess, int]]:  # noqa: F811
    repo = tmp_path_factory.mktemp("named")
    for name in ("mnist", *NAMES):
        shutil.copytree(onnx_repo / "mnist", repo / name)
    grpc_port = free_port()
    with ServeProcess.running(repo, "--grpc-port", str(grpc_port), "--no-access-log") as server:
        yield server, grpc_port


def body(rows: np.ndarray) -> dict:
    return {
        "inputs": [
            {"name": "features", "shape": list(rows.shape), "datatype": "FP32", "data": rows.ravel().tolist()}
        ]
    }


def expected(server: ServeProcess) -> np.ndarray:
    """What the same model file answers under an ASCII name. Compared exactly: the same bytes of the same
    model score the same row alone, and float32 values survive JSON as the shortest text that reads back."""
    answer = requests.post(f"{server.url}/v2/models/mnist/infer", json=body(ROW), timeout=30)
    assert answer.status_code == 200, answer.text
    return np.float32(answer.json()["outputs"][0]["data"])


@pytest.mark.parametrize("name", NAMES)
def test_a_name_that_is_not_ascii_is_served_over_http(served, name: str):
    server, _ = served
    scores = expected(server)
    path = f"{server.url}/v2/models/{quote(name)}"
    described = requests.get(path, timeout=30)
    assert described.status_code == 200 and described.json()["name"] == name, described.text
    for route in ("/infer", "/versions/1/infer"):
        answer = requests.post(path + route, json=body(ROW), timeout=30)
        assert answer.status_code == 200, (route, answer.text)
        assert answer.json()["model_name"] == name
        np.testing.assert_array_equal(np.float32(answer.json()["outputs"][0]["data"]), scores)
    answer = requests.post(
        f"{server.url}/v1/models/{quote(name)}:predict", json={"instances": ROW.tolist()}, timeout=30
    )
    assert answer.status_code == 200, answer.text  # TF Serving REST
    np.testing.assert_array_equal(np.float32(answer.json()["predictions"][0]), scores)


@pytest.mark.parametrize("name", NAMES)
def test_a_name_that_is_not_ascii_is_served_by_the_triton_clients(served, name: str):
    server, grpc_port = served
    scores = expected(server)
    http = triton_http.InferenceServerClient(server.url.removeprefix("http://"))
    given = triton_http.InferInput("features", [1, 784], "FP32")
    given.set_data_from_numpy(ROW)
    np.testing.assert_array_equal(http.infer(name, [given]).as_numpy("probabilities").ravel(), scores)
    rpc = triton_grpc.InferenceServerClient(f"127.0.0.1:{grpc_port}")
    given = triton_grpc.InferInput("features", [1, 784], "FP32")
    given.set_data_from_numpy(ROW)
    np.testing.assert_array_equal(rpc.infer(name, [given]).as_numpy("probabilities").ravel(), scores)
    rpc.close()


LONG = "a\x1b[2J\n" + "b" * 20_000  # a terminal escape and a line break in the first characters, then more
SHOWN = 64  # characters of a name an error shows (serve.errors.MAX_ECHOED)


def small_and_escaped(message: str) -> None:
    """The name shown is its first 64 characters, escaped; the models served still fit in the line."""
    assert "b" * (SHOWN - 5) not in message and "b" * (SHOWN - 6) in message, message
    assert message.isprintable(), repr(message)  # no line break, no escape: one line, read as text
    assert "20006 characters" in message and "models: ['mnist'" in message, message


def test_a_long_name_is_shown_cut_and_escaped_over_http(served):
    server, _ = served
    path = f"{server.url}/v2/models/{quote(LONG)}"
    for answer in (
        requests.get(path, timeout=30),
        requests.post(path + "/infer", json=body(ROW), timeout=30),
        requests.post(path + "/versions/1/infer", json=body(ROW), timeout=30),
        requests.post(f"{server.url}/v1/models/{quote(LONG)}:predict", json={"instances": []}, timeout=30),
    ):
        assert answer.status_code == 404, answer.text[:400]
        small_and_escaped(answer.json()["error"])


def test_a_long_name_is_shown_cut_and_escaped_over_grpc(served):
    _, grpc_port = served
    rpc = triton_grpc.InferenceServerClient(f"127.0.0.1:{grpc_port}")
    given = triton_grpc.InferInput("features", [1, 784], "FP32")
    given.set_data_from_numpy(ROW)
    for call in (lambda: rpc.infer(LONG, [given]), lambda: rpc.get_model_metadata(LONG)):
        with pytest.raises(InferenceServerException) as raised:
            call()
        assert raised.value.status() == "StatusCode.NOT_FOUND", raised.value
        small_and_escaped(raised.value.message())
    rpc.close()
