"""The access log is written by a thread of its own; when its output stops taking lines (a pipe nobody
reads, a stalled disk) the entries waiting for it must stay bounded, whatever clients send: a flood of
requests with 60 KB paths used to grow a worker by the size of every path, without end."""

from __future__ import annotations

import http.client
import json
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests

from nnsql.serve import accesslog
from tests.conftest import REPO
from tests.fixtures import free_port
from tests.serve.conftest import ServeProcess, onnx_repo  # noqa: F401  (the fixture, used below)
from tests.serve.test_triton_repository import IRIS_CONFIG, softmax_model

pytestmark = pytest.mark.slow
REQUESTS = 600
PATH = "/" + "x" * 60_000  # within the 64 KiB of headers a request may send
GROWTH_MIB = 15  # 600 entries of about 1 KB: a few MiB, against 36 MiB of paths kept whole
ENTRIES = 30_000  # logged at once, with nothing written
WAITING = 10_001  # entries that may wait (and one the listener took): a few MiB


def resident_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS"))) / 1024


def drain(descriptor: int) -> threading.Thread:
    """Read and keep what the pipe holds until its writers close it, in a thread."""
    kept: list[bytes] = []

    def read() -> None:
        while chunk := os.read(descriptor, 1 << 16):
            kept.append(chunk)

    thread = threading.Thread(target=read, daemon=True)
    thread.kept = kept  # type: ignore[attr-defined]
    thread.start()
    return thread


def stop_draining(server: subprocess.Popen, reader: int) -> bytes:
    """Stop a server that writes into a pipe nobody read, reading the pipe meanwhile so that its last
    writes cannot block it; returns what the pipe held."""
    draining = drain(reader)
    server.terminate()
    server.wait(30)
    draining.join(10)
    os.close(reader)
    return b"".join(draining.kept)  # type: ignore[attr-defined]


def test_entries_stay_bounded_while_the_output_is_blocked():
    reader, writer = os.pipe()  # never read until the end: the listener's writes block once it is full
    os.set_blocking(writer, True)
    stream = os.fdopen(writer, "w")
    previous = accesslog.ACCESS_LOG.level
    accesslog.ACCESS_LOG.setLevel(logging.INFO)
    listener = accesslog.start(stream)
    try:
        for number in range(ENTRIES):
            accesslog.log(method="GET", path=f"/{number}", status=404)
        waiting = accesslog.waiting()
    finally:
        draining = drain(reader)
        accesslog.stop(listener)
        stream.close()
        draining.join(10)
        accesslog.ACCESS_LOG.setLevel(previous)
        os.close(reader)
    assert waiting <= WAITING  # the listener may hold one it took
    text = b"".join(draining.kept).decode()  # type: ignore[attr-defined]
    assert "entries dropped: its output did not keep up" in text


def served_repository(root: Path) -> Path:
    repo = root / "repository"
    (repo / "iris").mkdir(parents=True)
    (repo / "iris" / "config.pbtxt").write_text(IRIS_CONFIG)
    (repo / "iris" / "labels.txt").write_text("a\nb\nc\n")
    softmax_model(repo / "iris" / "1" / "model.onnx", 1, 3)
    return repo


def test_a_flood_of_long_paths_does_not_grow_a_worker_whose_log_is_blocked(tmp_path):
    port = free_port()
    server, reader = serving_into_a_pipe(tmp_path, port, workers=1)
    try:
        wait_ready(server, port)
        (worker,) = (
            int(pid) for pid in Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()
        )
        before = resident_mib(worker)
        client = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        for _ in range(REQUESTS):
            client.request("GET", PATH)
            answer = client.getresponse()
            answer.read()
        grown = resident_mib(worker) - before
        client.close()
        assert answer.status == 404
    finally:
        stop_draining(server, reader)
    assert grown < GROWTH_MIB, f"the worker grew by {grown:.0f} MiB"


