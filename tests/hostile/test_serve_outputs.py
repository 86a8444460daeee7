"""The outputs a request asks for count against what it may cost, as its inputs do. Each output named
in `outputs` repeats its whole tensor in the answer: a 140 KB request naming a model's one output 5,000
times, with 1,024 rows as binary input, was answered with 300 MB of JSON and grew the worker by 1.1 GB
(no key needed on an open server). An output asked for twice is refused before the model runs, over
REST and gRPC alike, as Triton refuses it."""

from __future__ import annotations

import grpc
import numpy as np
import pytest
import requests
from tritonclient.grpc import service_pb2, service_pb2_grpc

from tests.serve.conftest import live, onnx_repo, serve_app  # noqa: F401  (fixtures, used below)

ROW = {"name": "features", "datatype": "FP32", "shape": [1, 784], "data": [0.5] * 784}


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
def test_an_output_asked_for_twice_is_refused(live, binary):  # noqa: F811
    asked = [{"name": "probabilities", "parameters": {"binary_data": binary}}] * 2
    answer = requests.post(
        f"{live.url}/v2/models/mnist/infer", json={"inputs": [ROW], "outputs": asked}, timeout=30
    )
    assert answer.status_code == 400, answer.text[:200]
    assert answer.json() == {"error": "output 'probabilities' is asked for twice: ask for each output once"}
    served = live.app.extensions["metrics"].render({}).decode()
    assert 'protocol="v2"' not in served  # refused before the model ran


def test_an_output_asked_for_twice_is_refused_over_grpc(live):  # noqa: F811
    request = service_pb2.ModelInferRequest(model_name="mnist")
    request.inputs.add(name="features", datatype="FP32", shape=[1, 784])
    request.raw_input_contents.append(np.full(784, 0.5, np.float32).tobytes())
    request.outputs.add(name="probabilities")
    request.outputs.add(
        name="probabilities", parameters={"classification": service_pb2.InferParameter(int64_param=3)}
    )
    with grpc.insecure_channel(live.grpc_url) as channel, pytest.raises(grpc.RpcError) as refused:
        service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request, timeout=30)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.value.details() == "output 'probabilities' is asked for twice: ask for each output once"


def test_each_output_once_is_answered(live):  # noqa: F811
    asked = [{"name": "probabilities"}]
    answer = requests.post(
        f"{live.url}/v2/models/mnist/infer", json={"inputs": [ROW], "outputs": asked}, timeout=30
    )
    assert answer.status_code == 200, answer.text[:200]
    assert [output["name"] for output in answer.json()["outputs"]] == ["probabilities"]
