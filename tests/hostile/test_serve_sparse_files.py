"""A version's files as a hostile writer of the repository leaves them: a sparse `metadata.json` or
`model.onnx` of gigabytes costs no disk, yet read whole it fills a worker's memory, as `/dev/zero`
would. Each is refused in one line naming the size allowed, before its bytes are read: the reader runs
under an address-space limit far below the file's size, and must not need it."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

SPARSE_BYTES = 8 << 30  # holes only: no disk used
ADDRESS_SPACE = 3 << 30  # the reader's whole address space: less than the file, enough for its imports
READER = """
import resource, sys
from pathlib import Path
from nnsql.serve import snapshot
from nnsql.serve.validation import InvalidVersion
resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
try:
    snapshot.take(Path(sys.argv[1]))
except InvalidVersion as error:
    print("refused:", error)
except MemoryError:
    print("memory error")
"""


def sparse(path: Path) -> None:
    with path.open("wb") as file:
        file.truncate(SPARSE_BYTES)


def taken(directory: Path) -> str:
    """What reading the version under the address-space limit says (a bounded child process)."""
    script = READER.format(limit=ADDRESS_SPACE)
    done = subprocess.run(
        [sys.executable, "-c", script, str(directory)], capture_output=True, text=True, timeout=120
    )
    return done.stdout.strip() or done.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("huge", ["metadata.json", "model.onnx"])
def test_a_sparse_file_of_gigabytes_is_refused_before_it_is_read(tmp_path, huge):
    version = tmp_path / "m" / "1"
    version.mkdir(parents=True)
    (version / "metadata.json").write_text(json.dumps({"sha256": "0" * 64}))
    (version / "model.onnx").write_bytes(b"\0" * 64)
    sparse(version / huge)
    said = taken(version)
    assert said.startswith(f"refused: {huge} is larger than"), said
    assert "\n" not in said and str(tmp_path) not in said


def test_a_metadata_file_linked_out_of_its_version_is_refused(tmp_path):
    """metadata.json is text clients see (the index, the model's metadata): like a label file, it is
    read only from inside its own directory, whatever the file it links to holds."""
    from nnsql.serve import snapshot
    from nnsql.serve.validation import InvalidVersion

    version = tmp_path / "repository" / "m" / "1"
    version.mkdir(parents=True)
    (version / "model.onnx").write_bytes(b"\0" * 64)
    outside = tmp_path / "elsewhere.json"
    outside.write_text(json.dumps({"sha256": hashlib.sha256(b"\0" * 64).hexdigest()}))
    (version / "metadata.json").symlink_to(outside)
    with pytest.raises(InvalidVersion, match=r"^metadata\.json: a link out of its directory$"):
        snapshot.take(version)
