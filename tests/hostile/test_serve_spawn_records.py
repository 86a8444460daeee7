"""`nnsql spawn`'s run record (runs/<id>/run.json) in a run directory another local user may also write
(a shared project directory with a group's umask 002). Found by the hostile pass of issue 32: the record
was rewritten through a temporary file of a predictable name (`.run.json.<pid>`) opened through any
link, so a link planted under that name had the user's supervisor overwrite the link's target, any
file of theirs; its lock (`run.lock`) and the record itself were opened as whatever they were, so a
FIFO planted as either stopped the supervisor, `status` or a notebook's `wait()` for ever in `open`.
Each write or read here runs in a child process with a bound: a hang fails the test, never holds it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from nnsql.train.spawn.backend import write_record
from tests.conftest import REPO

BOUND = 20  # seconds: a record is written or read in milliseconds

CHILD = """
import sys
from pathlib import Path
from nnsql.train.spawn.backend import read_record, write_record
run_dir = Path(sys.argv[2])
try:
    if sys.argv[1] == "write":
        write_record(run_dir, state="running")
    else:
        print(read_record(run_dir))
except ValueError as error:  # what `nnsql spawn` prints in one line
    print(f"error: {error}")
    sys.exit(2)
"""


def child(action: str, run_dir) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            [sys.executable, "-c", CHILD, action, str(run_dir)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=BOUND,
            env=os.environ | {"PYTHONPATH": str(REPO)},
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{action} of the run record waited {BOUND} s on a planted FIFO") from None


def test_a_link_planted_under_the_temporary_name_never_writes_its_target(tmp_path):
    run_dir, victim = tmp_path / "run", tmp_path / "notes.txt"
    run_dir.mkdir()
    victim.write_text("the user's own file\n")
    write_record(run_dir, state="starting")
    os.symlink(victim, run_dir / f".run.json.{os.getpid()}")  # the name the next write used to take
    write_record(run_dir, state="running")
    assert victim.read_text() == "the user's own file\n"
    assert json.loads((run_dir / "run.json").read_text())["state"] == "running"
    assert not (run_dir / "run.json").is_symlink()


def test_a_fifo_as_the_lock_or_the_record_stops_nothing(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    os.mkfifo(run_dir / "run.lock")
    assert child("write", run_dir).returncode == 0
    assert json.loads((run_dir / "run.json").read_text()) == {"state": "running"}
    os.unlink(run_dir / "run.json")
    os.mkfifo(run_dir / "run.json")
    for action in ("read", "write"):
        done = child(action, run_dir)
        assert done.returncode == 2 and done.stdout.strip() == (
            f"error: {run_dir}/run.json is not a run record (not a regular file, or too large); refusing it"
        )


def test_a_record_linked_to_another_file_is_not_read(tmp_path):
    run_dir, elsewhere = tmp_path / "run", tmp_path / "settings.json"
    run_dir.mkdir()
    elsewhere.write_text(json.dumps({"token": "s3cret"}))
    os.symlink(elsewhere, run_dir / "run.json")
    done = child("read", run_dir)
    assert done.returncode == 2 and "s3cret" not in done.stdout + done.stderr
    assert (
        done.stdout.strip() == f"error: cannot read the run record {run_dir}/run.json: it is a symbolic link"
    )
    assert json.loads(elsewhere.read_text()) == {"token": "s3cret"}


def test_a_run_directory_is_writable_by_its_user_alone_whatever_the_umask(tmp_path):
    from nnsql.train.spawn.__main__ import parse, prepare

    script = tmp_path / "train.py"
    script.write_text("print('trained')\n")
    before = os.umask(0o002)  # a shared project's group umask
    try:
        _, spec, _ = prepare(parse(["-w", "1", str(script)]), tmp_path / "runs")
    finally:
        os.umask(before)
    assert spec.run_dir.stat().st_mode & 0o777 == 0o755


def test_what_a_local_run_writes_no_other_user_may_replace(tmp_path):
    """The chief's model under NNSQL_OUTPUT_DIR, its parents and the attempt's logs: a group member who
    could write `shared/` (umask 002) could have swapped `shared/output` for a folder of theirs, or the
    saved model.keras for another, before collection reported it as the trained model."""
    from nnsql.train.spawn.__main__ import parse, prepare
    from nnsql.train.spawn.control import run_job

    script = tmp_path / "train.py"
    script.write_text(
        "import os, pathlib\n"
        "out = pathlib.Path(os.environ['NNSQL_OUTPUT_DIR'])\n"
        "(out / 'model.keras').write_bytes(b'model')\n"
        "(out / 'variables').mkdir()\n"
    )
    before = os.umask(0o002)
    try:
        backend, spec, settings = prepare(parse(["-w", "1", str(script)]), tmp_path / "runs")
        run_job(backend, spec, settings)
    finally:
        os.umask(before)
    made = [path for path in spec.run_dir.rglob("*") if not path.is_symlink()]
    assert spec.run_dir / "shared" / "output" / "model.keras" in made
    writable = [str(path.relative_to(spec.run_dir)) for path in made if path.stat().st_mode & 0o022]
    assert not writable, f"writable by the group or others: {writable}"
