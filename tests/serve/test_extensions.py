"""The V2 extensions Triton's clients call (model configuration, repository index/load/unload,
statistics), each through tritonclient over HTTP and over gRPC, with the same answers."""

from __future__ import annotations

import time

import numpy as np
import pytest
import requests
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton_http
from google.protobuf import json_format
from tritonclient.utils import InferenceServerException

TRANSPORTS = ("http", "grpc")
ADMIN_KEY = "admin-key-0123456789"
ADMIN_VARIABLE = "NNSQL_TEST_ADMIN_KEY"
CONTROL = {"MODEL_CONTROL": "explicit", "ADMIN_KEY_ENV": ADMIN_VARIABLE}  # load and unload allowed


class Client:
    """tritonclient over one transport; documents come back as plain JSON (int64 as int) either way."""

    def __init__(self, live, transport: str, headers: dict | None = None, admin: bool = True) -> None:
        self.transport = transport
        self.headers = headers
        # loading and unloading carry the admin key, never the scoring key
        self.admin_headers = {"x-api-key": ADMIN_KEY} if admin else headers
        if transport == "http":
            self.client = triton_http.InferenceServerClient(live.url.removeprefix("http://"))
        else:
            self.client = triton_grpc.InferenceServerClient(live.grpc_url)

    def document(self, answer):
        if self.transport == "http":
            return answer
        return json_format.MessageToDict(
            answer, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
        )

    def config(self, name: str, version: str = "") -> dict:
        answer = self.client.get_model_config(name, version, headers=self.headers)
        return integers(self.document(answer if self.transport == "http" else answer.config))

    def index(self) -> list[dict]:
        answer = self.document(self.client.get_model_repository_index(headers=self.headers))
        return answer if self.transport == "http" else answer["models"]

    def statistics(self, name: str = "", version: str = "") -> list[dict]:
        answer = self.client.get_inference_statistics(name, version, headers=self.headers)
        unfilled = ("memory_usage", "response_stats")  # Triton's fields this server leaves empty
        stats = integers(self.document(answer))["model_stats"]
        return [{key: value for key, value in entry.items() if key not in unfilled} for entry in stats]

    def infer(self, name: str, rows: np.ndarray, input_name: str):
        module = triton_http if self.transport == "http" else triton_grpc
        tensor = module.InferInput(input_name, list(rows.shape), "FP32")
        tensor.set_data_from_numpy(rows)
        return self.client.infer(name, [tensor], headers=self.headers)

    def __getattr__(self, name: str):
        """The client's other calls (is_model_ready, load_model, ...), with this client's headers."""
        method = getattr(self.client, name)
        headers = self.admin_headers if name in ("load_model", "unload_model") else self.headers
        return method if name == "close" else lambda *args, **kw: method(*args, headers=headers, **kw)


# The 64-bit integer fields of these documents, which protobuf's JSON form writes as strings.
INT64_FIELDS = {"dims", "max_queue_delay_microseconds", "count", "ns", "last_inference"}
INT64_FIELDS |= {"inference_count", "execution_count"}


def integers(document, key: str = ""):
    """gRPC's JSON form writes int64 as strings: numbers again, so both transports compare equal."""
    if isinstance(document, dict):
        return {name: integers(value, name) for name, value in document.items()}
    if isinstance(document, list):
        return [integers(value, key) for value in document]
    return int(document) if key in INT64_FIELDS and isinstance(document, str) else document


@pytest.fixture(autouse=True)
def admin_key(monkeypatch):
    monkeypatch.setenv(ADMIN_VARIABLE, ADMIN_KEY)


@pytest.fixture(params=TRANSPORTS)
def client(request, serve_app):
    client = Client(serve_app(**CONTROL), request.param)
    yield client
    client.close()


