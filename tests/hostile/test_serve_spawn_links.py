"""Local `nnsql spawn` collection copies what the chief wrote, never what a link in the output directory
points to: a worker that saved model.keras as a link to /etc/passwd had it copied and reported as the
trained model."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO

WORKER = """
import os, sys
def make_strategy():
    return None
make_strategy()
output = os.environ["NNSQL_OUTPUT_DIR"]
os.symlink(sys.argv[1], os.path.join(output, "model.keras"))
os.makedirs(os.path.join(output, "logs"), exist_ok=True)
os.symlink(os.path.dirname(sys.argv[1]), os.path.join(output, "logs", "outside"))
print("trained", flush=True)
"""


def test_links_out_of_the_output_directory_are_not_collected(tmp_path):
    secret = tmp_path / "outside" / "passwd"
    secret.parent.mkdir()
    secret.write_text("root:x:0:0:root:/root:/bin/bash\n")
    script = tmp_path / "links.py"
    script.write_text(WORKER)
    done = subprocess.run(
        [sys.executable, "-m", "nnsql.train.spawn", "-w", "1", str(script), str(secret)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = done.stdout + done.stderr
    refusals = [line for line in output.splitlines() if line.startswith("not collected: ")]
    assert len(refusals) == 2 and all("symbolic link" in line for line in refusals), output
    collected = [path for folder in (tmp_path / "runs").glob("*/model") for path in folder.rglob("*")]
    assert not any(path.is_symlink() for path in collected)
    assert not any(secret.read_text() in path.read_text() for path in collected if path.is_file())
    assert "; model: " not in output and "Traceback" not in output
    assert done.returncode == 0, output
