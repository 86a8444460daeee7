"""The model repository extension: the index of every model and version with its state, and loading and
unloading a model by name (Triton's explicit model control, over a repository that is also polled)."""

from __future__ import annotations

from typing import Any

from serve.errors import ScoringError, not_found
from serve.repository import ModelRepository

NO_VERSION = "no version directory holds both model.onnx and metadata.json"


def index(repository: ModelRepository, ready_only: bool = False) -> list[dict[str, Any]]:
    """One entry per version on disk: READY, or UNAVAILABLE with the reason."""
    repository.sync()
    unloaded = repository.control.unloaded()
    entries = []
    for name, numbers in repository.present().items():
        loaded = repository.models.get(name, {})
        if not numbers:
            entries.append({"name": name, "version": "", "state": "UNAVAILABLE", "reason": NO_VERSION})
        for number in sorted(numbers):
            if number in loaded:
                state, reason = "READY", ""
            elif name in unloaded:
                state, reason = "UNAVAILABLE", "unloaded"
            else:
                state, reason = "UNAVAILABLE", repository.problem(name, number) or "not loaded yet"
            entries.append({"name": name, "version": str(number), "state": state, "reason": reason})
    return [entry for entry in entries if entry["state"] == "READY" or not ready_only]


def refuse_overrides(parameters: dict[str, Any]) -> None:
    """A load may not bring its own configuration or files: a client never writes to the repository."""
    overrides = sorted(key for key in parameters if key == "config" or key.startswith("file:"))
    if overrides:
        raise ScoringError(
            f"load parameters {overrides} are not supported: publish the model into the repository "
            "(python -m export.onnx) and load it by name",
            400,
        )


def load(repository: ModelRepository, name: str, parameters: dict[str, Any]) -> None:
    """Serve the model's versions again (and retry broken ones); 400 with the reasons if none loads."""
    refuse_overrides(parameters)
    if name not in repository.present():
        raise not_found(f"no model {name!r} in the repository; models: {sorted(repository.present())}")
    repository.control.load(name)
    repository.retry(name)
    repository.scan()
    if not repository.models.get(name):
        reasons = [entry["reason"] for entry in index(repository) if entry["name"] == name]
        raise ScoringError(f"failed to load {name!r}: {'; '.join(reasons) or NO_VERSION}", 400)


def unload(repository: ModelRepository, name: str) -> None:
    """Stop serving every version of the model, in every worker, until it is loaded again."""
    if name not in repository.present():
        raise not_found(f"no model {name!r} in the repository; models: {sorted(repository.present())}")
    repository.control.unload(name)
    repository.scan()
