"""The ONNX target's store: a model repository, REPO/NAME/VERSION/{model.onnx, metadata.json, check.json},
through the lifecycle every target shares (export/publish/pipeline.py's `publish`).

It keeps the conventions of the database stores (export/publish/store.py): version numbers that only grow,
the new version staged beside the active one (a hidden directory), verified there, then switched to in
one step (renamed into place, and the repository's pointer follows it); a failure anywhere discards what
was staged, so the previous version keeps serving. `stage` is the emitter (export/onnx/emit.py) writing
the model into the staged directory; `scores` and `answers` are onnxruntime's and what the scorer
answers from them (export/onnx/fileformat.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ExportError
from ..publish.pipeline import Signature, VersionRecord
from ..registry.checks import StoredCheck
from ..registry.repository import CHECK_FILE, active_version, follow_export, metadata_of
from . import emit
from . import fileformat as scorer
from .prepare import Conversion
from .repository import publish, sha256_of, staging, versions
from .runtime import declared_inputs, load_session, session_predict


class RepositoryStore:
    """One model of a repository (see the module). `version` is the number the session published."""

    kernel = "onnxruntime"
    # The scorer answers (class, label, labels) from the first output: checking them costs no more runs.
    answers_from_scores = True

    def __init__(self, repo: Path, name: str, progress: bool = False) -> None:
        self.repo, self.name, self.progress = repo, name, progress
        self.conversion: Conversion | None = None  # prepared once the active version's classes are read
        self.staged: Path | None = None
        self.session_: Any = None
        self.signature: Signature | None = None
        self.document: dict[str, Any] = {}
        self.version = 0

    def active_classes(self, name: str) -> tuple[int, list[str]] | None:
        """The active version and its class labels (None before the first version)."""
        model_dir = self.repo / name
        version = active_version(model_dir) if model_dir.is_dir() else None
        if version is None:
            return None
        classes = metadata_of(model_dir, version).get("classes", [])
        if not isinstance(classes, list):
            raise ExportError(f"version {version}'s class names cannot be kept: not a list; pass --classes")
        return version, [str(label) for label in classes]

    @contextmanager
    def session(self) -> Iterator[None]:
        """A staged version, published under the next free version number when the block completes (the
        switch), removed when it raises."""
        with staging(self.repo, self.name) as staged:
            self.staged = staged
            yield
            if not self.document:
                raise ExportError("internal: a version was staged but never activated")
            self.version = publish(staged, self.repo, self.name, self.document)
        follow_export(self.repo / self.name, self.version)

    def next_version(self, name: str) -> int:
        """The number the version will most likely take (the rename at the end takes the free one)."""
        return (versions(self.repo / name) or [0])[-1] + 1

    @property
    def model_file(self) -> Path:
        if self.staged is None:
            raise ExportError("internal: the repository store has no staged version outside its session")
        return self.staged / scorer.MODEL_FILE

    def stage(self, name: str, version: int, graph: Signature) -> None:
        """The Keras model converted into the staged version, and an onnxruntime session on it."""
        if self.conversion is None:
            raise ExportError("internal: the repository store was opened without a model to convert")
        emit.convert(self.conversion.model, self.model_file, kind=graph.kind)
        self.session_, self.signature = load_session(self.model_file), graph

    def register(self, record: VersionRecord) -> None:
        """Nothing: a repository's versions are its directories, written when the session switches."""

    def scores(self, name: str, inputs: dict[str, np.ndarray]) -> np.ndarray:
        return session_predict(self.session_, inputs)

    def answers(
        self, name: str, inputs: dict[str, np.ndarray], functions: tuple[str, ...]
    ) -> dict[str, list[Any]]:
        """What the scorer answers for these rows: read from onnxruntime's first output by its kind."""
        graph = self.signature
        assert graph is not None, "stage comes first"
        first = self.scores(name, inputs)[:, : graph.first_size]
        answered = scorer.answers(graph.kind, first, list(graph.classes))
        return {function: answered[function] for function in functions}

    def keep(self, record: VersionRecord, check: StoredCheck) -> None:
        """The answer check that activating this version later runs again (export/registry/checks.py)."""
        (self.model_file.parent / CHECK_FILE).write_text(check.document())

    def activate(self, record: VersionRecord) -> None:
        """The verified version's metadata.json; the session writes it and switches."""
        assert self.conversion is not None, "stage comes first"
        report, base = record.parity, self.conversion.document
        self.document = {
            **{key: base[key] for key in ("outputs", "output_kinds", "token_inputs")},
            "inputs": declared_inputs(self.session_, base["inputs"]),
            "classes": json.loads(record.classes),
            "sha256": sha256_of(self.model_file),
            "source": base["source"],
            "parity": {**report.as_dict(), "bounds": report.bounds(), "sample_source": record.sample_source},
            "training": base["training"],
        }

    def load_test_data(self, name: str, features: np.ndarray, labels: np.ndarray) -> None:
        raise ExportError("--load-test-data applies to database targets only")

    def close(self) -> None:
        """Nothing to close: the session's files are written or removed when it ends."""
