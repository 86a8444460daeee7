"""Serve fixtures: a model repository written by the real exporter, and the app on a real HTTP port."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from werkzeug.serving import make_server

from export.onnx.__main__ import export as export_onnx
from serve.app import create_app


@pytest.fixture(scope="session")
def onnx_repo(tmp_path_factory, cern_mlp_path, mixed_layers_path) -> Path:
    repo = tmp_path_factory.mktemp("model_repository")
    export_onnx(cern_mlp_path, repo, "mnist", 200, 1e-5)
    export_onnx(mixed_layers_path, repo, "mixed", 200, 1e-5)
    return repo


class LiveServer:
    def __init__(self, app) -> None:
        self.app = app
        self.server = make_server("127.0.0.1", 0, app, threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
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
