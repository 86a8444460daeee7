"""A Triton model repository written by a hostile hand, served by `nnsql serve`: files that link out of
their model directory, a config nested thousands deep, FIFOs where files should be. Whoever writes the
repository decides which models are served, not what else the server reads or whether it keeps running."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from pathlib import Path

import pytest
import requests

from tests.serve.conftest import ServeProcess
from tests.serve.test_triton_repository import IRIS_CONFIG, softmax_model

pytestmark = pytest.mark.slow
SECRET = "nnsql-hostile-secret-4f1d"  # in the server's environment, as an API key would be
ROW = {"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [0.5, -1.0, 2.0, 0.25]}
TOP = {"outputs": [{"name": "probs", "parameters": {"classification": 3}}]}
SCAN_SECONDS = 15  # a few rescans (every 0.2 s) and a model load, on a loaded machine


def iris_model(repo: Path, name: str, labels: str | None = "a\nb\nc\n") -> Path:
    model_dir = repo / name
    model_dir.mkdir(parents=True)
    (model_dir / "config.pbtxt").write_text(IRIS_CONFIG.replace('"iris"', f'"{name}"'))
    if labels is not None:
        (model_dir / "labels.txt").write_text(labels)
    softmax_model(model_dir / "1" / "model.onnx", 1, 3)
    return model_dir


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile_triton")
    repo = root / "repository"
    iris_model(repo, "iris")
    (root / "secret.txt").write_text(f"{SECRET}\n")
    iris_model(repo, "outside", labels=None)
    (repo / "outside" / "labels.txt").symlink_to(root / "secret.txt")
    iris_model(repo, "environ", labels=None)
    (repo / "environ" / "labels.txt").symlink_to("/proc/self/environ")
    configmap = iris_model(repo, "configmap", labels=None)  # a Kubernetes ConfigMap volume's links
    (configmap / "..data").mkdir()
    (configmap / "..data" / "labels.txt").write_text("x\ny\nz\n")
    (configmap / "labels.txt").symlink_to("..data/labels.txt")
    long_name = iris_model(repo, "longname")  # a reason that would quote 100,000 characters
    (long_name / "config.pbtxt").write_text(f'name: "{"n" * 100_000}"\nplatform: "onnxruntime_onnx"\n')
    many_dims = iris_model(repo, "manydims")
    dims = ", ".join(["1"] * 20_000)
    (many_dims / "config.pbtxt").write_text(
        'platform: "onnxruntime_onnx"\nmax_batch_size: 8\n'
        f'input [ {{ name: "x" data_type: TYPE_FP32 dims: [ {dims} ] }} ]\n'
    )
    return repo


@pytest.fixture(scope="module")
def server(repo):
    with ServeProcess.running(repo, env={"NNSQL_TEST_KEY": SECRET}) as served:
        yield served


def infer(server: ServeProcess, model: str) -> requests.Response:
    return requests.post(f"{server.url}/v2/models/{model}/infer", json={"inputs": [ROW], **TOP}, timeout=10)


def index(server: ServeProcess) -> dict[str, dict]:
    entries = requests.post(f"{server.url}/v2/repository/index", json={}, timeout=10).json()
    return {entry["name"]: entry for entry in entries}


def wait_until_listed(server: ServeProcess, model: str, state: str) -> dict:
    deadline = time.monotonic() + SCAN_SECONDS
    while True:
        assert server.process.poll() is None, server.log()[-1500:]
        entry = index(server).get(model)
        if entry is not None and entry["state"] == state:
            return entry
        assert time.monotonic() < deadline, f"{model}: {entry}"
        time.sleep(0.2)


@pytest.mark.parametrize("model", ["outside", "environ"])
def test_a_label_file_linked_out_of_its_model_directory_is_never_shown(server, model):
    answer = infer(server, model)
    assert SECRET not in answer.text, answer.text[:300]
    assert answer.status_code == 404
    reason = index(server)[model]["reason"]
    assert "labels.txt: a link out of its directory" in reason and "\n" not in reason
    assert SECRET not in server.log()


def test_links_inside_the_model_directory_are_followed(server):
    answer = infer(server, "configmap")
    assert answer.status_code == 200, answer.text[:300]
    labels = sorted(text.rsplit(":", 1)[1] for text in answer.json()["outputs"][0]["data"])
    assert labels == ["x", "y", "z"]


def test_a_config_nested_thousands_deep_is_refused_and_the_others_keep_serving(server, repo):
    model_dir = iris_model(repo, "deep")
    (model_dir / "config.pbtxt").write_text('platform: "onnxruntime_onnx"\n' + "z { " * 3000 + "}" * 3000)
    try:
        entry = wait_until_listed(server, "deep", "UNAVAILABLE")
        assert entry["reason"] == "cannot serve deep: config.pbtxt: nested too deeply"
        assert infer(server, "iris").status_code == 200
        assert "Traceback" not in server.log()
    finally:
        shutil.rmtree(model_dir)


def test_fifos_in_the_repository_stall_no_scan(server, repo):
    """A FIFO opened for reading waits for a writer that never comes: as a label file, a model file or
    a model's `active` file it used to hold the loader (or the scan) for ever, so no later model was
    ever served."""
    fifo_labels = iris_model(repo, "fifolabels", labels=None)
    os.mkfifo(fifo_labels / "labels.txt")
    fifo_model = iris_model(repo, "fifomodel")
    (fifo_model / "1" / "model.onnx").unlink()
    os.mkfifo(fifo_model / "1" / "model.onnx")
    fifo_active = iris_model(repo, "fifoactive")
    os.mkfifo(fifo_active / "active")
    try:
        time.sleep(1)  # a few scans over the FIFOs before the next model appears
        iris_model(repo, "late")
        wait_until_listed(server, "late", "READY")
        assert infer(server, "late").status_code == 200
        assert infer(server, "fifoactive").status_code == 200  # an unreadable `active` chooses nothing
        for model in ("fifolabels", "fifomodel"):
            assert "not a regular file" in index(server)[model]["reason"]
    finally:
        for fifo in (fifo_labels / "labels.txt", fifo_model / "1" / "model.onnx", fifo_active / "active"):
            release(fifo)
        for name in ("fifolabels", "fifomodel", "fifoactive", "late"):
            shutil.rmtree(repo / name, ignore_errors=True)


def release(fifo: Path) -> None:
    """Let a reader stuck on the FIFO go (it reads an end of file), so the server can stop."""
    with contextlib.suppress(OSError):  # no reader waits on it
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


@pytest.mark.parametrize("model", ["longname", "manydims"])
def test_a_config_problem_is_said_in_a_short_line(server, model):
    """The repository index (any client may read it) and the log quote a bounded reason."""
    reason = index(server)[model]["reason"]
    assert reason.startswith("cannot ") and len(reason) <= 300, len(reason)
    assert max(len(line) for line in server.log().splitlines()) < 1000
