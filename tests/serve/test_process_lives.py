"""The lives of the server's processes (serve/master.py, serve/rundir.py, serve/liveness.py): a killed
master leaves no run directory, a stopped worker is replaced, workers that die after they were ready
are started again. Real `nnsql serve` processes, real signals, real HTTP."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
import requests

from tests.fixtures import wait_for
from tests.serve.conftest import ServeProcess


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
        wait_for(lambda: not any(alive(pid) for pid in workers), 60, what="the workers end")
        wait_for(lambda: not run_dirs(own_tmp), 10, what="the run directory is removed")
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


def served_versions(server: ServeProcess) -> list[str]:
    """The versions of mnist the server lists, on a new connection each time (any live worker). A
    connection the kernel hands to a stopped worker (the port is shared) hangs until that worker is
    replaced: that request lists nothing, and the wait around it asks again."""
    try:
        answer = requests.get(f"{server.url}/v2/models/mnist", headers={"Connection": "close"}, timeout=5)
    except requests.RequestException:
        return []
    return answer.json()["versions"]


def test_a_stopped_worker_is_replaced_and_holds_back_no_new_version(onnx_repo, own_tmp, tmp_path):
    """A worker that stops answering (SIGSTOP here; a hang likewise) held back every new version,
    load and unload: the master waited for its acknowledgement for ever, and repository requests
    got 503 after 60 s. It is now killed once silent for --worker-timeout, and another is started."""
    import shutil

    repo = tmp_path / "repo"
    shutil.copytree(onnx_repo / "mnist", repo / "mnist")
    server = start(repo, own_tmp, "--workers", "2", "--worker-timeout", "3", "--poll-seconds", "0.2")
    stopped = None
    try:
        server.wait_for_workers(2)
        stopped = server.worker_pids()[1]
        os.kill(stopped, signal.SIGSTOP)
        shutil.copytree(repo / "mnist" / "1", repo / "mnist" / "2")
        wait_for(lambda: served_versions(server) == ["1", "2"], 60, what="version 2 is served")
        assert not alive(stopped)
        assert f"(pid {stopped}) has not answered for" in server.log()
        assert len(server.worker_pids()) == 2 and stopped not in server.worker_pids()
        wait_for(lambda: all(served_versions(server) == ["1", "2"] for _ in range(6)), 30, what="by both")
    finally:
        if stopped is not None and alive(stopped):
            os.kill(stopped, signal.SIGKILL)
        server.stop()
    assert not run_dirs(own_tmp)


def test_workers_that_die_after_serving_are_started_again_with_a_back_off(onnx_repo, own_tmp):
    """Three quick worker deaths in a row, from any cause, stopped the whole server: a client that
    could crash a worker on demand could stop it. Deaths after a worker served are now restarts with
    a growing pause; only failures at start count towards giving up."""
    server = start(onnx_repo, own_tmp, "--workers", "1")
    try:
        killed: list[int] = []
        for _ in range(4):
            wait_for(lambda: set(server.worker_pids()) - set(killed), 30, what="another worker runs")
            server.wait_ready()
            (pid,) = server.worker_pids()
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        wait_for(lambda: set(server.worker_pids()) - set(killed), 30, what="another worker runs")
        server.wait_ready()
        assert server.process.poll() is None
        log = server.log()
        assert "starting another in 1 s" in log and "starting another in 2 s" in log, log[-2000:]
    finally:
        if server.process.poll() is None:
            server.stop()


def test_workers_that_fail_at_start_still_stop_the_server(onnx_repo, own_tmp, tmp_path):
    """A worker that cannot start (an import error here) would fail for ever: the server says so
    and stops, as before."""
    import subprocess
    import sys

    from tests.conftest import REPO

    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "uvloop.py").write_text("raise ImportError('uvloop is broken on purpose')\n")
    server = subprocess.run(
        [sys.executable, "-m", "nnsql.serve", "--repo", str(onnx_repo), "--port", "0", "--workers", "1"],
        cwd=REPO,
        env=os.environ | {"TMPDIR": str(own_tmp), "PYTHONPATH": str(shadow)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert server.returncode == 1
    assert "uvloop is broken on purpose" in server.stderr
    assert "error: worker 0 failed at start 3 times in a row" in server.stderr
    assert not run_dirs(own_tmp)


def test_the_watch_tells_a_busy_process_from_a_stopped_or_idle_one__control_loop(tmp_path):
    """The master's judgement of a silent worker (serve/liveness.py) against real processes: one that
    beats is fine; one silent but using CPU (a model parsed while Python's lock is held) is busy and
    left be; one stopped, or silent and idle (hung), is unresponsive."""
    import subprocess
    import sys

    from nnsql.serve.liveness import Watch, beat_path

    (tmp_path / "workers").mkdir()
    beating = (
        "import os, sys, time; from nnsql.serve.liveness import Heartbeat; "
        f"Heartbeat(__import__('pathlib').Path({str(tmp_path)!r}), os.getppid(), sys.exit).start(); "
        "time.sleep(60)"
    )
    programs = {
        "beating": beating,
        "spinning": "while True: pass",
        "sleeping": "import time; time.sleep(60)",
        "stopped": "while True: pass",
    }
    processes = {name: subprocess.Popen([sys.executable, "-c", code]) for name, code in programs.items()}
    try:
        watches = {name: Watch(p.pid, beat_path(tmp_path, p.pid)) for name, p in processes.items()}
        os.kill(processes["stopped"].pid, signal.SIGSTOP)
        deadline = time.monotonic() + 30
        silent = dict.fromkeys(("sleeping", "stopped"), "unresponsive")
        expected = {"beating": "ok", "spinning": "busy"} | silent
        while True:
            time.sleep(0.5)
            verdicts = {name: watch.verdict(timeout=1.0) for name, watch in watches.items()}
            if verdicts == expected or time.monotonic() > deadline:
                break
        assert verdicts == expected
    finally:
        for process in processes.values():
            process.kill()
            process.wait()


def environment_of(pid: int) -> dict[str, str]:
    pairs = (entry.split("=", 1) for entry in Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0"))
    return {pair[0]: pair[1] for pair in pairs if len(pair) == 2}


@pytest.mark.parametrize(("given", "expected"), [(None, "2"), ("8", "8")])
def test_workers_keep_two_malloc_arenas_unless_told_otherwise(serve_process, given, expected):
    """A keyless reconnecting gRPC flood grew a worker with glibc's default arenas (one per thread that
    allocates, up to 8 per core) to 550 MiB and rising; with two it stayed flat (docs/security.md).
    A setting of the user's is kept."""
    server = serve_process("--workers", "1", env={"MALLOC_ARENA_MAX": given} if given else None)
    server.wait_for_workers(1)
    (worker,) = server.worker_pids()
    assert environment_of(worker).get("MALLOC_ARENA_MAX") == expected
