"""KServe V2 / Open Inference Protocol over real HTTP: parity with Keras, binary extension, errors."""

from __future__ import annotations

import json
import struct

import keras
import numpy as np
import pytest
import requests

from tests import models

HEADER = "Inference-Header-Content-Length"


def v2_request(rows: np.ndarray, name: str = "features") -> dict:
    return {
        "inputs": [
            {"name": name, "shape": list(rows.shape), "datatype": "FP32", "data": rows.ravel().tolist()}
        ]
    }


def test_health_server_and_model_metadata(live):
    assert requests.get(f"{live.url}/v2/health/live").json() == {"live": True}
    assert requests.get(f"{live.url}/v2/health/ready").json() == {"ready": True}
    assert "binary_tensor_data" in requests.get(f"{live.url}/v2").json()["extensions"]
    meta = requests.get(f"{live.url}/v2/models/mnist").json()
    assert meta["inputs"] == [{"name": "features", "datatype": "FP32", "shape": [-1, 784]}]
    assert meta["outputs"][0]["name"] == "probabilities" and meta["versions"] == ["1"]
    assert requests.get(f"{live.url}/v2/models/mnist/versions/1/ready").status_code == 200


def test_json_inference_matches_keras_on_1000_rows(live, cern_mlp_path):
    x = np.random.default_rng(0).random((1000, 784), dtype=np.float32)
    answer = requests.post(f"{live.url}/v2/models/mnist/infer", json={"id": "r1", **v2_request(x)}).json()
    assert answer["id"] == "r1" and answer["model_version"] == "1"
    output = answer["outputs"][0]
    assert output["shape"] == [1000, 10] and output["datatype"] == "FP32"
    actual = np.array(output["data"]).reshape(1000, 10)
    expected = keras.saving.load_model(cern_mlp_path).predict(x, verbose=0)
    assert np.abs(actual - expected).max() <= 1e-5  # float32 parity
    assert (actual.argmax(1) == expected.argmax(1)).all()


def test_nested_data_and_a_named_version(live):
    x = np.random.default_rng(1).random((2, 784), dtype=np.float32)
    flat = requests.post(f"{live.url}/v2/models/mnist/versions/1/infer", json=v2_request(x)).json()
    nested = v2_request(x)
    nested["inputs"][0]["data"] = x.tolist()
    assert (
        requests.post(f"{live.url}/v2/models/mnist/infer", json=nested).json()["outputs"] == flat["outputs"]
    )


def test_binary_tensor_extension_in_and_out(live, cern_mlp_path):
    x = np.random.default_rng(2).random((3, 784), dtype=np.float32)
    raw = x.astype("<f4").tobytes()
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "features",
                    "shape": [3, 784],
                    "datatype": "FP32",
                    "parameters": {"binary_data_size": len(raw)},
                }
            ],
            "outputs": [{"name": "probabilities", "parameters": {"binary_data": True}}],
        }
    ).encode()
    response = requests.post(
        f"{live.url}/v2/models/mnist/infer",
        data=header + raw,
        headers={HEADER: str(len(header)), "Content-Type": "application/octet-stream"},
    )
    assert response.status_code == 200 and response.headers["Content-Type"] == "application/octet-stream"
    length = int(response.headers[HEADER])
    document = json.loads(response.content[:length])
    output = document["outputs"][0]
    assert output["parameters"]["binary_data_size"] == 3 * 10 * 4 and "data" not in output
    values = np.array(struct.unpack("<30f", response.content[length:])).reshape(3, 10)
    expected = keras.saving.load_model(cern_mlp_path).predict(x, verbose=0)
    assert np.abs(values - expected).max() <= 1e-5


def test_a_tensor_with_both_data_and_binary_data_is_refused(live):
    """A tensor that carries JSON `data` and a `binary_data_size` is two tensors: Triton refuses it, and
    so does nnsql (it used to score the binary part and ignore the data)."""
    rows = np.ones((1, 784), dtype=np.float32)
    raw = rows.astype("<f4").tobytes()
    tensor = {"name": "features", "shape": [1, 784], "datatype": "FP32", "data": np.zeros(784).tolist()}
    header = json.dumps({"inputs": [{**tensor, "parameters": {"binary_data_size": len(raw)}}]}).encode()
    response = requests.post(
        f"{live.url}/v2/models/mnist/infer",
        data=header + raw,
        headers={HEADER: str(len(header)), "Content-Type": "application/octet-stream"},
    )
    assert response.status_code == 400, response.text
    assert "not both" in response.json()["error"]


def test_binary_output_for_everything_by_request_parameter(live):
    x = np.zeros((1, 784), dtype=np.float32)
    body = {**v2_request(x), "parameters": {"binary_data_output": True}}
    response = requests.post(f"{live.url}/v2/models/mnist/infer", json=body)
    assert int(response.headers[HEADER]) + 40 == len(response.content)


