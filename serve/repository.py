"""The model repository as the service sees it: every model and version, loaded, and kept current.

A background thread rescans REPO every `poll_seconds`; a new version directory is loaded and appears
atomically (the dict of models is replaced, never mutated), a removed one disappears. No restart needed.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnxruntime

from serve.batching import Batcher
from serve.errors import ScoringError, not_found
from serve.extensions.control import RepositoryControl
from serve.validation import InvalidVersion, bounded, check_version

LOG = logging.getLogger("serve.repository")
RunObserver = Callable[[str, int, float], None]  # model, version, seconds
NO_VERSION = "no version directory holds both model.onnx and metadata.json"


@dataclass
class LoadedModel:
    name: str
    version: int
    metadata: dict
    session: onnxruntime.InferenceSession
    batcher: Batcher | None = field(default=None, repr=False)
    on_run: RunObserver | None = field(default=None, repr=False)  # told the seconds of each session.run

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
        return sum(math.prod(bounded(spec["shape"][1:])) for spec in self.inputs)

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        names = [spec["name"] for spec in self.outputs]
        started = time.perf_counter()
        outputs = dict(zip(names, self.session.run(names, feeds), strict=True))
        if self.on_run is not None:
            self.on_run(self.name, self.version, time.perf_counter() - started)
        return outputs


BatchObserver = Callable[[str, int], None]


def load_version(
    directory: Path,
    name: str,
    version: int,
    max_batch: int,
    delay_ms: float,
    observe: BatchObserver,
    observe_run: RunObserver | None = None,
) -> LoadedModel:
    """The version loaded and checked (serve.validation); InvalidVersion or the loader's error otherwise."""
    try:
        metadata = json.loads((directory / "metadata.json").read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InvalidVersion(f"metadata.json: {error}") from None
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1  # concurrency comes from batching and server threads
    session = onnxruntime.InferenceSession(
        str(directory / "model.onnx"), options, providers=["CPUExecutionProvider"]
    )
    model = LoadedModel(name, version, check_version(metadata, session), session, on_run=observe_run)
    model.batcher = Batcher(
        model.run, max_batch, delay_ms, name=f"{name}/{version}", on_batch=lambda rows: observe(name, rows)
    )
    return model


def stamp_of(path: Path) -> tuple:
    """What changes when a version directory's files are replaced: their names and modification times."""
    try:
        if path.is_dir():
            return tuple(sorted((p.name, p.stat().st_mtime_ns) for p in path.iterdir()))
        return (path.stat().st_mtime_ns,)
    except OSError:
        return ()


class ModelRepository:
    def __init__(
        self,
        root: Path,
        *,
        max_batch: int = 32,
        delay_ms: float = 2.0,
        poll_seconds: float = 1.0,
        observe_batch: BatchObserver | None = None,
        observe_run: RunObserver | None = None,
        control: RepositoryControl | None = None,
    ) -> None:
        self.root = Path(root)
        self.observe_run = observe_run
        self.control = control or RepositoryControl()
        self._unloaded: frozenset[str] = frozenset()  # the control's unloaded models at the last scan
        self.observe_batch = observe_batch or (lambda name, rows: None)
        self.max_batch = max_batch
        self.delay_ms = delay_ms
        self.poll_seconds = poll_seconds
        self.models: dict[str, dict[int, LoadedModel]] = {}
        self.ready = False
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._said: dict[Path, tuple] = {}  # what was logged about a path, and when it last changed

    def say_once(self, path: Path, level: int, message: str) -> None:
        """Log about a path once per change of the path, not on every scan."""
        if self._said.get(path) != (message, stamp_of(path)):
            self._said[path] = (message, stamp_of(path))
            LOG.log(level, "%s", message)

    def version_numbers(self, model_dir: Path) -> set[int]:
        """Directories named by a plain number that hold both files; anything else is noted once."""
        numbers = set()
        for entry in model_dir.iterdir():
            if not (entry.name.isascii() and entry.name.isdigit()):
                self.say_once(entry, logging.WARNING, f"ignoring {entry}: not a version number")
            elif (entry / "metadata.json").exists() and (entry / "model.onnx").exists():
                numbers.add(int(entry.name))
        return numbers

    def present(self) -> dict[str, set[int]]:
        """Every model directory and its version numbers, unloaded models included."""
        if not self.root.is_dir():
            return {}
        models = sorted(p for p in self.root.iterdir() if p.is_dir() and not p.name.startswith("."))
        return {model_dir.name: self.version_numbers(model_dir) for model_dir in models}

    def try_load(self, name: str, number: int) -> LoadedModel | None:
        """The version, or None when it is broken; a broken version is tried again only once it changes."""
        directory = self.root / name / str(number)
        said = self._said.get(directory)
        if said is not None and said[1] == stamp_of(directory):
            return None
        try:
            model = load_version(
                directory, name, number, self.max_batch, self.delay_ms, self.observe_batch, self.observe_run
            )
        except Exception as error:  # a broken version must not stop the others
            self.say_once(directory, logging.ERROR, f"cannot load {name} version {number}: {error}")
            return None
        self._said.pop(directory, None)
        LOG.info("loaded %s version %d", name, number)
        return model

    def scan(self) -> None:
        """Load what appeared, drop what disappeared; swap the whole dict at once."""
        with self._lock:
            self._unloaded = self.control.unloaded()
            current = {name: dict(found) for name, found in self.models.items()}
            updated: dict[str, dict[int, LoadedModel]] = {}
            for name, numbers in self.present().items():
                if name in self._unloaded:
                    continue
                versions = {n: m for n, m in current.get(name, {}).items() if n in numbers}
                for number in sorted(numbers - versions.keys()):
                    loaded = self.try_load(name, number)
                    if loaded is not None:
                        versions[number] = loaded
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

    def sync(self) -> None:
        """Rescan now if a model was loaded or unloaded (by any worker) since the last scan."""
        if self.control.unloaded() != self._unloaded:
            self.scan()

    # The model repository extension (Triton's explicit model control, over a repository also polled)

    def index(self) -> list[dict]:
        """One entry per version on disk, READY or UNAVAILABLE with the reason (Triton's index form)."""
        self.sync()
        unloaded = self.control.unloaded()
        entries = []
        for name, numbers in self.present().items():
            loaded = self.models.get(name, {})
            if not numbers:
                entries.append({"name": name, "version": "", "state": "UNAVAILABLE", "reason": NO_VERSION})
            for number in sorted(numbers):
                said = self._said.get(self.root / name / str(number))
                reason = "unloaded" if name in unloaded else said[0] if said else "not loaded yet"
                ready = number in loaded
                entries.append(
                    {
                        "name": name,
                        "version": str(number),
                        "state": "READY" if ready else "UNAVAILABLE",
                        "reason": "" if ready else reason,
                    }
                )
        return entries

    def load(self, name: str, timeout: float = 60.0) -> None:
        """Serve the model's versions again, retrying broken ones; 400 with the reasons if none loads.
        (`timeout` is for multi-process servers; here the load happens in this call.)"""
        self.require_directory(name)
        self.control.load(name)
        with self._lock:  # forget failed loads: the scan tries them again
            for path in [p for p in self._said if p.parent == self.root / name]:
                del self._said[path]
        self.scan()
        if not self.models.get(name):
            reasons = [entry["reason"] for entry in self.index() if entry["name"] == name]
            raise ScoringError(f"failed to load {name!r}: {'; '.join(reasons) or NO_VERSION}", 400)

    def unload(self, name: str, timeout: float = 60.0) -> None:
        """Stop serving every version of the model, in every worker, until it is loaded again."""
        self.require_directory(name)
        self.control.unload(name)
        self.scan()

    def require_directory(self, name: str) -> None:
        present = self.present()
        if name not in present:
            raise not_found(f"no model {name!r} in the repository; models: {sorted(present)}")

    def get(self, name: str, version: str | int | None = None) -> LoadedModel:
        self.sync()
        versions = self.models.get(name)
        if not versions:
            raise not_found(f"unknown model {name!r}; models: {sorted(self.models)}")
        if version in (None, ""):
            return versions[max(versions)]
        text = str(version)
        if not (text.isascii() and text.isdigit()) or int(text) not in versions:
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
