"""The model repository extension's state: which models a client unloaded.

An unloaded model is a marker file named after it in `<state dir>/unloaded/`. Every worker process
serving the repository reads the same directory, so an unload or a load made through one worker holds in
all of them: each checks the directory before it answers (ModelRepository.sync) and on every rescan. The
state lasts until the model is loaded again or the server restarts; removing a model for good is removing
its directory from the repository.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


class RepositoryControl:
    def __init__(self, state_dir: str | Path | None = None) -> None:
        self._temporary = None
        if state_dir is None:  # one process on its own: a private directory, removed with this object
            self._temporary = tempfile.TemporaryDirectory(prefix="nnsql-serve-state-")
            state_dir = self._temporary.name
        self.directory = Path(state_dir) / "unloaded"
        self.directory.mkdir(parents=True, exist_ok=True)

    def unloaded(self) -> frozenset[str]:
        """The names of the unloaded models (a few microseconds: one small directory listing)."""
        try:
            return frozenset(os.listdir(self.directory))
        except FileNotFoundError:
            return frozenset()

    def unload(self, name: str) -> None:
        """Mark a model unloaded. `name` must be a model directory of the repository (the caller checks),
        so it is a single path segment."""
        self.marker(name).touch()

    def load(self, name: str) -> None:
        self.marker(name).unlink(missing_ok=True)

    def marker(self, name: str) -> Path:
        if not name or "/" in name or name in (".", ".."):
            raise ValueError(f"not a model directory name: {name!r}")
        return self.directory / name