def test_model_config_describes_tensors_batching_and_classes(client, serve_app):
    config = client.config("mnist")
    assert config["name"] == "mnist" and config["platform"] == "onnxruntime_onnx"
    assert config["max_batch_size"] == 1024  # MAX_REQUEST_ROWS: dims leave the batch dimension out
    assert [(i["name"], i["data_type"], i["dims"]) for i in config["input"]] == [
        ("features", "TYPE_FP32", [784])
    ]
    assert [(o["name"], o["data_type"], o["dims"]) for o in config["output"]] == [
        ("probabilities", "TYPE_FP32", [10])
    ]
    assert config["dynamic_batching"]["max_queue_delay_microseconds"] == 2000  # the fixture's 2 ms
    assert config["parameters"]["version"] == {"string_value": "1"}
    assert config["parameters"]["classes"]["string_value"].startswith('["class_0", ')
    assert client.config("mnist", "1") == config
    with pytest.raises(InferenceServerException, match="has no version '9'"):
        client.config("mnist", "9")


def test_index_unload_and_load_a_model(client):
    ready = {(m["name"], m["version"], m["state"]) for m in client.index()}
    assert ready == {("mixed", "1", "READY"), ("mnist", "1", "READY")}
    client.unload_model("mixed")
    assert not client.is_model_ready("mixed") and client.is_model_ready("mnist")
    unloaded = next(m for m in client.index() if m["name"] == "mixed")
    assert (unloaded["state"], unloaded["reason"]) == ("UNAVAILABLE", "unloaded")
    with pytest.raises(InferenceServerException, match="unknown model 'mixed'"):
        client.infer("mixed", np.zeros((1, 8, 8), dtype=np.float32), "image")
    client.load_model("mixed")
    assert client.is_model_ready("mixed")
    assert client.infer("mixed", np.zeros((1, 8, 8), dtype=np.float32), "image") is not None


def test_load_refuses_unknown_models_and_files_from_the_client(client):
    with pytest.raises(InferenceServerException, match="no model 'ghost' in the repository"):
        client.load_model("ghost")
    for name in ("ghost", "../mixed", ".", "mixed/1"):  # names are directory names, never paths
        with pytest.raises(InferenceServerException, match=r"no model|unknown model|404"):
            client.unload_model(name)
    assert client.is_model_ready("mixed")
    with pytest.raises(InferenceServerException, match="not supported: publish the model"):
        client.load_model("mnist", config='{"backend": "python"}', files={"file:1/model.py": b"import os"})
    assert client.is_model_ready("mnist")


def test_load_retries_a_broken_version_and_says_why_it_fails(client, serve_app, tmp_path, onnx_repo):
    import shutil

    repo = tmp_path / "repo"
    shutil.copytree(onnx_repo / "mnist", repo / "mnist")
    (repo / "broken" / "1").mkdir(parents=True)
    (repo / "broken" / "1" / "model.onnx").write_bytes(b"not onnx")
    (repo / "broken" / "1" / "metadata.json").write_text("{}")
    server = serve_app(REPO=str(repo), **CONTROL)
    other = Client(server, client.transport)
    broken = next(m for m in other.index() if m["name"] == "broken")
    assert broken["state"] == "UNAVAILABLE" and "cannot load broken version 1" in broken["reason"]
    with pytest.raises(InferenceServerException, match="failed to load 'broken': cannot load broken"):
        other.load_model("broken")
    other.close()


