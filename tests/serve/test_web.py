"""/score, /metrics, /openapi.json, API keys and access logs (the page itself: test_page.py)."""

from __future__ import annotations

import json
import logging

import requests


def test_score_returns_class_label_and_probabilities(live):
    answer = requests.post(f"{live.url}/score?model=mnist", json={"features": [0.0] * 784}).json()
    assert set(answer) == {"model", "version", "kind", "class", "label", "probabilities", "classes"}
    assert len(answer["probabilities"]) == 10 and abs(sum(answer["probabilities"]) - 1) < 1e-5
    assert answer["label"] == answer["classes"][answer["class"]]
    bad = requests.post(f"{live.url}/score?model=mnist", json={"pixels": []})
    assert bad.status_code == 400 and "features" in bad.json()["error"]


def test_metrics_count_requests_and_batches(live):
    for _ in range(3):
        requests.post(f"{live.url}/score?model=mnist", json={"features": [0.1] * 784})
    requests.post(f"{live.url}/score?model=mnist", json={"features": [0.1] * 3})
    text = requests.get(f"{live.url}/metrics").text
    assert 'nnsql_requests_total{model="mnist",protocol="score",status="ok",version="1"} 3.0' in text
    assert (
        'nnsql_requests_total{model="mnist",protocol="score",status="error",version="1"}' not in text
    )  # rejected before
    assert "nnsql_request_seconds_bucket" in text and 'nnsql_batch_rows_count{model="mnist"}' in text
    assert 'nnsql_queue_depth{model="mnist/1"} 0.0' in text


def test_openapi_document_lists_the_routes(live):
    document = requests.get(f"{live.url}/openapi.json").json()
    assert document["openapi"].startswith("3.")
    assert {"/v2/models/{name}/infer", "/v1/models/{name}:predict", "/score"} <= set(document["paths"])


def test_api_key_guards_everything_but_health(serve_app, tmp_path):
    keys = tmp_path / "keys"
    keys.write_text("s3cret-key\n")
    server = serve_app(API_KEY_FILE=str(keys))
    body = {"features": [0.0] * 784}
    denied = requests.post(f"{server.url}/score?model=mnist", json=body)
    assert denied.status_code == 401 and denied.headers["WWW-Authenticate"] == "Bearer"
    assert (
        requests.post(
            f"{server.url}/score?model=mnist", json=body, headers={"X-API-Key": "wrong"}
        ).status_code
        == 401
    )
    assert requests.post(
        f"{server.url}/score?model=mnist", json=body, headers={"Authorization": "Bearer s3cret-key"}
    ).ok
    assert (
        requests.get(f"{server.url}/v2/health/ready").ok and requests.get(f"{server.url}/v2/health/live").ok
    )
    assert requests.get(f"{server.url}/metrics").status_code == 401


def test_access_log_is_structured_and_holds_no_payload(live, caplog):
    caplog.set_level(logging.INFO, logger="serve.access")
    requests.post(f"{live.url}/score?model=mnist", json={"features": [0.123456] * 784})
    entries = [json.loads(r.getMessage()) for r in caplog.records if r.name == "serve.access"]
    entry = entries[-1]
    assert entry["path"] == "/score" and entry["status"] == 200 and entry["model"] == "mnist"
    assert "0.123456" not in caplog.text


def test_score_refuses_to_guess_which_model_answers(live):
    """With several models loaded, /score without ?model= used to answer with whichever model sorted
    first (a regression's value for a classifier's row): now one line naming the query parameter."""
    row = {"features": [0.1] * 784}
    unnamed = requests.post(f"{live.url}/score", json=row)
    assert unnamed.status_code == 400
    assert "/score?model=NAME" in unnamed.json()["error"] and "mixed" in unnamed.json()["error"]
    in_body = requests.post(f"{live.url}/score?model=mnist", json={**row, "model": "mixed"})
    assert in_body.status_code == 400 and "in the query" in in_body.json()["error"]
    assert requests.post(f"{live.url}/score?model=mnist", json=row).status_code == 200


def test_score_takes_the_only_model_without_a_name(serve_app, tmp_path, onnx_repo):
    import shutil

    repo = tmp_path / "one"
    shutil.copytree(onnx_repo / "mnist", repo / "mnist")
    server = serve_app(REPO=str(repo))
    answer = requests.post(f"{server.url}/score", json={"features": [0.1] * 784})
    assert answer.status_code == 200 and answer.json()["model"] == "mnist"
