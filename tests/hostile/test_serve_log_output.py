"""`nnsql serve` whose log output goes away (the collector reading its pipe stops, a disk fills): the
workers keep answering, and a worker that dies is still replaced. The master used to die on its next
line (`worker 0 ended ...; starting another`) with BrokenPipeError, and took every worker with it."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import requests

from tests.fixtures import free_port
from tests.hostile.test_serve_accesslog import serving_into_a_pipe, wait_ready

pytestmark = pytest.mark.slow
BODY = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1.0, 2.0, 3.0, 4.0]}]}
RESTART_SECONDS = 40  # a new worker imports onnxruntime and loads the model, on a loaded machine


def workers(master: int) -> set[int]:
    return {int(pid) for pid in Path(f"/proc/{master}/task/{master}/children").read_text().split()}


def answered(port: int) -> bool:
    try:
        return requests.post(f"http://127.0.0.1:{port}/v2/models/iris/infer", json=BODY, timeout=5).ok
    except requests.RequestException:
        return False


def replaced(server: subprocess.Popen, gone: int) -> int:
    """The worker the master started in place of `gone`."""
    deadline = time.monotonic() + RESTART_SECONDS
    while True:
        assert server.poll() is None, "the master ended"
        fresh = workers(server.pid) - {gone}
        if len(fresh) == 2:
            return max(fresh)
        assert time.monotonic() < deadline, "no worker was started in place of the one that died"
        time.sleep(0.2)


def test_a_closed_log_pipe_stops_neither_serving_nor_restarts(tmp_path):
    port = free_port()
    server, reader = serving_into_a_pipe(tmp_path, port, workers=2)
    try:
        wait_ready(server, port)
        os.close(reader)  # the log's reader goes away: every later write fails with EPIPE
        reader = -1
        assert all(answered(port) for _ in range(20))
        first, second = sorted(workers(server.pid))
        os.kill(first, signal.SIGKILL)
        replaced(server, first)
        os.kill(second, signal.SIGKILL)  # only the new worker (and the second one's successor) left
        deadline = time.monotonic() + RESTART_SECONDS
        while not answered(port):
            assert server.poll() is None and time.monotonic() < deadline, "nothing answers"
            time.sleep(0.2)
    finally:
        if reader >= 0:
            os.close(reader)
        server.terminate()
        server.wait(30)


def fill(pid: int) -> None:
    """Fill the pipe the process writes its errors into, as a reader that stopped reading leaves it. A
    description of the pipe of our own (opened anew) is non-blocking without touching the server's."""
    descriptor = os.open(f"/proc/{pid}/fd/2", os.O_WRONLY | os.O_NONBLOCK)
    try:
        while True:
            os.write(descriptor, b"#" * 4096)
    except BlockingIOError:
        pass
    finally:
        os.close(descriptor)


def test_a_log_pipe_nobody_reads_stalls_neither_restarts_nor_a_new_worker(tmp_path):
    """The master used to block in its next line (`worker 0 ended ...`), and a new worker in its first
    log record: nothing was restarted, and once the other worker died too nothing answered."""
    port = free_port()
    server, reader = serving_into_a_pipe(tmp_path, port, workers=2)
    try:
        wait_ready(server, port)
        fill(server.pid)
        first, second = sorted(workers(server.pid))
        os.kill(first, signal.SIGKILL)
        replaced(server, first)
        os.kill(second, signal.SIGKILL)
        deadline = time.monotonic() + RESTART_SECONDS
        while not answered(port):
            assert server.poll() is None and time.monotonic() < deadline, "nothing answers"
            time.sleep(0.2)
    finally:
        os.close(reader)  # the log's reader goes away: every blocked write ends (EPIPE)
        server.terminate()
        server.wait(30)
