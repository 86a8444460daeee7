"""Serve fixtures: a model repository written by the real exporter, and the app on a real HTTP port."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from werkzeug.serving import make_server

from nnsql.export.onnx.__main__ import export as export_onnx
from nnsql.serve.app import create_app
from nnsql.serve.rpc.server import create_grpc_server
from tests.fixtures import free_port


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


class ServeProcess:
    """`nnsql serve` as a user runs it, on a free port, stopped at the end of the test."""

    def __init__(self, repo: Path, *args: str, env: dict[str, str] | None = None) -> None:
        import os
        import subprocess
        import sys
        import tempfile

        from tests.conftest import REPO

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "nnsql.serve", "--repo", str(repo), "--port", str(self.port), *args]
        # a file, not a pipe: a full pipe would block the server; closed by stop()
        self.output = tempfile.TemporaryFile()  # noqa: SIM115
        self.process = subprocess.Popen(
            command, cwd=REPO, stdout=self.output, stderr=subprocess.STDOUT, env=os.environ | (env or {})
        )

    @classmethod
    @contextlib.contextmanager
    def running(cls, repo: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[ServeProcess]:
        """One worker (`--workers 1`, models polled every 0.2 s) serving `repo`, stopped at the end."""
        served = cls(repo, "--workers", "1", "--poll-seconds", "0.2", *args, env=env)
        try:
            served.wait_ready()
            served.wait_for_workers(1)
            yield served
        finally:
            served.stop()

    def wait_ready(self, seconds: float = 60) -> None:
        import time

        import requests

        deadline = time.monotonic() + seconds
        while True:
            try:
                if requests.get(f"{self.url}/v2/health/ready", timeout=1).ok:
                    return
            except (requests.ConnectionError, requests.Timeout):  # bound, workers still starting
                pass
            code = self.process.poll()
            assert code is None and time.monotonic() < deadline, (
                f"the server did not start in {seconds:.0f} s (exit status {code}): {self.log()[-2000:]}"
            )
            time.sleep(0.2)

    def log(self) -> str:
        """What the server printed so far."""
        self.output.seek(0)
        return self.output.read().decode(errors="replace")

    def wait_for_workers(self, count: int, seconds: float = 60) -> None:
        """Until `count` workers said they loaded their models and serve: each one's heartbeat in the run
        directory says it is ready once its HTTP (and gRPC) servers listen (serve/liveness.py)."""
        import time

        deadline = time.monotonic() + seconds
        while not (
            all(f"[worker {i}] loaded" in self.log() for i in range(count)) and self.serving() >= count
        ):
            assert self.process.poll() is None and time.monotonic() < deadline, self.log()[-2000:]
            time.sleep(0.05)

    def serving(self) -> int:
        """How many of the server's workers say, in their heartbeat, that they serve."""
        from nnsql.serve.liveness import beat_path, read_beat

        ready = 0
        for pid in self.worker_pids():
            run_dir = worker_run_dir(pid)
            beat = read_beat(beat_path(run_dir, pid)) if run_dir else None
            ready += bool(beat and beat[1])
        return ready

    def worker_pids(self) -> list[int]:
        """The worker processes the server started (none when it serves in one process)."""
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        return [int(pid) for pid in children.read_text().split()] if children.exists() else []

    def peak_memory_mib(self) -> float:
        """Peak resident memory (VmHWM) summed over the server's processes."""
        total = 0
        for pid in [self.process.pid, *self.worker_pids()]:
            status = Path(f"/proc/{pid}/status").read_text()
            total += int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM")))
        return total / 1024

    def stop(self) -> str:
        self.process.terminate()
        self.process.wait(timeout=30)
        self.output.seek(0)
        text = self.output.read().decode(errors="replace")
        self.output.close()
        return text


def worker_run_dir(pid: int) -> Path | None:
    """The run directory of the worker `pid`, from the settings its master gave it in its environment
    (None once it has ended)."""
    import json

    from nnsql.serve.worker import ENVIRONMENT

    try:
        environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    prefix = f"{ENVIRONMENT}=".encode()
    settings = next((item[len(prefix) :] for item in environment if item.startswith(prefix)), None)
    return Path(json.loads(settings)["app"]["RUN_DIR"]) if settings else None


@pytest.fixture
def serve_process(onnx_repo):
    started: list[ServeProcess] = []

    def start(*args: str, env: dict[str, str] | None = None) -> ServeProcess:
        server = ServeProcess(onnx_repo, *args, env=env)
        started.append(server)
        server.wait_ready()
        return server

    yield start
    for server in started:
        if server.process.poll() is None:
            server.stop()
