"""`python -m serve` as a user runs it: gunicorn workers on a real port."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import requests

from tests.conftest import REPO


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_gunicorn_server_scores(onnx_repo):
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "serve", "--repo", str(onnx_repo), "--port", str(port), "--workers", "2"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(f"http://127.0.0.1:{port}/v2/health/ready", timeout=1).ok:
                    break
            except requests.ConnectionError:
                pass
            assert process.poll() is None and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.2)
        answer = requests.post(f"http://127.0.0.1:{port}/score?model=mnist", json={"features": [0.5] * 784})
        assert answer.ok and len(answer.json()["probabilities"]) == 10
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_missing_repository_is_one_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "serve", "--repo", str(tmp_path / "none")],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and result.stderr.strip().startswith("error: model repository")
