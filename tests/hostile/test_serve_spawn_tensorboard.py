"""`nnsql spawn tensorboard RUN` in a runs/ folder another member of the group may write. TensorBoard
reads, as the user who starts it, whatever the run's log directory holds or names, and serves it on its
port to every local user. Found by the fourth hostile pass of issue 32: the run's folder was checked to
be a directory of runs/ itself, but not whose it was, nor what lay under it:
- a `model` planted as a link to another directory of the user's (another project's logs) was served;
- a run folder of another user's was served whatever it held: its event files linked from elsewhere, a
  projector configuration naming a checkpoint of the user's (TensorBoard reads it as the user).
Now the run's folder and the directories down to its logs must be this user's own, never links.
Each command runs in a child process with a bound; one that starts TensorBoard is stopped through the
command itself (SIGTERM, which it passes on to TensorBoard's process group), never left behind.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO

BOUND = 60  # seconds: the refusal reads a few small files; Python's start-up is most of it
OTHER_USER = 65534  # nobody


def tensorboard(project: Path, run: str) -> tuple[int, str, str]:
    """The command's exit status and output; AssertionError as soon as TensorBoard answers on its port
    (or the command is still running after BOUND seconds) instead."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "nnsql.train.spawn", "tensorboard", run, "--port", str(port)]
    env = os.environ | {"PYTHONPATH": str(REPO)}
    with subprocess.Popen(
        command, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        deadline = time.monotonic() + BOUND
        while process.poll() is None and time.monotonic() < deadline and not listening(port):
            time.sleep(0.2)
        if process.poll() is None:
            process.terminate()  # passed on to TensorBoard's group, which is killed 10 s later at most
            out, _ = process.communicate(timeout=BOUND)
            raise AssertionError(f"TensorBoard started on the planted run: {out.strip()}")
        out, err = process.communicate()
    return process.returncode, out, err


def listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def planted_run(project: Path, name: str = "r") -> Path:
    run_dir = project / "runs" / name
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"backend": "local", "attempt": 1}))
    return run_dir


def logs(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "events.out.tfevents.1.host").write_bytes(b"")
    return folder


def test_a_log_directory_planted_as_a_link_is_not_served(tmp_path):
    project = tmp_path / "project"
    elsewhere = logs(tmp_path / "another-project" / "logs")
    (planted_run(project) / "model").symlink_to(elsewhere)
    code, out, err = tensorboard(project, "r")
    assert code == 2 and "TensorBoard for" not in out, out
    assert err.count("\n") == 1 and "symbolic link" in err, err


@pytest.mark.skipif(os.getuid() != 0, reason="making a folder of another user's takes root")
def test_a_run_folder_of_another_user_is_not_served(tmp_path):
    project = tmp_path / "project"
    run_dir = planted_run(project)
    logs(run_dir / "model")
    for path in (run_dir, run_dir / "model", run_dir / "run.json"):
        os.chown(path, OTHER_USER, OTHER_USER)
    code, out, err = tensorboard(project, "r")
    assert code == 2 and "TensorBoard for" not in out, out
    assert err.count("\n") == 1 and f"user {OTHER_USER}" in err, err


def test_a_run_of_the_users_own_still_has_its_logs_found(tmp_path):
    from nnsql.train.spawn import tensorboard as command

    run_dir = planted_run(tmp_path / "project")
    assert command.log_directory(run_dir) is None
    live = logs(run_dir / "shared" / "output")
    assert command.log_directory(run_dir) == live
    collected = logs(run_dir / "model")
    assert command.log_directory(run_dir) == collected
