"""The small interface both backends implement; the job-control logic (control.py) is written once."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from nnsql.text import printable


class Phase(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


@dataclass(frozen=True)
class RunSpec:
    """What to run: the same for every backend."""

    run_id: str
    script: Path
    args: tuple[str, ...]
    workers: int
    run_dir: Path  # runs/<run-id>/ on this machine: logs, timing, the collected model
    shared_dir: str  # where every worker sees the same files (BackupAndRestore, outputs)
    env: dict[str, str] = field(default_factory=dict)
    ps: int = 0  # parameter servers (parameter-server training: a chief, the workers, then the ps)

    @property
    def tasks(self) -> int:
        """Processes or pods of one attempt, numbered 0.. (task 0 is the chief, whose log is streamed)."""
        return self.workers + (1 + self.ps if self.ps else 0)


@dataclass(frozen=True)
class WorkerStatus:
    index: int
    phase: Phase
    detail: str = ""


class Backend(Protocol):
    name: str

    def start(self, spec: RunSpec, attempt: int) -> None:
        """Start all N workers of one attempt."""

    def status(self, spec: RunSpec) -> list[WorkerStatus]:
        """One entry per worker of the current attempt."""

    def logs(self, spec: RunSpec, index: int) -> str:
        """Everything worker `index` printed in the current attempt."""

    def stop(self, spec: RunSpec) -> None:
        """Stop every worker of the current attempt (idempotent)."""

    def collect(self, spec: RunSpec) -> Path | None:
        """Copy the chief's outputs into spec.run_dir; returns the model path when there is one."""

    def events(self, spec: RunSpec) -> str:
        """Why workers are not running (scheduling events), for a timeout message."""

    def has_backup(self, spec: RunSpec) -> bool | None:
        """Whether NNSQL_BACKUP_DIR holds anything a restarted group can resume from (None: cannot tell
        from here)."""


def collected_model(target: Path, printed: Sequence[Path] = ()) -> Path | None:
    """The model to export among what was collected into `target` (runs/<id>/model/): a `.keras` file
    the chief wrote under NNSQL_OUTPUT_DIR first (a printed copy named `best.keras` never goes before
    it by name), then the models the chief printed the paths of, then an `.h5` file, then a SavedModel
    directory (what tf.keras's `model.save(path)` writes for a path without a suffix, as in TensorFlow's
    multi-worker guide)."""
    models = [path for path in printed if path.suffix or (path / "saved_model.pb").is_file()]
    saved = sorted(path.parent for path in target.glob("*/saved_model.pb"))
    own = [path for path in sorted(target.glob("*.keras")) if path not in printed]  # NNSQL_OUTPUT_DIR's
    found = own + models + sorted(target.glob("*.h5")) + saved
    return found[0] if found else None


def own_directory(path: Path) -> None:
    """`path` and its missing parents, each made without group or other write whatever the umask (a shared
    group's 002): under a run directory nobody else may write, nobody else can plant or swap anything."""
    missing = []
    while not os.path.lexists(path):
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        directory.mkdir(mode=0o755, exist_ok=True)


def own_file(path: Path) -> int:
    """A descriptor writing `path` anew, made without group or other write, never through a link."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)


def worker_umask() -> int:
    """The umask a run's processes get: the user's, without group or other write."""
    current = os.umask(0o022)
    os.umask(current)
    return current | 0o022


RECORD_BYTES = 1 << 20  # a run record holds a few hundred bytes


class RecordError(ValueError):
    """A run directory's record that is not the file this user's runs write; one line."""


def write_record(run_dir: Path, **fields: object) -> None:
    """Merge fields into runs/<id>/run.json (backend, workers, state, timing...).

    The run's supervisor and the user's session (`stop()`, a notebook's `wait()`) write and read it at the
    same time: the merge holds a lock on the run directory itself, and the new text replaces the file at
    once (written beside it under a name nobody can guess, then renamed), so that a reader never sees a
    file half-written. No name in the directory is opened through a link or waited on: whoever else may
    write the directory (a shared group's umask) cannot have this user write their file, or stop the run
    with a FIFO."""
    own_directory(run_dir)
    path = run_dir / "run.json"
    lock = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        record = read_json(path) if os.path.lexists(path) else {}
        record.update(fields)
        descriptor, written = tempfile.mkstemp(prefix=".run.json.", dir=run_dir)  # O_EXCL, a random name
        try:
            with os.fdopen(descriptor, "w") as out:
                out.write(json.dumps(record, indent=2, default=str) + "\n")
            os.replace(written, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(written)
            raise
    finally:
        os.close(lock)  # and the lock with it


def read_record(run_dir: Path) -> dict:
    path = run_dir / "run.json"
    if not os.path.lexists(path):
        raise FileNotFoundError(f"no run at {run_dir}")
    return read_json(path)


def read_json(path: Path) -> dict:
    """A run record, read only as a regular file of at most RECORD_BYTES: never through a link, and a
    FIFO is neither waited on nor woken (O_NONBLOCK); RecordError in one line otherwise."""
    shown = printable(str(path))
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        reason = "it is a symbolic link" if error.errno == errno.ELOOP else error.strerror
        raise RecordError(f"cannot read the run record {shown}: {reason}") from None
    with os.fdopen(descriptor, "rb") as file:
        found = os.fstat(file.fileno())
        if not stat.S_ISREG(found.st_mode) or found.st_size > RECORD_BYTES:
            raise RecordError(f"{shown} is not a run record (not a regular file, or too large); refusing it")
        try:
            record = json.loads(file.read(RECORD_BYTES + 1))
        except ValueError:
            raise RecordError(f"{shown} is not a run record (not JSON); refusing it") from None
    if not isinstance(record, dict):
        raise RecordError(f"{shown} is not a run record (not a JSON object); refusing it")
    return record
