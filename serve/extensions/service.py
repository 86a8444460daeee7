"""The extensions' operations as both transports call them (HTTP in routes.py, gRPC in serve/rpc): each
takes the request's arguments and returns Triton's document, or raises ScoringError. They run in the
Flask app's context, as the inference views do (serve/handling.py)."""

from __future__ import annotations

from typing import Any

from flask import current_app

from ..errors import ScoringError
from ..gate import CONTROL_OFF
from ..handling import metrics, repository
from ..repository import LoadedModel
from ..v2 import model_metadata
from .config import model_config
from .statistics import model_statistics


def config_document(name: str, version: str | None) -> dict[str, Any]:
    model = repository().get(name, version)
    settings = current_app.config
    return model_config(
        model,
        model_metadata(model)["parameters"],
        max_request_rows=int(settings["MAX_REQUEST_ROWS"]),
        max_batch=int(settings["MAX_BATCH_SIZE"]),
        delay_ms=float(settings["MAX_BATCH_DELAY_MS"]),
    )


def selected(name: str, version: str | None) -> list[LoadedModel]:
    """The versions a statistics request names: one, every version of a model, or everything loaded."""
    if name and version:
        return [repository().get(name, version)]
    if name:
        repository().get(name)  # 404 for an unknown model
        return [model for _, model in sorted(repository().models.get(name, {}).items())]
    return [
        model for _, versions in sorted(repository().models.items()) for _, model in sorted(versions.items())
    ]


def statistics_document(name: str, version: str | None) -> dict[str, Any]:
    return model_statistics(metrics().families(), selected(name, version))


def index_document(ready_only: bool) -> list[dict[str, Any]]:
    return [entry for entry in repository().index() if entry["state"] == "READY" or not ready_only]


def refuse_overrides(parameters: dict[str, Any]) -> None:
    """A load may not bring its own configuration or files: a client never writes to the repository."""
    overrides = sorted(key for key in parameters if key == "config" or key.startswith("file:"))
    if overrides:
        raise ScoringError(
            f"load parameters {overrides} are not supported: publish the model into the repository "
            "(nnsql export onnx) and load it by name",
            400,
        )


def require_model_control() -> None:
    """Loading and unloading are off unless the server was started with --model-control explicit (the
    transports check the admin key; this holds for any caller)."""
    if not current_app.extensions.get("admin_keys"):
        raise ScoringError(CONTROL_OFF, 403)


def load_model(name: str, parameters: dict[str, Any]) -> None:
    require_model_control()
    refuse_overrides(parameters)
    repository().load(name)


def unload_model(name: str) -> None:
    require_model_control()
    repository().unload(name)
