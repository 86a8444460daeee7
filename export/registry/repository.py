"""The versions of a model in an ONNX repository (REPO/<name>/<version>/): listed, activated, removed.

Activating version N writes REPO/<name>/active holding N (written whole, then renamed into place). The
scorer then serves that version alone, as a Triton `version_policy: specific` would, and picks the change
up at its next scan like any other version change: the switch happens at once between two requests. A
later export moves `active` to its new version, as an export to a database activates it. Without the
file every version is served and the newest answers by default.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import os
import secrets
import shutil
import stat
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ExportError
from ..onnx.fileformat import METADATA_FILE, MODEL_FILE
from .checks import from_document, require_agreement

ACTIVE_FILE = "active"
CHECK_FILE = "check.json"
# Entries read from one directory: a model directory of a million entries (or a repository of a million
# models) costs a listing no more than this many, as it costs `nnsql serve`'s scan.
MAX_ENTRIES = 10_000
MAX_VERSION_DIGITS = 18  # as serve reads them: int() of thousands of digits is refused
# Bytes read from one file of a version, as `nnsql serve` bounds them (serve/tritonrepo.py,
# serve/snapshot.py): a sparse file of gigabytes costs its writer nothing and the reader its memory.
MAX_METADATA_BYTES = 4 << 20
MAX_ACTIVE_BYTES = 64  # a version number and a line break
MAX_MODEL_BYTES = (2 << 30) - 1  # protobuf's bound: onnxruntime loads no larger model


def entry_names(directory: Path) -> list[str]:
    """At most MAX_ENTRIES names of the directory's entries; when it holds more, one warning line."""
    with os.scandir(directory) as entries:
        names = [entry.name for entry in itertools.islice(entries, MAX_ENTRIES + 1)]
    if len(names) > MAX_ENTRIES:
        warn_once(str(directory))
    return names[:MAX_ENTRIES]


@functools.cache
def warn_once(directory: str) -> None:
    shown = directory.encode("unicode_escape").decode("ascii")
    read = f"only {MAX_ENTRIES} are read"
    print(f"warning: {shown} holds more than {MAX_ENTRIES} entries: {read}", file=sys.stderr)


def versions(model_dir: Path) -> list[int]:
    """The version numbers among the first MAX_ENTRIES entries of the model's directory."""
    if not model_dir.is_dir():
        return []
    names = entry_names(model_dir)
    return sorted(int(n) for n in names if n.isascii() and n.isdigit() and len(n) <= MAX_VERSION_DIGITS)


def regular_bytes(path: Path, *, follow: bool = True, limit: int = MAX_MODEL_BYTES) -> bytes:
    """A file's bytes, read only if it is a regular file, looked at before it is opened: a FIFO another
    writer of a shared repository left in its place would block the command for ever (or wake a writer
    waiting on it), and opening a device can act. On Linux the file looked at (O_PATH opens nothing) is
    the file then opened, through /proc; elsewhere the open is checked against the look. `follow=False`
    refuses a link. OSError otherwise (the same construction as serve/repofiles.py's open_regular)."""
    nofollow = 0 if follow else os.O_NOFOLLOW
    reading = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    if hasattr(os, "O_PATH") and os.path.isdir("/proc/self/fd"):
        handle = os.open(path, os.O_PATH | os.O_CLOEXEC | nofollow)
        try:
            if not stat.S_ISREG(os.fstat(handle).st_mode):
                raise OSError(f"{path.name}: not a regular file")
            descriptor = os.open(f"/proc/self/fd/{handle}", reading)  # /proc's entry is a link: followed
        finally:
            os.close(handle)
    else:
        before = os.stat(path, follow_symlinks=follow)
        if not stat.S_ISREG(before.st_mode):
            raise OSError(f"{path.name}: not a regular file")
        descriptor = os.open(path, reading | nofollow)
        if not os.path.samestat(before, os.fstat(descriptor)):
            os.close(descriptor)
            raise OSError(f"{path.name}: replaced while it was opened")
    with os.fdopen(descriptor, "rb") as file:
        if os.fstat(file.fileno()).st_size > limit:
            raise OSError(f"{path.name}: larger than {limit:,} bytes")
        data = file.read(limit + 1)  # the size may grow while it is read
    if len(data) > limit:
        raise OSError(f"{path.name}: larger than {limit:,} bytes")
    return data


def regular_text(path: Path, *, follow: bool = True, limit: int = MAX_MODEL_BYTES) -> str:
    return regular_bytes(path, follow=follow, limit=limit).decode()


