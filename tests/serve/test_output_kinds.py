"""Every output kind through ONNX and real HTTP, with models written as users write them (binary,
multi-label, logits, regression with one and three values; `.keras` and legacy `.h5`). V2 and TF
Serving's :predict return what model.predict returns; :classify and /score answer in the Keras user's
reading (p > 0.5, the softmax of the logits), and refuse in one line where a kind has no classes."""

from __future__ import annotations

import json

import numpy as np
import pytest
import requests

from nnsql.export.onnx.__main__ import export
from tests import user_models as cases

pytestmark = pytest.mark.slow
CASES = cases.CASES
ROWS = cases.rows(8)


@pytest.fixture(scope="module")
def kinds_repo(user_models, tmp_path_factory):
    """Every user model exported to one ONNX repository, and Keras's predictions on the test rows."""
    import keras
    import tf_keras

    repo = tmp_path_factory.mktemp("kinds_repository")
    expected = {}
    for (case, fmt), path in user_models.items():
        version, report = export(path, repo, f"{case}_{fmt}", 50, 1e-5)
        assert version == 1 and report.passed
        model = tf_keras.models.load_model(path) if fmt == "h5" else keras.saving.load_model(path)
        expected[case, fmt] = model.predict(ROWS, verbose=0)
    return repo, expected


@pytest.fixture(scope="module")
def server(kinds_repo):
    from nnsql.serve.app import create_app
    from tests.serve.conftest import LiveServer

    live = LiveServer(create_app({"REPO": str(kinds_repo[0]), "POLL_SECONDS": 0}))
    yield live
    live.stop()


def post(server, path: str, body: dict) -> requests.Response:
    return requests.post(f"{server.url}{path}", json=body, timeout=30)


@pytest.mark.parametrize("fmt", ["keras", "h5"])
@pytest.mark.parametrize("case", list(CASES))
def test_predict_returns_what_model_predict_returns(server, kinds_repo, case, fmt):
    repo, expected = kinds_repo
    name, out = f"{case}_{fmt}", expected[case, fmt]
    metadata = json.loads((repo / name / "1" / "metadata.json").read_text())
    assert metadata["output_kinds"] == [CASES[case].kind]
    first = {"logits": "logits", "values": "values"}.get(CASES[case].kind, "probabilities")
    v2 = requests.get(f"{server.url}/v2/models/{name}", timeout=30).json()
    assert v2["outputs"][0]["name"] == first and v2["parameters"]["kind"] == CASES[case].kind
    body = {"inputs": [{"name": metadata["inputs"][0]["name"], "shape": [8, 4], "datatype": "FP32"}]}
    body["inputs"][0]["data"] = ROWS.ravel().tolist()
    got = post(server, f"/v2/models/{name}/infer", body).json()["outputs"][0]
    assert np.abs(np.array(got["data"]).reshape(got["shape"]) - out).max() <= 1e-5
    rows = post(server, f"/v1/models/{name}:predict", {"instances": ROWS.tolist()}).json()["predictions"]
    assert np.abs(np.array(rows) - out).max() <= 1e-5


def keras_reading(kind: str, out: np.ndarray) -> np.ndarray:
    """The class probabilities a Keras user derives: [1 - p, p], or the logits' softmax."""
    if kind == "binary":
        return np.concatenate([1 - out, out], axis=1)
    e = np.exp(out - out.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("fmt", ["keras", "h5"])
@pytest.mark.parametrize("case", list(CASES))
def test_classify_and_score_answer_by_the_kind(server, kinds_repo, case, fmt):
    name, out, spec = f"{case}_{fmt}", kinds_repo[1][case, fmt], CASES[case]
    input_name = json.loads((kinds_repo[0] / name / "1" / "metadata.json").read_text())["inputs"][0]["name"]
    classify = post(
        server, f"/v1/models/{name}:classify", {"examples": [{input_name: r} for r in ROWS.tolist()]}
    )
    scored = [post(server, f"/score?model={name}", {"features": row}).json() for row in ROWS.tolist()]
    if spec.kind in ("values", "multilabel"):
        assert classify.status_code == 400 and ":classify has no meaning" in classify.json()["error"]
        assert "\n" not in classify.json()["error"]
    if spec.kind == "values":
        assert np.abs(np.array([s["values"] for s in scored]) - out).max() <= 1e-5
        assert all("class" not in s and "label" not in s for s in scored)
        return
    if spec.kind == "multilabel":
        wanted = [[c for c, p in zip(spec.classes, row, strict=True) if p > 0.5] for row in out]
        assert [s["labels"] for s in scored] == wanted and all("class" not in s for s in scored)
        return
    q = keras_reading(spec.kind, out)
    result = classify.json()["result"]
    assert [[label for label, _ in row] for row in result] == [list(spec.classes)] * len(ROWS)
    assert np.abs(np.array([[p for _, p in row] for row in result]) - q).max() <= 1e-5
    classes = (out[:, 0] > 0.5).astype(int) if spec.kind == "binary" else out.argmax(axis=1)
    assert [s["class"] for s in scored] == classes.tolist()
    assert [s["label"] for s in scored] == [spec.classes[c] for c in classes]
    if spec.kind == "binary":  # rows on both sides of 0.5
        assert 0 < classes.sum() < len(classes)
