"""Malformed and oversized requests over real HTTP: each case below was a 500, a silent
misreading or hundreds of MB on the code before; now a one-line 4xx, or the documented answer."""

from __future__ import annotations

import json

import pytest
import requests

ROW = [0.5] * 784


def v2(*tensors: dict) -> dict:
    return {"inputs": list(tensors)}


def features(data=ROW, shape=(1, 784)) -> dict:
    return {"name": "features", "shape": list(shape), "datatype": "FP32", "data": data}


def one_line_error(answer: requests.Response, status: int) -> str:
    assert answer.status_code == status, answer.text
    message = answer.json()["error"]
    assert "\n" not in message and "Traceback" not in message
    return message


# 22.10: a 5,000-digit version number was a 500 with a traceback (int() refuses > 4,300 digits)
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("post", "/v2/models/mnist/versions/{v}/infer"),
        ("get", "/v2/models/mnist/versions/{v}"),
        ("get", "/v2/models/mnist/versions/{v}/ready"),
        ("get", "/v1/models/mnist/versions/{v}"),
        ("post", "/v1/models/mnist/versions/{v}:predict"),
    ],
)
def test_a_five_thousand_digit_version_is_404(live, method, path):
    answer = getattr(requests, method)(
        live.url + path.format(v="9" * 5000), json=v2(features()) if method == "post" else None, timeout=10
    )
    message = one_line_error(answer, 404)
    assert len(message) < 400


# 22.14: two inputs of one name were accepted, the last one winning
def test_two_v2_inputs_with_the_same_name_are_400(live):
    zeros, ones = features([0.0] * 784), features([1.0] * 784)
    answer = requests.post(f"{live.url}/v2/models/mnist/infer", json=v2(zeros, ones), timeout=10)
    assert "features" in one_line_error(answer, 400) and "twice" in answer.json()["error"]


# 22.14: TF Serving builds the tensor from the JSON nesting and the signature then refuses a shape that
# is not [batch, *input shape] (its REST API guide: each instance has the input's shape); we did reshape
# [[row]] (shape [1, 1, 784]) into [1, 784] silently.
@pytest.mark.parametrize(
    "body",
    [
        {"instances": [[ROW]]},
        {"inputs": [[ROW]]},
        {"instances": [{"features": [ROW]}]},
        {"inputs": {"features": [[ROW]]}},
    ],
)
def test_tf_serving_rows_of_the_wrong_nesting_are_400(live, body):
    answer = requests.post(f"{live.url}/v1/models/mnist:predict", json=body, timeout=10)
    message = one_line_error(answer, 400)
    assert "[1, 1, 784]" in message and "784" in message


def test_tf_serving_rows_of_the_right_nesting_still_score(live):
    for body in ({"instances": [ROW]}, {"inputs": [ROW, ROW]}, {"instances": [{"features": ROW}]}):
        answer = requests.post(f"{live.url}/v1/models/mnist:predict", json=body, timeout=10)
        assert answer.ok, answer.text


# 22.11: any web page could make a visitor's browser score (a POST needs no preflight without a JSON
# Content-Type), and any Host was served (DNS rebinding reads an unauthenticated loopback scorer)
def post_row(url: str, **headers: str) -> requests.Response:
    data = json.dumps(v2(features())).encode()
    return requests.post(f"{url}/v2/models/mnist/infer", data=data, headers=headers, timeout=10)


def test_a_foreign_origin_is_refused_and_the_own_page_is_served(live):
    port = live.url.rsplit(":", 1)[1]
    message = one_line_error(post_row(live.url, Origin="http://attacker.example"), 403)
    assert "--allowed-origins" in message
    assert one_line_error(post_row(live.url, Origin="null"), 403)
    assert post_row(live.url, Origin=f"http://127.0.0.1:{port}").ok  # the scorer's own page
    assert post_row(live.url).ok  # curl: no Origin, no Content-Type


