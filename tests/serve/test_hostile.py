"""What a hostile test run broke in the scorer, over real HTTP: every request below got a 500 (with a
traceback in the log), hung, or cost hundreds of MB; each must now be a one-line 4xx, at once."""

from __future__ import annotations

import json
import logging
import shutil
import struct
import threading
import time

import numpy as np
import pytest
import requests

from tests.fixtures import wait_for

HEADER = "Inference-Header-Content-Length"
ROW = [0.5] * 784


def v2(data, shape=(1, 784), datatype="FP32", **extra) -> dict:
    tensor = {"name": "features", "shape": list(shape), "datatype": datatype, "data": data}
    return {"inputs": [tensor | extra.pop("tensor", {})], **extra}


def binary_request(raw: bytes, size) -> tuple[bytes, dict]:
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "features",
                    "shape": [1, 784],
                    "datatype": "FP32",
                    "parameters": {"binary_data_size": size},
                }
            ]
        }
    ).encode()
    return header + raw, {HEADER: str(len(header)), "Content-Type": "application/octet-stream"}


def nested(depth: int) -> bytes:
    return b'{"inputs": [{"name": "features", "shape": [1, 784], "datatype": "FP32", "data": ' + (
        b"[" * depth + b"]" * depth + b"}]}"
    )


JSON_CASES = {
    "huge shape": v2(ROW, shape=(1 + 2**60, 784)),
    "boolean in shape": v2(ROW, shape=(True, 784)),
    "integer beyond float": json.loads(json.dumps(v2(ROW)).replace("0.5", str(10**400), 1)),
    "parameters not an object (request)": v2(ROW, parameters="x"),
    "parameters not an object (input)": v2(ROW, tensor={"parameters": "x"}),
    "parameters not an object (output)": v2(ROW, outputs=[{"name": "probabilities", "parameters": "x"}]),
    "strings as numbers": v2(["0.5"] * 784),
    "booleans as numbers": v2([True] * 784),
    "name not a string": v2(ROW, tensor={"name": ["features"]}),
}


@pytest.mark.parametrize("case", sorted(JSON_CASES))
def test_malformed_json_requests_are_400(live, case):
    answer = requests.post(f"{live.url}/v2/models/mnist/infer", json=JSON_CASES[case], timeout=10)
    assert answer.status_code == 400, answer.text
    assert list(answer.json()) == ["error"] and "\n" not in answer.json()["error"]


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (json.dumps({"inputs": []}).encode("utf-16"), "the body is not UTF-8"),
        (b'{"inputs": [{"name": "\\ud800", "shape": [1, 784]}]}', "the body is not valid JSON"),
    ],
)
def test_bodies_that_are_not_utf8_json_say_so(live, body, said):
    """Both were explained as 'a number out of range (beyond 64-bit integers or doubles)': Python's own
    parser, asked for the reason, reads UTF-16 and lone surrogates without complaint."""
    for route in ("/v2/models/mnist/infer", "/v1/models/mnist:predict"):
        answer = requests.post(
            f"{live.url}{route}", data=body, headers={"Content-Type": "application/json"}, timeout=10
        )
        assert answer.status_code == 400
        assert answer.json()["error"].startswith(said), answer.text


def test_deep_nesting_is_400(live):
    answer = requests.post(
        f"{live.url}/v2/models/mnist/infer",
        data=nested(5000),
        headers={"Content-Type": "application/json"},
        timeout=10,
    )
    assert answer.status_code == 400


@pytest.mark.parametrize(
    ("raw", "size", "header", "message"),
    [
        (b"\0" * 3135, 3135, None, "multiple of 4"),
        (b"\0" * 3136, True, None, "non-negative integer"),
        (b"\0" * 3136 + b"extra", 3136, None, "bytes of binary data follow"),
        (b"\0" * 3136, 3136, "²", HEADER),
    ],
)
def test_malformed_binary_requests_are_400(live, raw, size, header, message):
    body, headers = binary_request(raw, size)
    if header is not None:
        headers[HEADER] = header
    answer = requests.post(f"{live.url}/v2/models/mnist/infer", data=body, headers=headers, timeout=10)
    assert answer.status_code == 400 and message in answer.json()["error"]


def test_a_version_that_is_not_a_plain_number_is_404(live):
    answer = requests.post(f"{live.url}/v2/models/mnist/versions/%C2%B2/infer", json=v2(ROW), timeout=10)
    assert answer.status_code == 404


def test_echoed_client_text_is_capped(live):
    answer = requests.post(
        f"{live.url}/v2/models/mnist/infer", json=v2(ROW, datatype="X" * 5_000_000), timeout=30
    )
    assert answer.status_code == 400 and len(answer.content) < 1000


