"""`nnsql spawn delete|status|logs RUN` and `nnsql spawn -d` in a runs/ folder another member of the
group may write (a shared project directory, umask 002). Found by the third hostile pass of issue 32:
- a link planted in runs/ as a run (`runs/evil -> /home/alice/thesis`, or `runs/latest` re-pointed)
  was followed: `delete evil`, `delete latest` and `-d` (every run, no question asked without a
  terminal) removed the directory it named, outside runs/, once that held a `run.json`;
- a run folder swapped for such a link after it was checked was removed through the link (the
  folder was resolved, then removed by its resolved path), whatever the target held;
- a FIFO planted as a worker's log held `logs RUN` for ever; a link as one printed the file it named.
Each command runs in a child process with a bound: a hang fails the test, never holds it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nnsql.train.spawn import commands
from tests.conftest import REPO

BOUND = 60  # seconds: each command reads a few small files; Python's start-up is most of it


def spawn(project: Path, *argv: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            [sys.executable, "-m", "nnsql.train.spawn", *argv],
            cwd=project,
            capture_output=True,
            text=True,
            timeout=BOUND,
            stdin=subprocess.DEVNULL,
            env=os.environ | {"PYTHONPATH": str(REPO), "KUBERNETES_SERVICE_HOST": ""},
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(f"nnsql spawn {' '.join(argv)} waited {BOUND} s on a planted file") from None


def precious(tmp_path: Path, record: bool = True) -> Path:
    """A directory of the user's outside runs/, holding a run record (another project's run)."""
    folder = tmp_path / "elsewhere" / "thesis"
    folder.mkdir(parents=True)
    (folder / "thesis.tex").write_text("two years of work\n")
    if record:
        (folder / "run.json").write_text(json.dumps({"backend": "local", "attempt": 1}))
    return folder


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "project" / "runs").mkdir(parents=True)
    return tmp_path / "project"


@pytest.mark.parametrize(
    ("planted", "argv"),
    [("evil", ["delete", "evil"]), ("latest", ["delete", "latest"]), ("evil", ["-d"])],
    ids=["delete-link", "delete-latest", "delete-all"],
)
def test_a_link_planted_in_runs_is_never_followed_out_of_it(project, tmp_path, planted, argv):
    target = precious(tmp_path)
    (project / "runs" / planted).symlink_to(target)
    done = spawn(project, *argv)
    assert (target / "thesis.tex").exists(), f"deleted {target} through runs/{planted}: {done.stdout}"
    assert "Traceback" not in done.stderr, done.stderr


def test_status_does_not_read_a_record_through_a_link(project, tmp_path):
    target = precious(tmp_path)
    (target / "run.json").write_text(json.dumps({"backend": "local", "secret": "of another project"}))
    (project / "runs" / "evil").symlink_to(target)
    done = spawn(project, "status", "evil")
    assert "of another project" not in done.stdout
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr


def test_a_run_folder_swapped_for_a_link_after_its_check_is_not_deleted_through_it(project, tmp_path):
    """The swap lands between the check of runs/r and its removal: here, before delete() is called."""
    target = precious(tmp_path, record=False)
    runs = project / "runs"
    run_dir = commands.run_directory(runs, "r")  # checked while it does not exist yet: no link then
    os.symlink(target, run_dir)
    with pytest.raises(OSError):
        commands.delete(run_dir, {"backend": "local"})
    assert (target / "thesis.tex").exists()


@pytest.mark.parametrize("planted", ["fifo", "link"])
def test_a_log_planted_as_a_fifo_or_link_is_refused_in_one_line(project, tmp_path, planted):
    run_dir = project / "runs" / "r"
    (run_dir / "attempt-0").mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"backend": "local", "attempt": 1}))
    log = run_dir / "attempt-0" / "worker-0.log"
    secret = tmp_path / "secret.txt"
    secret.write_text("a file of the user's\n")
    os.mkfifo(log) if planted == "fifo" else log.symlink_to(secret)
    done = spawn(project, "logs", "r")
    assert "a file of the user's" not in done.stdout
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr


def test_runs_of_the_folder_itself_are_still_deleted(project):
    for name in ("a-1", "a-2"):
        (project / "runs" / name).mkdir()
        (project / "runs" / name / "run.json").write_text(json.dumps({"backend": "local"}))
    (project / "runs" / "latest").symlink_to("a-2")
    assert spawn(project, "delete", "latest").stdout.strip() == "deleted a-2"
    assert not (project / "runs" / "latest").exists()
    assert spawn(project, "-d").stdout.split() == ["deleted", "a-1"]
    assert os.listdir(project / "runs") == []
