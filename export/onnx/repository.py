"""Publishing to a model repository laid out as REPO/<name>/<version>/{model.onnx, metadata.json}.

A version is written to a hidden temporary directory, verified, and then renamed into place: a reader
(the scorer in serve/) sees a complete version or none. Versions are whole numbers, the newest is the
highest.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

MODEL_FILE = "model.onnx"
METADATA_FILE = "metadata.json"


def versions(model_dir: Path) -> list[int]:
    if not model_dir.is_dir():
        return []
    found = [int(p.name) for p in model_dir.iterdir() if p.name.isdigit() and (p / METADATA_FILE).exists()]
    return sorted(found)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextmanager
def staging(repo: Path, name: str) -> Iterator[Path]:
    """A temporary directory beside the versions, removed unless it was published."""
    model_dir = repo / name
    model_dir.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=".staging-", dir=model_dir))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def publish(staged: Path, repo: Path, name: str, metadata: dict) -> int:
    """Write metadata and rename the staged directory to the next version number (atomic on POSIX)."""
    model_dir = repo / name
    while True:
        version = (versions(model_dir) or [0])[-1] + 1
        metadata = {**metadata, "name": name, "version": version}
        (staged / METADATA_FILE).write_text(json.dumps(metadata, indent=2) + "\n")
        try:
            os.rename(staged, model_dir / str(version))
            return version
        except OSError:  # another export took this number first
            continue
