"""The small interface both backends implement; the job-control logic (control.py) is written once."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Protocol


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


def write_record(run_dir: Path, **fields: object) -> None:
    """Merge fields into runs/<id>/run.json (backend, workers, state, timing...).

    The run's supervisor and the user's session (`stop()`, a notebook's `wait()`) write and read it at the
    same time: the merge holds a lock on runs/<id>/run.lock, and the new text replaces the file at once
    (written beside it, then renamed), so that a reader never sees a file half-written."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "run.json"
    with (run_dir / "run.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        record = json.loads(path.read_text()) if path.exists() else {}
        record.update(fields)
        written = run_dir / f".run.json.{os.getpid()}"
        written.write_text(json.dumps(record, indent=2, default=str) + "\n")
        os.replace(written, path)


def read_record(run_dir: Path) -> dict:
    path = run_dir / "run.json"
    if not path.exists():
        raise FileNotFoundError(f"no run at {run_dir}")
    return json.loads(path.read_text())
