"""`nnsql models list/activate --repo` in a repository others also write: a FIFO planted as a model's
`active` file or as a version's `metadata.json` blocked the command for ever in its open, as it once
blocked the server's scans. The command must answer (the FIFO read as no file, or refused in one line)
well within its bound, run in a child process so that a stall cannot hold the test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BOUND_SECONDS = 60  # the child's imports on a loaded machine; a stalled open never ends
LISTER = """
import sys
from pathlib import Path
from nnsql.export.errors import ExportError
from nnsql.export.registry.repository import listing
try:
    print([(row["version"], row["active"]) for row in listing(Path(sys.argv[1]), "m")])
except ExportError as error:
    print("refused:", error)
"""


def listed(repo: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", LISTER, str(repo)], capture_output=True, text=True, timeout=BOUND_SECONDS
    )
    return done.stdout.strip() or done.stderr.strip().splitlines()[-1]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    for version in (1, 2):
        folder = tmp_path / "m" / str(version)
        folder.mkdir(parents=True)
        (folder / "metadata.json").write_text(json.dumps({"classes": ["a", "b"]}))
        (folder / "model.onnx").write_bytes(b"")
    return tmp_path


def test_a_fifo_as_the_active_file_reads_as_no_choice(repo):
    os.mkfifo(repo / "m" / "active")
    assert listed(repo) == "[(1, False), (2, True)]"


def test_a_fifo_as_a_version_metadata_is_refused_in_one_line(repo):
    (repo / "m" / "2" / "metadata.json").unlink()
    os.mkfifo(repo / "m" / "2" / "metadata.json")
    said = listed(repo)
    assert said.startswith("refused: m has no version 2"), said
