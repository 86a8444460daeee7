"""Local `nnsql spawn` also collects the models whose absolute paths the chief printed, and the chief's
output holds more than the script's own words: `nnsql.train.data` prints the bucket keys it staged. A key
written by whoever may write the bucket (`data/x /tmp/mallory/model.keras .csv`, which the pattern
`data/*.csv` matches) put another user's file in the log; collected, it replaced the model the chief saved
under NNSQL_OUTPUT_DIR and was reported as the trained model. A key with a terminal escape reached the
operator's terminal as it was. On moto's S3 server, loopback only.

Another user's output is planted as root does it (`chown`); a user who is not root cannot give a file
away, so the run itself writes TensorBoard events into a shared directory owned by root (`/dev/shm`,
`/var/tmp` or `/tmp`) and prints that directory: the same ownership check must refuse it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

from tests.conftest import REPO
from tests.s3_server import TEST_CREDENTIALS, s3_test_server, upload

WORKER = """
import os, sys
from nnsql.train.data import local_files
from nnsql.train.spawn import output_path
def make_strategy():
    return None
make_strategy()
local_files(sys.argv[1], endpoint=sys.argv[2], cache_dir=sys.argv[3], progress=False)
with open(output_path("model.keras"), "w") as saved:
    saved.write("alice's model")
with open(sys.argv[4], "w") as saved:
    saved.write("alice's other model")
print("trained; also saved", sys.argv[4], flush=True)
if sys.argv[5:]:  # events written into a directory of another user (root's), which it then names
    os.makedirs(sys.argv[6])
    open(os.path.join(sys.argv[6], "events.out.tfevents.1.test"), "w").close()
    print("logs in", sys.argv[5], flush=True)
"""

SHARED = ("/dev/shm", "/var/tmp", "/tmp")  # directories of root that anyone may write into


def planted(directory, owner: int | None) -> str:
    """A `model.keras` of another user (`owner`) or of ours, dated in the future so it looks freshest."""
    directory.mkdir()
    path = directory / "model.keras"
    path.write_text("mallory's model")
    later = time.time() + 3600
    os.utime(path, (later, later))
    if owner is not None:
        os.chown(path, owner, owner)
    return str(path)


def shared_directory() -> Path:
    """A directory we may write into but do not own (for a user who is not root)."""
    found = [Path(path) for path in SHARED if os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK)]
    found = [path for path in found if path.stat().st_uid != os.geteuid()]
    assert found, f"none of {SHARED} is a writable directory of another user"
    return found[0]


def test_paths_named_by_bucket_keys_never_replace_the_model(tmp_path):
    if os.geteuid() == 0:
        theirs = planted(tmp_path / "mallory", 65534)  # another user's file
        foreign: list[str] = []
    else:
        theirs = str(shared_directory())
        foreign = [theirs, os.path.join(theirs, f"nnsql-test-{uuid.uuid4().hex}")]
    ours = planted(tmp_path / "stale", None)  # a file of ours, named like the chief's output
    own = tmp_path / "kept" / "other.keras"
    own.parent.mkdir()
    try:
        done = spawned(tmp_path, theirs, ours, [str(own), *foreign])
    finally:
        if foreign:
            shutil.rmtree(foreign[1], ignore_errors=True)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    collected = [path for folder in (tmp_path / "runs").glob("*/model") for path in folder.rglob("*")]
    texts = {path.name: path.read_text() for path in collected if path.is_file()}
    assert texts.get("model.keras") == "alice's model", (texts, output)
    assert texts.get("other.keras") == "alice's other model", (texts, output)  # a printed path of ours
    assert "mallory's model" not in texts.values(), (texts, output)
    assert not any(name.startswith("events.out.tfevents") for name in texts), (texts, output)
    refusals = [line for line in output.splitlines() if line.startswith("not collected: ")]
    assert any(theirs in line and "owned by another user" in line for line in refusals), output
    assert any(ours in line and "collected already" in line for line in refusals), output
    assert "\x1b" not in output and "Traceback" not in output, output


def spawned(tmp_path, theirs: str, ours: str, arguments: list[str]) -> subprocess.CompletedProcess:
    """`nnsql spawn` of the worker above, reading a bucket whose keys name `theirs` and `ours`."""
    script = tmp_path / "printed.py"
    script.write_text(WORKER)
    env = {**os.environ, **TEST_CREDENTIALS, "PYTHONPATH": str(REPO), "AWS_EC2_METADATA_DISABLED": "true"}
    with s3_test_server() as url:
        s3 = upload(url, "physics", "data", [])
        s3.put_object(Bucket="physics", Key="data/a.csv", Body=b"1\n")
        s3.put_object(Bucket="physics", Key=f"data/x {theirs} {ours} .csv", Body=b"2\n")
        s3.put_object(Bucket="physics", Key="data/b\x1b]0;owned\x07.csv", Body=b"3\n")
        arguments = ["s3://physics/data/*.csv", url, str(tmp_path / "cache"), *arguments]
        return subprocess.run(
            [sys.executable, "-m", "nnsql.train.spawn", "-w", "1", str(script), *arguments],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
