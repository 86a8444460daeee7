"""TF Serving REST over real HTTP: row and columnar formats, status, metadata."""

import keras
import numpy as np
import requests


def test_row_and_columnar_predict_match_keras(live, cern_mlp_path):
    x = np.random.default_rng(3).random((1000, 784), dtype=np.float32)
    expected = keras.saving.load_model(cern_mlp_path).predict(x, verbose=0)
    rows = requests.post(f"{live.url}/v1/models/mnist:predict", json={"instances": x.tolist()}).json()
    columns = requests.post(
        f"{live.url}/v1/models/mnist/versions/1:predict", json={"inputs": x.tolist()}
    ).json()
    named = requests.post(
        f"{live.url}/v1/models/mnist:predict", json={"instances": [{"features": r} for r in x[:5].tolist()]}
    ).json()
    assert np.abs(np.array(rows["predictions"]) - expected).max() <= 1e-5
    assert np.abs(np.array(columns["outputs"]) - expected).max() <= 1e-5
    assert np.abs(np.array(named["predictions"]) - expected[:5]).max() <= 1e-5


def test_multi_dimensional_input_model(live, mixed_layers_path):
    x = np.random.default_rng(4).random((6, 8, 8), dtype=np.float32)
    answer = requests.post(
        f"{live.url}/v1/models/mixed:predict", json={"inputs": {"image": x.tolist()}}
    ).json()
    expected = keras.saving.load_model(mixed_layers_path).predict(x, verbose=0)
    assert np.abs(np.array(answer["outputs"]) - expected).max() <= 1e-5


def test_status_and_metadata(live):
    status = requests.get(f"{live.url}/v1/models/mnist").json()
    assert status["model_version_status"][0] == {
        "version": "1",
        "state": "AVAILABLE",
        "status": {"error_code": "OK", "error_message": ""},
    }
    metadata = requests.get(f"{live.url}/v1/models/mnist/metadata").json()
    signature = metadata["metadata"]["signature_def"]["signature_def"]["serving_default"]
    assert signature["inputs"]["features"]["tensor_shape"]["dim"] == [{"size": "-1"}, {"size": "784"}]


def test_errors(live):
    assert requests.post(f"{live.url}/v1/models/nope:predict", json={"instances": [[0]]}).status_code == 404
    bad = requests.post(f"{live.url}/v1/models/mnist:predict", json={"instances": [[0.1, 0.2]]})
    assert bad.status_code == 400 and "needs 784 values, received 2" in bad.json()["error"]
    neither = requests.post(f"{live.url}/v1/models/mnist:predict", json={"rows": []})
    assert neither.status_code == 400 and "instances" in neither.json()["error"]
    wrong_type = requests.post(
        f"{live.url}/v1/models/mnist:predict", data="[]", headers={"Content-Type": "text/csv"}
    )
    assert wrong_type.status_code == 415
