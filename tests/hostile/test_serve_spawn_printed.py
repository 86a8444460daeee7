"""Local `nnsql spawn` also collects the models whose absolute paths the chief printed, and the chief's
output holds more than the script's own words: `nnsql.train.data` prints the bucket keys it staged. A key
written by whoever may write the bucket (`data/x /tmp/mallory/model.keras .csv`, which the pattern
`data/*.csv` matches) put another user's file in the log; collected, it replaced the model the chief saved
under NNSQL_OUTPUT_DIR and was reported as the trained model. A key naming a newer model of the user's own
(`data/x /home/alice/best.keras .csv`, or `data/../../home/alice/best.keras` with no space at all) had it
copied beside the output, and, named before `model.keras`, reported as the model. A key with a terminal
escape reached the operator's terminal as it was. On moto's S3 server, loopback only.

Collection reads output paths from the script's own words only, and checks those like data: another
user's file the script names is refused. Root plants one with `chown`; a user who is not root cannot give
a file away, so the script writes TensorBoard events into a shared directory owned by root (`/dev/shm`,
`/var/tmp` or `/tmp`) and names that directory: the same ownership check must refuse it."""

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
if sys.argv[7:]:  # events written into a directory of another user (root's), which it then names
    os.makedirs(sys.argv[7])
    open(os.path.join(sys.argv[7], "events.out.tfevents.1.test"), "w").close()
print("see also", sys.argv[5], "and", sys.argv[6], flush=True)  # ours, and another user's
"""

SHARED = ("/dev/shm", "/var/tmp", "/tmp")  # directories of root that anyone may write into


def planted(
    directory: Path, owner: int | None, name: str = "model.keras", text: str = "mallory's model"
) -> str:
    """A model file of another user (`owner`) or of ours, dated in the future so it looks freshest."""
    directory.mkdir()
    path = directory / name
    path.write_text(text)
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


def test_only_the_scripts_own_outputs_are_collected(tmp_path):
    if os.geteuid() == 0:
        theirs = planted(tmp_path / "mallory", 65534)  # another user's file
        events: list[str] = []
    else:
        theirs = str(shared_directory())
        events = [os.path.join(theirs, f"nnsql-test-{uuid.uuid4().hex}")]
    ours = planted(tmp_path / "stale", None)  # a file of ours, named like the chief's output
    newer = planted(tmp_path / "newer", None, "best.keras", "alice's best model of another run")
    own = tmp_path / "kept" / "other.keras"
    own.parent.mkdir()
    keys = [f"data/x {theirs} {ours} {newer} .csv", "data" + "/.." * 40 + newer, "data/b\x1b]0;owned\x07.csv"]
    try:
        done = spawned(tmp_path, keys, [str(own), ours, theirs, *events])
    finally:
        for directory in events:
            shutil.rmtree(directory, ignore_errors=True)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    collected = [path for folder in (tmp_path / "runs").glob("*/model") for path in folder.rglob("*")]
    texts = {path.name: path.read_text() for path in collected if path.is_file()}
    assert texts.get("model.keras") == "alice's model", (texts, output)
    assert texts.get("other.keras") == "alice's other model", (texts, output)  # a printed path of ours
    assert set(texts) == {"model.keras", "other.keras"}, (texts, output)  # no best.keras, no events
    reported = [line for line in output.splitlines() if " succeeded in " in line]
    assert reported and reported[0].endswith("/model/model.keras"), output
    refusals = [line for line in output.splitlines() if line.startswith("not collected: ")]
    assert any(theirs in line and "owned by another user" in line for line in refusals), output
    assert any(ours in line and "collected already" in line for line in refusals), output
    assert "\x1b" not in output and "Traceback" not in output, output


def spawned(tmp_path: Path, keys: list[str], arguments: list[str]) -> subprocess.CompletedProcess:
    """`nnsql spawn` of the worker above, reading `data/*.csv` of a bucket that holds `keys`."""
    script = tmp_path / "printed.py"
    script.write_text(WORKER)
    env = {**os.environ, **TEST_CREDENTIALS, "PYTHONPATH": str(REPO), "AWS_EC2_METADATA_DISABLED": "true"}
    with s3_test_server() as url:
        s3 = upload(url, "physics", "data", [])
        s3.put_object(Bucket="physics", Key="data/a.csv", Body=b"1\n")
        for number, key in enumerate(keys):
            s3.put_object(Bucket="physics", Key=key, Body=f"{number}\n".encode())
        arguments = ["s3://physics/data/*.csv", url, str(tmp_path / "cache"), *arguments]
        # the store is on this machine's loopback, out of the workers' private network's reach
        spawn = [sys.executable, "-m", "nnsql.train.spawn", "--network", "host", "-w", "1"]
        return subprocess.run(
            [*spawn, str(script), *arguments],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )


def test_a_path_is_read_from_the_scripts_words_only(tmp_path):
    """Each rule alone, on a log as the chief writes it: a path of its own line is taken; the same path
    in the line naming staged keys is not, nor a path starting inside a word, nor one holding `..`."""
    from nnsql.train.objectstore import STAGED_LINE
    from nnsql.train.spawn.local import printed_outputs

    started = time.time()
    (tmp_path / "a").mkdir()
    model = tmp_path / "a" / "best.keras"
    model.write_text("a model")
    dotted = f"{tmp_path}/a/../a/best.keras"
    assert printed_outputs(f"saved to {model}\n", started) == [model]
    assert printed_outputs(f"saved to '{model}'.\n", started) == [model]
    assert printed_outputs(f"{STAGED_LINE}for worker 0/1: 1 objects: data/x {model} .csv\n", started) == []
    assert printed_outputs(f"read data{'/..' * 40}{model}\n", started) == []
    assert printed_outputs(f"saved to {dotted}\n", started) == []
