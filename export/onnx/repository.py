"""Publishing to a model repository laid out as REPO/<name>/<version>/{model.onnx, metadata.json}.

A version is written to a hidden temporary directory, verified, and then renamed into place: a reader
(the scorer in serve/) sees a complete version or none. Versions are whole numbers, the newest is the
highest.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import ExportError
from .fileformat import METADATA_FILE

PUBLISH_ATTEMPTS = 20
STAGING_PREFIX = ".staging-"


def versions(model_dir: Path) -> list[int]:
    """Every version number taken: a directory named by a number, complete or not (a half-written or
    broken one still holds its number, so the next export never tries to rename onto it)."""
    if not model_dir.is_dir():
        return []
    return sorted(int(p.name) for p in model_dir.iterdir() if p.name.isascii() and p.name.isdigit())


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_abandoned_staging(model_dir: Path) -> None:
    """Staging directories of exports that were killed (their process is gone)."""
    for path in model_dir.glob(f"{STAGING_PREFIX}*"):
        pid = path.name[len(STAGING_PREFIX) :].split("-")[0]
        if pid.isdigit() and not process_alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextmanager
def staging(repo: Path, name: str) -> Iterator[Path]:
    """A temporary directory beside the versions, removed unless it was published; a model directory
    this export created is removed too when no version reached it (a failed first export leaves no empty
    model behind for the scorer to list)."""
    if repo.exists() and not repo.is_dir():
        raise ExportError(f"--repo {repo} is not a directory")
    model_dir = repo / name
    created = not model_dir.exists()
    try:
        model_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ExportError(f"cannot create {model_dir}: {error.strerror}") from None
    remove_abandoned_staging(model_dir)
    path = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{os.getpid()}-", dir=model_dir))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        if created:
            with contextlib.suppress(OSError):  # not empty: a version (or another export) is there
                model_dir.rmdir()


def publish(staged: Path, repo: Path, name: str, metadata: dict) -> int:
    """Write metadata and rename the staged directory to the next version number (atomic on POSIX)."""
    model_dir = repo / name
    for _ in range(PUBLISH_ATTEMPTS):
        version = (versions(model_dir) or [0])[-1] + 1
        metadata = {**metadata, "name": name, "version": version}
        (staged / METADATA_FILE).write_text(json.dumps(metadata, indent=2) + "\n")
        try:
            os.rename(staged, model_dir / str(version))
            return version
        except OSError:  # another export took this number first
            continue
    raise ExportError(f"could not take a version number in {model_dir} after {PUBLISH_ATTEMPTS} attempts")
