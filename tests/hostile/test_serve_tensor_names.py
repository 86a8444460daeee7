"""Tensor names a client sends (the inputs and outputs of a KServe V2 request, over HTTP JSON, the binary
tensor extension and gRPC ModelInfer), through `nnsql serve` on loopback. A name the model does not
declare is refused in one line that shows its first characters escaped; beyond 256 bytes it is refused
as too long (the message cap alone let 300 characters of it through, line breaks and escapes included)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np
import pytest
import requests
import tritonclient.grpc as triton_grpc
from tritonclient.utils import InferenceServerException

from nnsql.serve.tensors import HEADER_LENGTH, MAX_NAME_BYTES
from tests.fixtures import free_port
from tests.serve.conftest import ServeProcess, onnx_repo  # noqa: F401  (the fixture, used below)

pytestmark = pytest.mark.slow
ROW = np.linspace(0, 1, 784, dtype=np.float32).reshape(1, 784)
LONG = "a\x1b[2J\n" + "b" * 20_000  # a terminal escape and a line break in the first characters, then more
SHOWN = 64  # characters of a name an error shows (serve.errors.MAX_ECHOED)


@pytest.fixture(scope="module")
def served(onnx_repo) -> Iterator[tuple[ServeProcess, int]]:  # noqa: F811
    grpc_port = free_port()
    with ServeProcess.running(onnx_repo, "--grpc-port", str(grpc_port), "--no-access-log") as server:
        yield server, grpc_port


def tensor(name: str = "features") -> dict:
    return {"name": name, "shape": [1, 784], "datatype": "FP32", "data": ROW.ravel().tolist()}


def too_long(message: str) -> None:
    """Refused as too long, showing the first 64 characters escaped, on one printable line."""
    assert f"over {MAX_NAME_BYTES} bytes" in message, message
    assert "b" * (SHOWN - 5) not in message and "b" * (SHOWN - 6) in message, message
    assert message.isprintable() and "20006 characters" in message, repr(message)


def post(server: ServeProcess, document: dict) -> requests.Response:
    return requests.post(f"{server.url}/v2/models/mnist/infer", json=document, timeout=30)


def test_a_long_input_or_output_name_is_refused_over_http_json(served):
    server, _ = served
    for document in ({"inputs": [tensor(LONG)]}, {"inputs": [tensor()], "outputs": [{"name": LONG}]}):
        answer = post(server, document)
        assert answer.status_code == 400, answer.text[:400]
        too_long(answer.json()["error"])


def test_a_long_input_name_is_refused_with_the_binary_extension(served):
    server, _ = served
    given = {"name": LONG, "shape": [1, 784], "datatype": "FP32", "parameters": {"binary_data_size": 3136}}
    header = json.dumps({"inputs": [given]}).encode()
    answer = requests.post(
        f"{server.url}/v2/models/mnist/infer",
        data=header + ROW.astype("<f4").tobytes(),
        headers={"Content-Type": "application/octet-stream", HEADER_LENGTH: str(len(header))},
        timeout=30,
    )
    assert answer.status_code == 400, answer.text[:400]
    too_long(answer.json()["error"])


def test_a_long_input_or_output_name_is_refused_over_grpc(served):
    _, grpc_port = served
    rpc = triton_grpc.InferenceServerClient(f"127.0.0.1:{grpc_port}")
    try:
        for inputs, outputs in ((LONG, None), ("features", LONG)):
            given = triton_grpc.InferInput(inputs, [1, 784], "FP32")
            given.set_data_from_numpy(ROW)
            asked = [triton_grpc.InferRequestedOutput(outputs)] if outputs else None
            with pytest.raises(InferenceServerException) as raised:
                rpc.infer("mnist", [given], outputs=asked)
            assert raised.value.status() == "StatusCode.INVALID_ARGUMENT", raised.value
            too_long(raised.value.message())
    finally:
        rpc.close()


@pytest.mark.parametrize(
    ("name", "refused_as_long"),
    [
        ("x" * MAX_NAME_BYTES, False),
        ("é" * (MAX_NAME_BYTES // 2), False),  # 256 bytes in UTF-8
        ("é" * (MAX_NAME_BYTES // 2 + 1), True),  # 129 characters, 258 bytes: the bound counts bytes
    ],
)
def test_the_bound_counts_the_bytes_of_an_unknown_name(served, name, refused_as_long):
    server, _ = served
    answer = post(server, {"inputs": [tensor(name)]})
    message = answer.json()["error"]
    assert answer.status_code == 400 and message.isprintable(), message
    assert (f"over {MAX_NAME_BYTES} bytes" in message) is refused_as_long, message
    assert ("has no input" in message) is not refused_as_long, message
    assert name[: SHOWN + 1] not in message and name[:SHOWN] in message, message


def test_a_declared_name_is_answered(served):
    server, _ = served
    answer = post(server, {"inputs": [tensor()], "outputs": [{"name": "probabilities"}]})
    assert answer.status_code == 200, answer.text[:400]
    assert len(answer.json()["outputs"][0]["data"]) == 10