def test_unload_through_one_worker_holds_in_every_worker(serve_app, onnx_repo, tmp_path, monkeypatch):
    """Two app instances following one master's plan (serve/coordination.py) stand for two workers."""
    import threading

    import flask

    from nnsql.serve.coordination import Coordinator

    # The two apps are built in two threads (each waits for the plan); werkzeug compiles their routes
    # with ast.parse, which CPython 3.11 does not make safe in two threads at once ("AST constructor
    # recursion depth mismatch"). Real workers are processes: only this test needs the lock.
    lock, register = threading.Lock(), flask.Flask.register_blueprint

    def one_at_a_time(app: flask.Flask, *args, **kwargs):
        with lock:
            return register(app, *args, **kwargs)

    monkeypatch.setattr(flask.Flask, "register_blueprint", one_at_a_time)

    coordinator = Coordinator(onnx_repo, tmp_path / "run" / "repository", poll_seconds=60)
    coordinator.plan()
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(0.02):
            coordinator.tick([0, 1])

    master = threading.Thread(target=tick)
    master.start()
    try:
        shared = {"RUN_DIR": str(tmp_path / "run"), "POLL_SECONDS": 60}
        starting = [
            threading.Thread(target=lambda i=i: apps.append(serve_app(**shared, **CONTROL, WORKER_INDEX=i)))
            for i in (0, 1)
        ]
        apps: list = []
        for thread in starting:
            thread.start()
        for thread in starting:
            thread.join()
        first, second = sorted(apps, key=lambda app: app.app.config["WORKER_INDEX"])
        first_grpc, second_http = Client(first, "grpc"), Client(second, "http")
        first_grpc.unload_model("mnist")
        time.sleep(0.2)  # the other worker applies the commit within a watch interval (20 ms)
        assert not second_http.is_model_ready("mnist")
        assert requests.get(f"{second.url}/v2/models/mnist").status_code == 404
        second_http.load_model("mnist")
        time.sleep(0.2)
        assert first_grpc.is_model_ready("mnist")
        first_grpc.close()
        second_http.close()
    finally:
        stop.set()
        master.join()


def test_statistics_count_requests_rows_and_time_per_version(serve_app):
    server = serve_app()
    started_ms = time.time() * 1000
    for transport, rows in (("http", 3), ("grpc", 5), ("grpc", 1)):
        client = Client(server, transport)
        client.infer("mnist", np.random.default_rng(rows).random((rows, 784), dtype=np.float32), "features")
        client.close()
    bad = requests.post(f"{server.url}/v2/models/mnist/infer", json={"inputs": []})
    assert bad.status_code == 400  # refused before inference: not an inference
    answers = {}
    for transport in TRANSPORTS:
        client = Client(server, transport)
        answers[transport] = client.statistics("mnist")
        assert client.statistics() == [*client.statistics("mixed"), *answers[transport]]  # by name
        assert client.statistics("mnist", "1") == answers[transport]
        client.close()
    assert answers["http"] == answers["grpc"]
    (stats,) = answers["http"]
    assert (stats["name"], stats["version"]) == ("mnist", "1")
    assert stats["inference_count"] == 9  # rows
    success = stats["inference_stats"]["success"]
    assert success["count"] == 3 and success["ns"] > 0
    assert stats["inference_stats"]["fail"] == {"count": 0, "ns": 0}
    executions = stats["inference_stats"]["compute_infer"]
    assert 1 <= stats["execution_count"] == executions["count"] <= 3
    assert 0 < executions["ns"] < success["ns"]  # session.run is part of each request's time
    assert started_ms - 1 <= stats["last_inference"] <= time.time() * 1000 + 1
    unused = Client(server, "http").statistics("mixed")[0]
    assert unused["inference_count"] == 0 and unused["last_inference"] == 0


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_repository_and_statistics_need_the_api_key(serve_app, tmp_path, transport):
    keys = tmp_path / "keys"
    keys.write_text("s3cret-key\n")
    server = serve_app(API_KEY_FILE=str(keys), **CONTROL)
    anonymous = Client(server, transport, admin=False)
    for call in (
        anonymous.index,
        lambda: anonymous.unload_model("mnist"),
        lambda: anonymous.load_model("mnist"),
        anonymous.statistics,
        lambda: anonymous.config("mnist"),
    ):
        with pytest.raises(InferenceServerException, match=r"API key|admin key"):
            call()
    key = (
        {"authorization": "Bearer s3cret-key"}
        if transport == "grpc"
        else {"Authorization": "Bearer s3cret-key"}
    )
    trusted = Client(server, transport, headers=key)
    trusted.unload_model("mnist")
    assert not trusted.is_model_ready("mnist")
    trusted.load_model("mnist")
    assert trusted.config("mnist")["name"] == "mnist" and len(trusted.index()) == 2
    anonymous.close()
    trusted.close()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_model_control_is_off_unless_asked_and_needs_the_admin_key(serve_app, tmp_path, transport):
    """Load and unload needed only the scoring key, and were on by default: any key holder could take
    every model out of service."""
    keys = tmp_path / "keys"
    keys.write_text("s3cret-key\n")
    scoring = {"x-api-key": "s3cret-key"}
    default = Client(serve_app(API_KEY_FILE=str(keys)), transport, headers=scoring)
    for call in (lambda: default.unload_model("mnist"), lambda: default.load_model("mnist")):
        with pytest.raises(InferenceServerException, match="model control is off") as refused:
            call()
        assert "403" in str(refused.value.status()) or "PERMISSION_DENIED" in str(refused.value.status())
    assert default.is_model_ready("mnist")
    controlled = Client(serve_app(API_KEY_FILE=str(keys), **CONTROL), transport, headers=scoring, admin=False)
    for call in (lambda: controlled.unload_model("mnist"), lambda: controlled.load_model("mnist")):
        with pytest.raises(InferenceServerException, match="need the admin key"):
            call()  # the scoring key is not the admin key
    assert controlled.is_model_ready("mnist")
    default.close()
    controlled.close()