def test_a_body_of_empty_lists_is_refused_before_it_is_parsed(live):
    body = b'{"inputs": [{"name": "features", "shape": [1, 784], "datatype": "FP32", "data": [' + (
        b"[]," * 2_000_000 + b"[]]}]}"
    )
    started = time.perf_counter()
    answer = requests.post(
        f"{live.url}/v2/models/mnist/infer",
        data=body,
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    assert answer.status_code == 413 and "JSON values" in answer.json()["error"]
    assert time.perf_counter() - started < 10  # refused from a byte count, not after building 2M lists


@pytest.mark.parametrize("key", ["ключ", "\x00\x01"])
def test_undecodable_api_keys_are_401(serve_app, tmp_path, key):
    keys = tmp_path / "keys"
    keys.write_text("s3cret\n")
    server = serve_app(API_KEY_FILE=str(keys))
    headers = {"X-API-Key": key.encode("utf-8").decode("latin-1")}
    answer = requests.post(f"{server.url}/score?model=mnist", json={"features": ROW}, headers=headers)
    assert answer.status_code == 401


@pytest.mark.parametrize("content", [b"", b"\xff\xfe key\n", b"two words\n"])
def test_a_bad_key_file_stops_start_up_with_one_line(tmp_path, content):
    import subprocess
    import sys

    from tests.conftest import REPO

    keys = tmp_path / "keys"
    keys.write_bytes(content)
    (tmp_path / "repo").mkdir()
    command = [
        sys.executable,
        "-m",
        "nnsql.serve",
        "--repo",
        str(tmp_path / "repo"),
        "--api-key-file",
        str(keys),
    ]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith("error: API key file")


def copy_version(onnx_repo, target, version: int) -> None:
    shutil.copytree(onnx_repo / "mnist" / "1", target / "mnist" / str(version))


@pytest.fixture
def own_repo(onnx_repo, tmp_path):
    repo = tmp_path / "repo"
    copy_version(onnx_repo, repo, 1)
    return repo


@pytest.mark.parametrize("metadata", ["{}", "[1]", "WRONG_SHAPE"])
def test_a_wrong_metadata_file_never_serves(serve_app, onnx_repo, own_repo, metadata):
    server = serve_app(REPO=str(own_repo))
    copy_version(onnx_repo, own_repo, 2)
    path = own_repo / "mnist" / "2" / "metadata.json"
    if metadata == "WRONG_SHAPE":
        document = json.loads(path.read_text())
        document["inputs"][0]["shape"] = [-1, 100]
        metadata = json.dumps(document)
    path.write_text(metadata)
    time.sleep(1.0)  # several scans
    answer = requests.post(f"{server.url}/v2/models/mnist/infer", json=v2(ROW), timeout=10)
    assert answer.ok and answer.json()["model_version"] == "1"


def test_odd_directory_names_are_ignored_and_logged_once(serve_app, own_repo, caplog):
    caplog.set_level(logging.INFO, logger="nnsql.serve.repository")
    (own_repo / "mnist" / "²").mkdir()
    (own_repo / "mnist" / "3").mkdir()
    (own_repo / "mnist" / "3" / "metadata.json").write_text("{}")
    (own_repo / "mnist" / "3" / "model.onnx").write_bytes(b"not onnx")
    server = serve_app(REPO=str(own_repo), POLL_SECONDS=0.05)
    time.sleep(1.0)  # twenty scans
    assert requests.post(f"{server.url}/v2/models/mnist/infer", json=v2(ROW), timeout=10).ok
    messages = [record.getMessage() for record in caplog.records]
    assert sum("not a version number" in m for m in messages) == 1
    assert sum("cannot load mnist version 3" in m for m in messages) == 1


def test_removing_a_version_under_load_answers_at_once(serve_app, onnx_repo, own_repo):
    copy_version(onnx_repo, own_repo, 2)
    server = serve_app(REPO=str(own_repo), POLL_SECONDS=0.05, MAX_BATCH_DELAY_MS=20.0)
    wait_for(lambda: requests.get(f"{server.url}/v2/models/mnist").json()["versions"] == ["1", "2"])
    statuses: list[tuple[int, float]] = []

    def client() -> None:
        for _ in range(30):
            started = time.perf_counter()
            url = f"{server.url}/v2/models/mnist/versions/2/infer"
            status = requests.post(url, json=v2(ROW), timeout=60).status_code
            statuses.append((status, time.perf_counter() - started))

    threads = [threading.Thread(target=client) for _ in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(0.2)
    shutil.rmtree(own_repo / "mnist" / "2")
    for thread in threads:
        thread.join()
    assert {status for status, _ in statuses} <= {200, 404} and 404 in {s for s, _ in statuses}
    assert max(seconds for _, seconds in statuses) < 5  # nobody waits for a removed version's batcher


def test_stale_queue_depth_series_leave_metrics(serve_app, onnx_repo, own_repo):
    shutil.copytree(onnx_repo / "mixed", own_repo / "mixed")
    server = serve_app(REPO=str(own_repo), POLL_SECONDS=0.05)
    assert 'nnsql_queue_depth{model="mixed' in requests.get(f"{server.url}/metrics").text
    shutil.rmtree(own_repo / "mixed")
    wait_for(lambda: requests.get(f"{server.url}/v2/models/mixed").status_code == 404)
    assert 'nnsql_queue_depth{model="mixed' not in requests.get(f"{server.url}/metrics").text


def test_binary_packing_helper_matches_the_wire_format():
    """The binary cases above are only as good as their packing: check it against struct."""
    body, headers = binary_request(struct.pack("<2f", 1.0, 2.0), 8)
    assert body.endswith(struct.pack("<2f", 1.0, 2.0)) and int(headers[HEADER]) == len(body) - 8
    assert np.frombuffer(body[int(headers[HEADER]) :], "<f4").tolist() == [1.0, 2.0]
