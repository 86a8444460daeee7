"""The versions of a model in an ONNX repository (REPO/<name>/<version>/): listed, activated, removed.

Activating version N writes REPO/<name>/active holding N (written whole, then renamed into place). The
scorer then serves that version alone, as a Triton `version_policy: specific` would, and picks the change
up at its next scan like any other version change: the switch happens at once between two requests. A
later export moves `active` to its new version, as an export to a database activates it. Without the
file every version is served and the newest answers by default.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import stat
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ExportError
from ..onnx.fileformat import METADATA_FILE, MODEL_FILE
from ..onnx.repository import versions
from .checks import from_document, require_agreement

ACTIVE_FILE = "active"
CHECK_FILE = "check.json"


def regular_text(path: Path) -> str:
    """A file's text, read only if it is a regular file: a FIFO another writer of a shared repository
    left in its place would block the open, and the command, for ever. OSError otherwise."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(descriptor, "rb") as file:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise OSError(f"{path.name}: not a regular file")
        return file.read().decode()


def active_version(model_dir: Path) -> int | None:
    """The version `active` names, else the newest complete one (None: no version)."""
    complete = [v for v in versions(model_dir) if (model_dir / str(v) / METADATA_FILE).is_file()]
    try:
        named = int(regular_text(model_dir / ACTIVE_FILE).strip())
    except (OSError, ValueError):
        named = None
    if named in complete:
        return named
    return max(complete) if complete else None


def set_active(model_dir: Path, version: int) -> None:
    """Name `version` in `active`, whole or not at all. The temporary file is created anew under a
    name nobody can guess (O_EXCL): a link left under a predictable name in a shared repository would
    have had the activating user write into the link's target."""
    temporary = model_dir / f".{ACTIVE_FILE}.{os.getpid()}.{secrets.token_hex(8)}.tmp"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
    with os.fdopen(descriptor, "w") as file:
        file.write(f"{version}\n")
    os.replace(temporary, model_dir / ACTIVE_FILE)


def follow_export(model_dir: Path, version: int) -> None:
    """A newly published version becomes the active one where a version was activated by hand."""
    if (model_dir / ACTIVE_FILE).exists():
        set_active(model_dir, version)


def model_dir_of(repo: Path, name: str) -> Path:
    model_dir = repo / name
    if not model_dir.is_dir():
        raise ExportError(f"{repo} holds no model {name!r}")
    return model_dir


def metadata_of(model_dir: Path, version: int) -> dict[str, Any]:
    path = model_dir / str(version) / METADATA_FILE
    try:
        metadata: dict[str, Any] = json.loads(regular_text(path))
    except (OSError, ValueError):
        there = ", ".join(map(str, versions(model_dir))) or "none"
        raise ExportError(f"{model_dir.name} has no version {version} (versions: {there})") from None
    return metadata


def listing(repo: Path, name: str | None) -> list[dict[str, Any]]:
    """Rows like a database registry's: every version of `name` (or of every model)."""
    names = [name] if name else sorted(p.name for p in repo.iterdir() if p.is_dir() and p.name[0] != ".")
    rows = []
    for model in names:
        model_dir = model_dir_of(repo, model)
        active = active_version(model_dir)
        for version in versions(model_dir):
            metadata = metadata_of(model_dir, version)
            report = metadata.get("parity", {})
            rows.append(
                {
                    "name": model,
                    "version": version,
                    "active": version == active,
                    "output_kind": (metadata.get("output_kinds") or ["probabilities"])[0],
                    "classes": metadata.get("classes", []),
                    "parity_rows": report.get("rows"),
                    "parity_max_abs_diff": report.get("max_abs_diff"),
                    "source": metadata.get("source", ""),
                    "activatable": (model_dir / str(version) / CHECK_FILE).is_file(),
                }
            )
    return rows


def check_version(model_dir: Path, version: int) -> None:
    """The version's answer check, kept beside its model, run again in onnxruntime."""
    from ..onnx import fileformat as scorer
    from ..onnx.runtime import load_session, session_predict

    metadata = metadata_of(model_dir, version)
    check_file = model_dir / str(version) / CHECK_FILE
    if not check_file.is_file():
        raise ExportError(
            f"{model_dir.name} version {version} was published before versions kept their answer check: "
            "export it again to activate it"
        )
    check = from_document(check_file.read_text())
    scores = session_predict(load_session(model_dir / str(version) / MODEL_FILE), check.inputs)
    kind = (metadata.get("output_kinds") or ["probabilities"])[0]
    units = int(metadata["outputs"][0]["shape"][-1])
    answered = scorer.answers(kind, np.asarray(scores)[:, :units], list(metadata.get("classes", [])))
    asked = {f: answered[f] for f in check.answers if f in answered}
    require_agreement(check, scores, asked, f"{model_dir.name} version {version}")


def activate(repo: Path, name: str, version: int) -> None:
    model_dir = model_dir_of(repo, name)
    check_version(model_dir, version)
    set_active(model_dir, version)


def remove(repo: Path, name: str, version: int) -> None:
    """The version's directory, renamed away first so that no scan sees it half deleted."""
    model_dir = model_dir_of(repo, name)
    metadata_of(model_dir, version)
    if active_version(model_dir) == version:
        raise ExportError(f"{name} version {version} is the active one: activate another before removing it")
    doomed = model_dir / f".removing-{version}-{os.getpid()}"
    os.rename(model_dir / str(version), doomed)
    shutil.rmtree(doomed, ignore_errors=True)