def active_version(model_dir: Path) -> int | None:
    """The version `active` names, else the newest complete one (None: no version)."""
    complete = [v for v in versions(model_dir) if (model_dir / str(v) / METADATA_FILE).is_file()]
    try:
        named = int(regular_text(model_dir / ACTIVE_FILE, follow=False, limit=MAX_ACTIVE_BYTES).strip())
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
    """The version's metadata.json, read as `nnsql serve` reads it: a regular file of at most
    MAX_METADATA_BYTES holding a JSON object; one line otherwise."""
    path = model_dir / str(version) / METADATA_FILE
    try:
        text = regular_text(path, limit=MAX_METADATA_BYTES)
    except FileNotFoundError:
        there = ", ".join(map(str, versions(model_dir))) or "none"
        raise ExportError(f"{model_dir.name} has no version {version} (versions: {there})") from None
    except (OSError, ValueError) as error:
        shown = str(error).encode("unicode_escape").decode("ascii")
        raise ExportError(f"{model_dir.name} has no version {version} that can be read ({shown})") from None
    try:
        metadata = json.loads(text)
    except ValueError as error:
        raise ExportError(f"{printable_name(model_dir, version)} is not JSON: {error}") from None
    if not isinstance(metadata, dict):
        raise ExportError(f"{printable_name(model_dir, version)} is not a JSON object")
    return metadata


def printable_name(model_dir: Path, version: int) -> str:
    """The version's metadata.json as a message names it, on one printable line."""
    shown = f"{model_dir.name}/{version}/{METADATA_FILE}"
    return shown.encode("unicode_escape").decode("ascii")


def first_kind(metadata: dict[str, Any]) -> str:
    """The kind of the version's first output (probabilities where metadata.json names none)."""
    kinds = metadata.get("output_kinds")
    return str(kinds[0]) if isinstance(kinds, list) and kinds else "probabilities"


def listing(repo: Path, name: str | None) -> list[dict[str, Any]]:
    """Rows like a database registry's: every version of `name` (or of every model)."""
    names = [name] if name else sorted(n for n in entry_names(repo) if n[0] != "." and (repo / n).is_dir())
    rows = []
    for model in names:
        model_dir = model_dir_of(repo, model)
        active = active_version(model_dir)
        for version in versions(model_dir):
            metadata = metadata_of(model_dir, version)
            report = metadata.get("parity")
            report = report if isinstance(report, dict) else {}  # what a writer of the file chose
            rows.append(
                {
                    "name": model,
                    "version": version,
                    "active": version == active,
                    "output_kind": first_kind(metadata),
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
    try:
        check = from_document(regular_text(check_file))
    except (OSError, UnicodeDecodeError) as error:
        what = f"the answer check of {model_dir.name} version {version}"
        raise ExportError(f"cannot read {what}: {error}") from None
    scores = session_predict(load_session(verified_model(model_dir, version, metadata)), check.inputs)
    try:
        units = int(metadata["outputs"][0]["shape"][-1])
        classes = list(metadata.get("classes", []))
    except (KeyError, IndexError, TypeError, ValueError):
        shown = printable_name(model_dir, version)
        raise ExportError(f"{shown} names no outputs with a shape, or its classes are not a list") from None
    answered = scorer.answers(first_kind(metadata), np.asarray(scores)[:, :units], classes)
    asked = {f: answered[f] for f in check.answers if f in answered}
    require_agreement(check, scores, asked, f"{model_dir.name} version {version}")


def verified_model(model_dir: Path, version: int, metadata: dict[str, Any]) -> bytes:
    """The version's model as the server would load it: read once as a regular file (a FIFO planted in
    its place blocked onnxruntime's open for ever), the sha256 its metadata records, and every tensor
    inside it. The check then scores these very bytes."""
    from ..onnx.external_data import external_data_problem

    what = f"{model_dir.name} version {version}"
    try:
        model = regular_bytes(model_dir / str(version) / MODEL_FILE)
    except OSError as error:
        raise ExportError(f"cannot read the model of {what}: {error.strerror or error}") from None
    recorded = metadata.get("sha256")
    if not isinstance(recorded, str):  # the server loads no such version: activating it serves nothing
        raise ExportError(f"{what}: {METADATA_FILE} records no sha256 of {MODEL_FILE}; not activated")
    if hashlib.sha256(model).hexdigest() != recorded.lower():
        raise ExportError(f"{what}: {MODEL_FILE} does not match the sha256 in {METADATA_FILE}; not activated")
    problem = external_data_problem(model, MODEL_FILE)
    if problem is not None:
        raise ExportError(f"{what}: {problem}; not activated")
    return model


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
