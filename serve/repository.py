"""The model repository as the service sees it: every model and version, loaded, and kept current.

A background thread rescans REPO every `poll_seconds`; a new version directory is loaded and appears
atomically (the dict of models is replaced, never mutated), a removed one disappears. No restart needed.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnxruntime

from serve.batching import Batcher
from serve.errors import not_found

LOG = logging.getLogger("serve.repository")


@dataclass
class LoadedModel:
    name: str
    version: int
    metadata: dict
    session: onnxruntime.InferenceSession
    batcher: Batcher | None = field(default=None, repr=False)

    @property
    def inputs(self) -> list[dict]:
        return self.metadata["inputs"]

    @property
    def outputs(self) -> list[dict]:
        return self.metadata["outputs"]

    @property
    def classes(self) -> list[str]:
        return self.metadata.get("classes", [])

    def input_spec(self, name: str) -> dict:
        for spec in self.inputs:
            if spec["name"] == name:
                return spec
        raise not_found(
            f"model {self.name} has no input {name!r}; inputs: {[s['name'] for s in self.inputs]}"
        )

    def row_size(self) -> int:
        return sum(int(np.prod(spec["shape"][1:])) for spec in self.inputs)

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        names = [spec["name"] for spec in self.outputs]
        return dict(zip(names, self.session.run(names, feeds), strict=True))


BatchObserver = Callable[[str, int], None]


def load_version(
    directory: Path, name: str, version: int, max_batch: int, delay_ms: float, observe: BatchObserver
) -> LoadedModel:
    metadata = json.loads((directory / "metadata.json").read_text())
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1  # concurrency comes from batching and server threads
    session = onnxruntime.InferenceSession(
        str(directory / "model.onnx"), options, providers=["CPUExecutionProvider"]
    )
    model = LoadedModel(name, version, metadata, session)
    model.batcher = Batcher(
        model.run, max_batch, delay_ms, name=f"{name}/{version}", on_batch=lambda rows: observe(name, rows)
    )
    return model


class ModelRepository:
    def __init__(
        self,
        root: Path,
        *,
        max_batch: int = 32,
        delay_ms: float = 2.0,
        poll_seconds: float = 1.0,
        observe_batch: BatchObserver | None = None,
    ) -> None:
        self.root = Path(root)
        self.observe_batch = observe_batch or (lambda name, rows: None)
        self.max_batch = max_batch
        self.delay_ms = delay_ms
        self.poll_seconds = poll_seconds
        self.models: dict[str, dict[int, LoadedModel]] = {}
        self.ready = False
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def scan(self) -> None:
        """Load what appeared, drop what disappeared; swap the whole dict at once."""
        with self._lock:
            current = {name: dict(found) for name, found in self.models.items()}
            present: dict[str, set[int]] = {}
            if self.root.is_dir():
                for model_dir in sorted(
                    p for p in self.root.iterdir() if p.is_dir() and not p.name.startswith(".")
                ):
                    present[model_dir.name] = {
                        int(v.name)
                        for v in model_dir.iterdir()
                        if v.name.isdigit() and (v / "metadata.json").exists() and (v / "model.onnx").exists()
                    }
            updated: dict[str, dict[int, LoadedModel]] = {}
            for name, numbers in present.items():
                versions = {n: m for n, m in current.get(name, {}).items() if n in numbers}
                for number in sorted(numbers - versions.keys()):
                    try:
                        versions[number] = load_version(
                            self.root / name / str(number),
                            name,
                            number,
                            self.max_batch,
                            self.delay_ms,
                            self.observe_batch,
                        )
                        LOG.info("loaded %s version %d", name, number)
                    except Exception as error:  # a broken version must not stop the others
                        LOG.error("cannot load %s version %d: %s", name, number, error)
                if versions:
                    updated[name] = versions
            for name, versions in current.items():
                for number, model in versions.items():
                    if number not in updated.get(name, {}) and model.batcher:
                        model.batcher.close()
            self.models = updated
            self.ready = True

    def start(self) -> ModelRepository:
        self.scan()
        if self.poll_seconds > 0:
            self._thread = threading.Thread(target=self._poll, name="repository-poll", daemon=True)
            self._thread.start()
        return self

    def _poll(self) -> None:
        while not self._stop.wait(self.poll_seconds):
            try:
                self.scan()
            except Exception as error:  # keep serving what is loaded
                LOG.error("repository scan failed: %s", error)

    def close(self) -> None:
        self._stop.set()
        for versions in self.models.values():
            for model in versions.values():
                if model.batcher:
                    model.batcher.close()

    def get(self, name: str, version: str | int | None = None) -> LoadedModel:
        versions = self.models.get(name)
        if not versions:
            raise not_found(f"unknown model {name!r}; models: {sorted(self.models)}")
        if version in (None, ""):
            return versions[max(versions)]
        if not str(version).isdigit() or int(version) not in versions:
            raise not_found(f"model {name!r} has no version {version!r}; versions: {sorted(versions)}")
        return versions[int(version)]

    def default(self) -> LoadedModel:
        """For /score without ?model=: 'mnist' if loaded, else the first model taking one 784-value row."""
        if not self.models:
            raise not_found("no model is loaded")
        latest = [self.get(name) for name in sorted(self.models)]
        image_models = [m for m in latest if len(m.inputs) == 1 and m.row_size() == 784]
        named = [m for m in latest if m.name == "mnist"]
        return (named or image_models or latest)[0]
