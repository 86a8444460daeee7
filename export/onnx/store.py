"""The ONNX target's store: a model repository, REPO/NAME/VERSION/{model.onnx, metadata.json, check.json}.

It keeps the conventions of the database stores (export/publish/store.py): version numbers that only grow,
the new version staged beside the active one (a hidden directory), verified there, then switched to in
one step (renamed into place, and the repository's pointer follows it); a failure anywhere discards what
was staged, so the previous version keeps serving. The emitter (export/onnx/emit.py) writes the model
into the staged directory.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import ExportError
from ..registry.repository import CHECK_FILE, active_version, follow_export
from . import emit
from .fileformat import METADATA_FILE, MODEL_FILE
from .repository import publish, staging


class RepositoryStore:
    """One model of a repository: `session` stages a version and switches to it when the session ends
    without an error; inside it, `stage` converts the model, `keep` and `activate` write what the verified
    version is published with."""

    def __init__(self, repo: Path, name: str) -> None:
        self.repo, self.name = repo, name
        self.staged: Path | None = None
        self.document: dict[str, Any] = {}
        self.version = 0

    def active_classes(self) -> tuple[int, list[str]] | None:
        """The active version and its class labels (None before the first version)."""
        model_dir = self.repo / self.name
        version = active_version(model_dir) if model_dir.is_dir() else None
        if version is None:
            return None
        document = json.loads((model_dir / str(version) / METADATA_FILE).read_text())
        return version, [str(label) for label in document.get("classes", [])]

    @contextmanager
    def session(self) -> Iterator[None]:
        """A staged version, published under the next version number when the block completes (the
        switch), removed when it raises."""
        with staging(self.repo, self.name) as staged:
            self.staged = staged
            yield
            if not self.document:
                raise ExportError("internal: a version was staged but never activated")
            self.version = publish(staged, self.repo, self.name, self.document)
        follow_export(self.repo / self.name, self.version)

    @property
    def model_file(self) -> Path:
        if self.staged is None:
            raise ExportError("internal: the repository store has no staged version outside its session")
        return self.staged / MODEL_FILE

    def stage(self, model: Any, kind: str) -> Path:
        """The model converted into the staged version; returns the file."""
        emit.convert(model, self.model_file, kind=kind)
        return self.model_file

    def keep(self, check: str) -> None:
        """The answer check that activating this version later runs again (export/registry/checks.py)."""
        (self.model_file.parent / CHECK_FILE).write_text(check)

    def activate(self, document: dict[str, Any]) -> None:
        """The verified version's metadata.json content; the session writes it and switches."""
        self.document = document
