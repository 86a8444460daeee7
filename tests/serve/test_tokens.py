"""Token ids over HTTP: a model whose input holds token ids (a Keras 2 Embedding model, its input declared
float32) answers a 400 naming the input, the row, the position and the allowed range for an id outside
its vocabulary, a negative one or a fraction, on KServe V2 and TF Serving REST alike; valid ids score as
Keras does."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import requests

from nnsql.export.frontend.model import load_model
from nnsql.export.onnx.__main__ import export as export_onnx
from tests import their_models
from tests.their_models import STEPS, VOCABULARY


@pytest.fixture(scope="module")
def token_model(tmp_path_factory):
    """The model's path and a repository holding its ONNX export as 'topics'."""
    directory = tmp_path_factory.mktemp("tokens")
    path = their_models.keras2_text(directory / "model")
    export_onnx(path, directory / "repo", "topics", 100, 1e-5)
    return path, directory / "repo"


def input_name(repo: Path) -> str:
    """The model's input as its repository names it (Keras numbers layer names per process)."""
    return json.loads((repo / "topics" / "1" / "metadata.json").read_text())["inputs"][0]["name"]


def v2_infer(url: str, rows: np.ndarray, name: str) -> requests.Response:
    tensor = {"name": name, "datatype": "FP32", "shape": list(rows.shape)}
    return requests.post(
        f"{url}/v2/models/topics/infer", json={"inputs": [{**tensor, "data": rows.ravel().tolist()}]}
    )


def test_valid_token_ids_score_as_keras_does(serve_app, token_model):
    path, repo = token_model
    live = serve_app(REPO=str(repo))
    rows = their_models.token_rows(5)
    answer = v2_infer(live.url, rows, input_name(repo))
    assert answer.status_code == 200, answer.text
    scores = np.array(answer.json()["outputs"][0]["data"]).reshape(len(rows), -1)
    expected = load_model(path).predict(rows, verbose=0)
    assert np.abs(scores - expected).max() <= 1e-5


@pytest.mark.parametrize(("value", "shown"), [(VOCABULARY, str(VOCABULARY)), (-1, "-1"), (3.5, "3.5")])
def test_a_bad_token_id_is_a_400_naming_input_position_and_range(serve_app, token_model, value, shown):
    live = serve_app(REPO=str(token_model[1]))
    rows = their_models.token_rows(3)
    rows[2, STEPS - 1] = value
    expected = f"row 2 position {STEPS - 1} holds {shown}, not a whole number from 0 to {VOCABULARY - 1}"
    name = input_name(token_model[1])
    answer = v2_infer(live.url, rows, name)
    assert answer.status_code == 400 and expected in answer.json()["error"]
    assert name in answer.json()["error"]
    rest = requests.post(f"{live.url}/v1/models/topics:predict", json={"instances": rows.tolist()})
    assert rest.status_code == 400 and expected in rest.json()["error"]