def test_allowed_origins_are_served_with_cors_headers(serve_app):
    server = serve_app(ALLOWED_ORIGINS=["https://app.example"])
    answer = post_row(server.url, Origin="https://app.example")
    assert answer.ok and answer.headers["Access-Control-Allow-Origin"] == "https://app.example"
    preflight = requests.options(
        f"{server.url}/v2/models/mnist/infer",
        headers={"Origin": "https://app.example", "Access-Control-Request-Method": "POST"},
        timeout=10,
    )
    assert preflight.ok and "Authorization" in preflight.headers["Access-Control-Allow-Headers"]
    assert post_row(server.url, Origin="https://other.example").status_code == 403


@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:8000", "localhost.attacker.example"])
def test_a_host_that_is_not_this_server_is_refused(live, host):
    message = one_line_error(post_row(live.url, Host=host), 403)
    assert "--allowed-hosts" in message
    assert one_line_error(requests.get(f"{live.url}/v2/models/mnist", headers={"Host": host}), 403)


def test_allowed_hosts_and_local_names_are_served(serve_app):
    server = serve_app(ALLOWED_HOSTS=["scorer.internal", ".svc.cluster.local"])
    port = server.url.rsplit(":", 1)[1]
    for host in ("scorer.internal", "x.ns.svc.cluster.local", f"localhost:{port}", "[::1]", "10.0.0.7:80"):
        assert post_row(server.url, Host=host).ok, host
    assert post_row(server.url, Host="svc.cluster.local.attacker.example").status_code == 403


@pytest.mark.parametrize("content_type", [None, "application/x-www-form-urlencoded"])
def test_curl_posts_without_a_json_content_type_still_score(live, content_type):
    """`curl -d @body.json URL` sends application/x-www-form-urlencoded; TF Serving's guide does so."""
    headers = {"Content-Type": content_type} if content_type else {}
    for path, body in (
        ("/v1/models/mnist:predict", {"instances": [ROW]}),
        ("/v2/models/mnist/infer", v2(features())),
    ):
        answer = requests.post(live.url + path, data=json.dumps(body), headers=headers, timeout=10)
        assert answer.ok, (path, answer.text)


# 22.7: 19.3 MB of `{},` (within mnist's 19.3 MB body limit) cost ~570 MB per request as Python objects,
# 1.7 GB with four at once; now the values are counted before anything is parsed.
def empty_objects_body() -> bytes:
    head = b'{"inputs": [{"name": "features", "shape": [1, 784], "datatype": "FP32", "data": [0.5]}], "x": ['
    return head + b"{}," * 6_400_000 + b"{}]}"


def test_a_body_of_empty_objects_costs_no_memory(serve_process):
    import threading

    server = serve_process("--workers", "1")
    body = empty_objects_body()
    before = server.peak_memory_mib()
    statuses: list[int] = []

    def post() -> None:
        url = f"{server.url}/v2/models/mnist/infer"
        statuses.append(requests.post(url, data=body, timeout=60).status_code)

    threads = [threading.Thread(target=post) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert statuses == [413] * 4
    # the four bodies themselves (77 MB) are held in memory while read; their objects would be 1.7 GB
    assert server.peak_memory_mib() - before < 200


def test_the_largest_json_request_a_model_takes_is_scored_without_python_floats(serve_process):
    """1,024 rows of 784 values (the row limit) in V2 JSON: read by simdjson into numpy."""
    import numpy as np

    server = serve_process("--workers", "1")
    rows = np.random.default_rng(5).random((1024, 784), dtype=np.float32)
    body = json.dumps(v2(features(rows.ravel().tolist(), rows.shape))).encode()
    before = server.peak_memory_mib()
    answer = requests.post(f"{server.url}/v2/models/mnist/infer", data=body, timeout=60)
    assert answer.ok and answer.json()["outputs"][0]["shape"] == [1024, 10]
    assert server.peak_memory_mib() - before < 150  # 803k Python floats alone would be ~26 MB, lists more
