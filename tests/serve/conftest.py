"""Serve fixtures: a model repository written by the real exporter, and the app on a real HTTP port."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from werkzeug.serving import make_server

from export.onnx.__main__ import export as export_onnx
from serve.app import create_app
from serve.rpc.server import create_grpc_server


@pytest.fixture(scope="session")
def onnx_repo(tmp_path_factory, cern_mlp_path, mixed_layers_path) -> Path:
    repo = tmp_path_factory.mktemp("model_repository")
    export_onnx(cern_mlp_path, repo, "mnist", 200, 1e-5)
    export_onnx(mixed_layers_path, repo, "mixed", 200, 1e-5)
    return repo


class LiveServer:
    """The app on a free HTTP port (url) and its gRPC service on another (grpc_url)."""

    def __init__(self, app) -> None:
        self.app = app
        self.server = make_server("127.0.0.1", 0, app, threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.grpc_server, grpc_port = create_grpc_server(app, "127.0.0.1", 0, threads=4)
        self.grpc_server.start()
        self.grpc_url = f"127.0.0.1:{grpc_port}"

    def stop(self) -> None:
        self.grpc_server.stop(grace=None)
        self.server.shutdown()
        self.app.extensions["repository"].close()


@pytest.fixture
def serve_app(onnx_repo):
    """A started app factory; every app made is shut down after the test."""
    servers: list[LiveServer] = []

    def start(**config) -> LiveServer:
        settings = {"REPO": str(onnx_repo), "POLL_SECONDS": 0.2, "MAX_BATCH_DELAY_MS": 2.0} | config
        server = LiveServer(create_app(settings))
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def live(serve_app) -> LiveServer:
    return serve_app()


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class ServeProcess:
    """`python -m serve` as a user runs it, on a free port, stopped at the end of the test."""

    def __init__(self, repo: Path, *args: str) -> None:
        import subprocess
        import sys

        from tests.conftest import REPO

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "serve", "--repo", str(repo), "--port", str(self.port), *args]
        self.process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def wait_ready(self, seconds: float = 60) -> None:
        import time

        import requests

        deadline = time.monotonic() + seconds
        while True:
            try:
                if requests.get(f"{self.url}/v2/health/ready", timeout=1).ok:
                    return
            except requests.ConnectionError:
                pass
            assert self.process.poll() is None and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.2)

    def stop(self) -> str:
        self.process.terminate()
        output, _ = self.process.communicate(timeout=30)
        return output.decode(errors="replace")


@pytest.fixture
def serve_process(onnx_repo):
    started: list[ServeProcess] = []

    def start(*args: str) -> ServeProcess:
        server = ServeProcess(onnx_repo, *args)
        started.append(server)
        server.wait_ready()
        return server

    yield start
    for server in started:
        if server.process.poll() is None:
            server.stop()


def pytest_terminal_summary(terminalreporter) -> None:
    """Where the browser tests' screenshots are, for a person to look at (tests/serve/test_page.py)."""
    import sys

    page_tests = sys.modules.get("tests.serve.test_page")
    taken = getattr(page_tests, "TAKEN", [])
    if taken:
        terminalreporter.write_sep("-", f"{len(taken)} screenshots of the page")
        for path in taken:
            terminalreporter.write_line(str(path))
