"""The lives of the server's processes (serve/master.py, serve/rundir.py): a killed master leaves no
run directory. Real `nnsql serve` processes, real signals, real HTTP."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
import requests

from tests.serve.conftest import ServeProcess


def wait_for(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out: {what}"
        time.sleep(0.1)


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def run_dirs(tmp: Path) -> list[Path]:
    return sorted(tmp.glob("nnsql-serve-*"))


@pytest.fixture
def own_tmp(tmp_path) -> Path:
    """A temporary directory of the test's own for the servers it starts (TMPDIR): their run
    directories are found there, and none of another server's is touched."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    return tmp


def start(repo: Path, tmp: Path, *args: str) -> ServeProcess:
    server = ServeProcess(repo, *args, env={"TMPDIR": str(tmp)})
    server.wait_ready()
    return server


def kill_all(server: ServeProcess) -> None:
    for pid in [server.process.pid, *server.worker_pids()]:
        os.kill(pid, signal.SIGKILL)
    server.process.wait(timeout=10)
    server.output.close()


def test_a_killed_master_leaves_no_run_directory(onnx_repo, own_tmp):
    """SIGKILL of the master (the OOM killer, kill -9) left /tmp/nnsql-serve-* behind for ever: the
    workers end on their own, and the last of them now removes it."""
    server = start(onnx_repo, own_tmp, "--workers", "2")
    workers = server.worker_pids()
    assert len(workers) == 2 and len(run_dirs(own_tmp)) == 1
    server.process.kill()
    server.process.wait(timeout=10)
    server.output.close()
    try:
        wait_for(lambda: not any(alive(pid) for pid in workers), 60, "the workers end")
        wait_for(lambda: not run_dirs(own_tmp), 10, "the run directory is removed")
    finally:
        for pid in workers:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_the_next_start_removes_run_directories_of_servers_that_ended(onnx_repo, own_tmp):
    """A server killed whole (master and workers at once) cannot clean up: the next server started
    removes its directory, and leaves alone the one of a server still running."""
    running = start(onnx_repo, own_tmp, "--workers", "1")
    killed = start(onnx_repo, own_tmp, "--workers", "1")
    try:
        assert len(run_dirs(own_tmp)) == 2
        kill_all(killed)
        assert len(run_dirs(own_tmp)) == 2
        held = run_dirs(own_tmp)
        later = start(onnx_repo, own_tmp, "--workers", "1")
        try:
            left = run_dirs(own_tmp)
            assert len(left) == 2 and len(set(left) & set(held)) == 1, (held, left)
            (gone,) = set(held) - set(left)
            assert f"removed {gone}: left by a server that was killed" in later.log()
            assert requests.get(f"{running.url}/v2/models/mnist", timeout=5).ok  # its directory is in use
        finally:
            later.stop()
    finally:
        running.stop()
    assert run_dirs(own_tmp) == []