@pytest.mark.parametrize(
    "path", ["//v2/repository/models/mnist/unload", "/v2//repository/models/mnist/unload"]
)
def test_no_spelling_of_the_unload_path_skips_the_admin_key(serve_app, tmp_path, path):
    """A doubled slash slipped past the gate's check of the control route while Flask still routed the
    request to unload: the scoring key (or no key at all on an open server) took a model out of service."""
    import http.client

    keys = tmp_path / "keys"
    keys.write_text("s3cret-key\n")
    for config, headers in (({"API_KEY_FILE": str(keys)}, {"X-Api-Key": "s3cret-key"}), ({}, {})):
        server = serve_app(**config, **CONTROL)
        connection = http.client.HTTPConnection("127.0.0.1", int(server.url.rsplit(":", 1)[1]), timeout=10)
        connection.request("POST", path, body=b"{}", headers={"Content-Type": "application/json", **headers})
        answer = connection.getresponse()
        assert answer.status == 401, answer.read()
        connection.close()
        ready = requests.get(f"{server.url}/v2/models/mnist/ready", headers=headers, timeout=10)
        assert ready.status_code == 200


def test_the_repository_index_shows_no_paths_of_the_server(serve_app, onnx_repo, tmp_path):
    """A version that could not be read was listed with the reason the loader gave, which held the
    repository's absolute path on the server."""
    import shutil

    repo = tmp_path / "repo"
    shutil.copytree(onnx_repo / "mnist", repo / "mnist")
    for name, broken in (("unreadable", "directory"), ("garbled", "not json"), ("foreign", "other model")):
        version = repo / name / "1"
        shutil.copytree(onnx_repo / "mnist" / "1", version)
        metadata = version / "metadata.json"
        if broken == "directory":
            metadata.unlink()
            metadata.mkdir()
        elif broken == "not json":
            metadata.write_text("{")
        else:
            (version / "model.onnx").write_bytes(b"not the model the metadata describes")
    server = serve_app(REPO=str(repo))
    index = requests.post(f"{server.url}/v2/repository/index", json={}, timeout=10).json()
    reasons = {entry["name"]: entry["reason"] for entry in index if entry["state"] != "READY"}
    assert sorted(reasons) == ["foreign", "garbled", "unreadable"]
    assert all(reason and str(tmp_path) not in reason and "/" not in reason for reason in reasons.values())