@pytest.mark.parametrize(
    ("mutate", "status", "message"),
    [
        (
            lambda r: r["inputs"][0].update(shape=[1, 783]),
            400,
            "expected shape ['N', 784], received [1, 783]",
        ),
        (lambda r: r["inputs"][0].update(datatype="FP64"), 400, "expected datatype FP32, received FP64"),
        (lambda r: r["inputs"][0].update(name="pixels"), 400, "has no input 'pixels'"),
        (lambda r: r["inputs"][0].update(data=[0.5] * 10), 400, "needs 784 values, received 10"),
        (lambda r: r.update(outputs=[{"name": "logits"}]), 400, "has no output 'logits'"),
        (lambda r: r.pop("inputs"), 400, "'inputs' must be a non-empty list"),
    ],
)
def test_bad_requests_name_the_tensor_and_expected_vs_received(live, mutate, status, message):
    body = v2_request(np.zeros((1, 784), dtype=np.float32))
    mutate(body)
    response = requests.post(f"{live.url}/v2/models/mnist/infer", json=body)
    assert response.status_code == status
    assert message in response.json()["error"] and set(response.json()) == {"error"}


def test_nan_is_rejected_and_never_echoed(live):
    text = json.dumps(v2_request(np.zeros((1, 784), dtype=np.float32))).replace("0.0", "NaN", 1)
    response = requests.post(
        f"{live.url}/v2/models/mnist/infer", data=text, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400 and "NaN" in response.json()["error"]
    binary = np.full((1, 784), np.inf, dtype="<f4").tobytes()
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "features",
                    "shape": [1, 784],
                    "datatype": "FP32",
                    "parameters": {"binary_data_size": 3136},
                }
            ]
        }
    ).encode()
    response = requests.post(
        f"{live.url}/v2/models/mnist/infer", data=header + binary, headers={HEADER: str(len(header))}
    )
    assert response.status_code == 400 and "NaN or infinite" in response.json()["error"]


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/v2/models/nope/infer", 404),
        ("/v2/models/mnist/versions/9/infer", 404),
        ("/v2/models/mnist/versions/x/infer", 404),
    ],
)
def test_unknown_model_or_version_is_404(live, path, status):
    response = requests.post(f"{live.url}{path}", json=v2_request(np.zeros((1, 784), np.float32)))
    assert response.status_code == status and "error" in response.json()


def test_size_limits_come_from_the_input_shapes(serve_app):
    server = serve_app(MAX_REQUEST_ROWS=4)
    rows = np.zeros((5, 784), dtype=np.float32)
    response = requests.post(f"{server.url}/v2/models/mnist/infer", json=v2_request(rows))
    assert response.status_code == 413 and "limit of 4 rows" in response.json()["error"]
    huge = b"{" + b" " * (4 * 784 * 24 + 70 * 1024) + b"}"
    response = requests.post(
        f"{server.url}/v2/models/mnist/infer", data=huge, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 413 and "(4 rows of 784 values)" in response.json()["error"]


def test_unsupported_media_type_and_invalid_json(live):
    response = requests.post(
        f"{live.url}/v2/models/mnist/infer", data="x", headers={"Content-Type": "text/plain"}
    )
    assert response.status_code == 415 and "application/json" in response.json()["error"]
    response = requests.post(
        f"{live.url}/v2/models/mnist/infer", data="{oops", headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400 and "not valid JSON" in response.json()["error"]


def test_new_version_is_served_without_restart(live, onnx_repo, tmp_path):
    from nnsql.export.onnx.__main__ import export as export_onnx

    path = models.save(models.cern_mlp(seed=42), tmp_path / "v2")
    version, _ = export_onnx(path, onnx_repo, "mnist", 50, 1e-5)
    try:
        import time

        deadline = time.monotonic() + 10
        while requests.get(f"{live.url}/v2/models/mnist").json()["versions"] != ["1", str(version)]:
            assert time.monotonic() < deadline, "the new version never appeared"
            time.sleep(0.1)
        x = np.random.default_rng(5).random((4, 784), dtype=np.float32)
        answer = requests.post(f"{live.url}/v2/models/mnist/infer", json=v2_request(x)).json()
        assert answer["model_version"] == str(version)
        expected = models.cern_mlp(seed=42).predict(x, verbose=0)
        assert np.abs(np.array(answer["outputs"][0]["data"]).reshape(4, 10) - expected).max() <= 1e-5
    finally:
        import shutil

        shutil.rmtree(onnx_repo / "mnist" / str(version))


def test_not_ready_is_503(live):
    repository = live.app.extensions["repository"]
    repository.ready = False  # as before the first scan of the repository finished
    try:
        assert requests.get(f"{live.url}/v2/health/ready").status_code == 503
        response = requests.post(
            f"{live.url}/v2/models/mnist/infer", json=v2_request(np.zeros((1, 784), np.float32))
        )
        assert response.status_code == 503 and "not ready" in response.json()["error"]
    finally:
        repository.ready = True
