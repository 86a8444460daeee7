"""A row within float32's range that overflows float32 inside the network is refused by the scorer (ONNX
computes in float32, like Keras) with 422, while the SQL targets, which compute in float64, score it; a value
beyond float32's range is refused as an input everywhere (docs/security.md)."""

from __future__ import annotations

import numpy as np
import pytest
import requests
import tritonclient.grpc as triton_grpc
from tritonclient.utils import InferenceServerException

from tests import models
from tests.export.executors import DuckDBExecutor


def overflowing_model():
    """Dense(2, softmax) whose first unit computes 10·x0 − 10·x1: for x = (3e38, 3e38) each product is
    beyond float32 (inf − inf = NaN there) and exactly 0 in float64."""
    import keras

    model = keras.Sequential(
        [keras.Input((2,), name="features"), keras.layers.Dense(2, activation="softmax")]
    )
    model.set_weights([np.array([[10.0, 1.0], [-10.0, 1.0]], np.float32), np.zeros(2, np.float32)])
    return model


def test_an_overflow_inside_the_network_is_refused_by_the_scorer_and_scored_in_sql(tmp_path, serve_app):
    from nnsql.export.onnx.__main__ import export as export_onnx

    path = models.save(overflowing_model(), tmp_path / "overflow")
    repo = tmp_path / "repo"
    export_onnx(path, repo, "overflow", 20, 1e-5)
    live = serve_app(REPO=str(repo))
    body = {
        "inputs": [{"name": "features", "shape": [2, 2], "datatype": "FP32", "data": [0.5, 0.5, 3e38, 3e38]}]
    }
    response = requests.post(f"{live.url}/v2/models/overflow/infer", json=body, timeout=30)
    assert response.status_code == 422
    assert response.json()["error"].startswith("output 'probabilities' of row 1 is not finite")
    rows = np.array([[0.5, 0.5], [3e38, 3e38]], np.float32)
    tensor = triton_grpc.InferInput("features", [2, 2], "FP32")
    tensor.set_data_from_numpy(rows)
    client = triton_grpc.InferenceServerClient(url=live.grpc_url)
    with pytest.raises(InferenceServerException) as refused:  # the client's input, not a server fault
        client.infer("overflow", [tensor])
    client.close()
    assert refused.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert refused.value.message() == response.json()["error"]
    body["inputs"][0]["data"][2] = 3.5e38  # beyond float32: refused as an input, like NaN
    response = requests.post(f"{live.url}/v2/models/overflow/infer", json=body, timeout=30)
    assert response.status_code == 400 and "beyond the range of float32" in response.json()["error"]
    duck = DuckDBExecutor(tmp_path)
    assert duck.export(path, "overflow") == 0
    assert duck.query("SELECT overflow.predict_proba([3e38, 3e38])") == [([0.0, 1.0],)]
