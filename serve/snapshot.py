"""A version's files as the scorer loads them: a private copy of model.onnx, checked against the sha256
its metadata.json records, so a file being rewritten (in place, truncated, half-copied, renamed over) is
never what a session runs.

The copy is taken first and the digest computed on the copy: bytes read once, in memory, that no writer
can change afterwards. onnxruntime then builds the session from those very bytes, not from the path.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nnsql.export.onnx.external_data import external_data_problem
from nnsql.export.onnx.fileformat import METADATA_FILE, MODEL_FILE

from . import tritonrepo
from .repofiles import read_regular
from .validation import InvalidVersion, NotSettled

# protobuf's bound on one message: onnxruntime cannot load a model file any larger from its bytes
MAX_MODEL_BYTES = (2 << 30) - 1


@dataclass(frozen=True)
class Snapshot:
    """The metadata and the verified bytes of one version's model."""

    metadata: Any
    model: bytes
    config: Any = None  # a Triton model's ModelConfig: the metadata is then made from it (serve.tritonrepo)


def read_metadata(directory: Path) -> Any:
    """The version's metadata; InvalidVersion saying why not, without the file's path (the repository
    index shows it to clients)."""
    try:
        return json.loads(
            read_regular(directory / METADATA_FILE, tritonrepo.MAX_METADATA_BYTES, within=directory).decode()
        )
    except UnicodeDecodeError as error:
        raise InvalidVersion(f"{METADATA_FILE}: not UTF-8 ({error.reason} at byte {error.start})") from None
    except json.JSONDecodeError as error:
        raise InvalidVersion(f"{METADATA_FILE}: not JSON ({error.msg} at line {error.lineno})") from None


def expected_digest(metadata: Any) -> str:
    digest = metadata.get("sha256") if isinstance(metadata, dict) else None
    if not isinstance(digest, str) or len(digest) != 64:
        raise InvalidVersion(f"{METADATA_FILE} holds no sha256 of {MODEL_FILE} (nnsql export onnx writes it)")
    return digest.lower()


def take(directory: Path, unchanged: Callable[[], bool] | None = None) -> Snapshot:
    """The version's metadata and a private copy of its model, whose sha256 matches the metadata's;
    InvalidVersion otherwise (a file being written, or files of two different exports). A version of a
    Triton model carries no digest: its file is read once, and its metadata comes from config.pbtxt;
    `unchanged`, asked after the copy, says whether its files are still those found settled when the
    version was planned (serve.coordination.SETTLE_SECONDS): NotSettled otherwise."""
    if tritonrepo.is_triton(directory.parent):
        config, _ = tritonrepo.read_config(directory.parent)
        model = read_model(directory / tritonrepo.model_file(config))
        if unchanged is not None and not unchanged():  # asked again once its label files are read
            raise NotSettled(f"{tritonrepo.model_file(config)} changed while it was read")
        return Snapshot(None, model, config)
    metadata = read_metadata(directory)
    expected = expected_digest(metadata)
    model = read_model(directory / MODEL_FILE)
    if hashlib.sha256(model).hexdigest() != expected:
        raise InvalidVersion(
            f"{MODEL_FILE} does not match the sha256 in {METADATA_FILE} "
            "(being written, or from another export)"
        )
    return Snapshot(metadata, model)


def read_model(path: Path) -> bytes:
    """The model file's bytes: a regular file only (a FIFO would stall the loader, /dev/zero fill it),
    no larger than a model onnxruntime can load (a sparse file of gigabytes would fill it as well), and
    holding every tensor itself: external data would be read from another file, unverified."""
    model = read_regular(path, MAX_MODEL_BYTES)
    problem = external_data_problem(model, path.name)
    if problem is not None:
        raise InvalidVersion(problem)
    return model
