"""Options a client may ask for that this server does not offer are refused, never silently ignored:
a TF Serving `signature_name` the model does not have (TF Serving answers 400; nnsql scored the default
signature), and the shared-memory extension's parameters on a V2 input or output (nnsql read the input
from `data` and answered in the body, while the client looked for them in its shared-memory region)."""

from __future__ import annotations

import grpc
import numpy as np
import pytest
import requests
from tritonclient.grpc import service_pb2, service_pb2_grpc

from tests.serve.conftest import live, onnx_repo, serve_app  # noqa: F401  (fixtures, used below)

ROW = [0.5] * 784
V2_ROW = {"name": "features", "datatype": "FP32", "shape": [1, 784], "data": ROW}
SHARED = {"shared_memory_region": "input0_data", "shared_memory_byte_size": 3136}


def one_line_error(answer: requests.Response) -> str:
    assert answer.status_code == 400, answer.text[:200]
    error = answer.json()["error"]
    assert "\n" not in error
    return error


@pytest.mark.parametrize("suffix", [":predict", ":classify"])
@pytest.mark.parametrize("signature", ["other", 7, "x" * 500])
def test_a_signature_the_model_lacks_is_refused(live, suffix, signature):  # noqa: F811
    body = {"signature_name": signature}
    body |= {"instances": [ROW]} if suffix == ":predict" else {"examples": [{"features": ROW}]}
    answer = requests.post(f"{live.url}/v1/models/mnist{suffix}", json=body, timeout=30)
    error = one_line_error(answer)
    assert "serving_default" in error and len(error) < 200, error


@pytest.mark.parametrize("signature", [None, "", "serving_default"])
def test_the_default_signature_scores(live, signature):  # noqa: F811
    body = {"instances": [ROW]} | ({} if signature is None else {"signature_name": signature})
    answer = requests.post(f"{live.url}/v1/models/mnist:predict", json=body, timeout=30)
    assert answer.status_code == 200 and len(answer.json()["predictions"]) == 1, answer.text[:200]


def test_shared_memory_on_an_input_with_data_is_refused(live):  # noqa: F811
    tensor = V2_ROW | {"parameters": SHARED}
    answer = requests.post(f"{live.url}/v2/models/mnist/infer", json={"inputs": [tensor]}, timeout=30)
    assert "shared memory" in one_line_error(answer)


def test_shared_memory_for_an_output_is_refused(live):  # noqa: F811
    asked = [{"name": "probabilities", "parameters": SHARED}]
    answer = requests.post(
        f"{live.url}/v2/models/mnist/infer", json={"inputs": [V2_ROW], "outputs": asked}, timeout=30
    )
    assert "shared memory" in one_line_error(answer)


@pytest.mark.parametrize("where", ["input", "output"])
def test_shared_memory_is_refused_over_grpc(live, where):  # noqa: F811
    region = {"shared_memory_region": service_pb2.InferParameter(string_param="region0")}
    request = service_pb2.ModelInferRequest(model_name="mnist")
    request.inputs.add(
        name="features", datatype="FP32", shape=[1, 784], parameters=region if where == "input" else {}
    )
    request.raw_input_contents.append(np.full(784, 0.5, np.float32).tobytes())
    if where == "output":
        request.outputs.add(name="probabilities", parameters=region)
    with grpc.insecure_channel(live.grpc_url) as channel, pytest.raises(grpc.RpcError) as refused:
        service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request, timeout=30)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "shared memory" in refused.value.details()