def serving_into_a_pipe(root: Path, port: int, workers: int) -> tuple[subprocess.Popen, int]:
    """`nnsql serve` of the iris repository, its output and errors written into a pipe; returns the
    server and the pipe's reading end (the caller reads, or closes, it)."""
    reader, writer = os.pipe()
    command = [sys.executable, "-m", "nnsql.serve", "--repo", str(served_repository(root))]
    server = subprocess.Popen(
        [*command, "--port", str(port), "--workers", str(workers)], cwd=REPO, stdout=writer, stderr=writer
    )
    os.close(writer)
    return server, reader


def wait_ready(server: subprocess.Popen, port: int, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            if requests.get(f"http://127.0.0.1:{port}/v2/health/ready", timeout=1).ok:
                time.sleep(1)  # the worker's first lines written
                return
        except (requests.ConnectionError, requests.Timeout):
            pass
        assert server.poll() is None and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.2)


def test_a_model_directory_whose_name_is_not_utf8_is_ignored(tmp_path, onnx_repo):  # noqa: F811
    """A writer of the repository names a model directory with bytes that are not UTF-8: the model's
    name then held lone surrogates, which no client can send and orjson cannot write. The repository
    index and /metrics answered 500 for everyone, and one /score request ended the worker's access log
    writer. Such a directory is now ignored, said once; the other models serve and list as before."""
    shutil.copytree(onnx_repo / "mnist" / "1", tmp_path / "mnist" / "1")
    shutil.copytree(onnx_repo / "mnist" / "1", tmp_path / os.fsdecode(b"m\xff") / "1")
    server = ServeProcess(tmp_path, "--workers", "1", "--access-log")
    try:
        server.wait_ready()
        server.wait_for_workers(1)
        index = requests.post(f"{server.url}/v2/repository/index", timeout=10)
        score = requests.post(f"{server.url}/score", json={"features": [0.5] * 784}, timeout=30)
        metrics = requests.get(f"{server.url}/metrics", timeout=10)
        for n in range(3):
            requests.get(f"{server.url}/v2/health/live?after={n}", timeout=10)
    finally:
        output = server.stop()
    assert index.status_code == 200 and [m["name"] for m in index.json()] == ["mnist"], index.text
    assert metrics.status_code == 200 and "mnist" in metrics.text
    assert score.status_code == 200 and score.json()["model"] == "mnist", score.text
    assert "its name is not UTF-8" in output and "Traceback" not in output, output[-2000:]
    logged = [line for line in output.splitlines() if '"path":"/v2/health/live"' in line]
    assert len(logged) == 3, output[-2000:]


def test_requests_refused_on_their_headers_are_logged(tmp_path, onnx_repo):  # noqa: F811
    """The front end refuses a wrong key, a foreign Host or an oversized body before the app runs: those
    requests never reached the access log, so a client guessing keys on a keyed server left no trace."""
    keys = tmp_path / "keys"
    keys.write_text("right-key\n")
    server = ServeProcess(onnx_repo, "--workers", "1", "--access-log", "--api-key-file", str(keys))
    try:
        server.wait_ready()
        server.wait_for_workers(1)
        url = f"{server.url}/v2/models/mnist/infer"
        guesses = [
            requests.post(url, data=b"{}", headers={"Authorization": f"Bearer guess-{n}"}, timeout=10)
            for n in range(3)
        ]
        foreign = requests.get(f"{server.url}/v2/models/mnist", headers={"Host": "evil.example"}, timeout=10)
    finally:
        output = server.stop()
    assert [answer.status_code for answer in guesses] == [401] * 3 and foreign.status_code == 403
    entries = [json.loads(line.split("] ", 1)[1]) for line in output.splitlines() if '"status"' in line]
    refused = [(e["method"], e["path"], e["status"]) for e in entries if e["status"] in (401, 403)]
    assert refused == [("POST", "/v2/models/mnist/infer", 401)] * 3 + [("GET", "/v2/models/mnist", 403)], (
        output[-2000:]
    )
