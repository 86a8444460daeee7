"""The ONNX target's compile order: check the name, the passes before the store (export/onnx/prepare.py:
the Keras model, its output kinds and class names, the sample rows and their gate), then the publish step
every target shares (export/publish/pipeline.py) on the repository store (export/onnx/store.py): the
emitter writes model.onnx into the staged version, onnxruntime's scores and the scorer's answers are
verified against Keras, and the version is switched to, or discarded with the previous one still served."""

from __future__ import annotations

from pathlib import Path

from ..frontend.model_limits import DEFAULT_LIMITS, Limits
from ..names import check_model_name
from ..publish import budget, parity
from ..publish.pipeline import ExportRequest, publish
from .capabilities import CAPABILITIES
from .prepare import prepare
from .store import RepositoryStore


def compile_onnx(request: ExportRequest, repo: Path, progress: bool) -> tuple[int, parity.ParityReport]:
    """Compile the model of `request` to ONNX and publish it as the next version of REPO/NAME, or raise
    with the previous version still active. Returns the version and its parity report."""
    check_model_name(request.name)
    store = RepositoryStore(repo, request.name, progress)
    prepared, store.conversion, request = prepare(request, store.active_classes(request.name))
    record = publish(store, request, prepared, CAPABILITIES.target)
    return store.version, record.parity


def export(
    model_path: Path,
    repo: Path,
    name: str,
    rows: int,
    tolerance: float | None = None,
    *,
    samples_file: Path | None = None,
    parity_seconds: float = budget.DEFAULT_SECONDS,
    progress: bool = False,
    trust_code: bool = False,
    size_limits: Limits = DEFAULT_LIMITS,
    output: str | None = None,
    classes: tuple[str, ...] = (),
) -> tuple[int, parity.ParityReport]:
    """`compile_onnx` with the request's fields as arguments (for programs and tests); `tolerance` None is
    the default (--tolerance not given)."""
    request = ExportRequest(
        model_path=model_path,
        name=name,
        sample_rows=rows,
        tolerance=parity.DEFAULT_TOLERANCE if tolerance is None else tolerance,
        tolerance_asked=tolerance is not None,
        samples_file=samples_file,
        parity_seconds=parity_seconds,
        trust_model_code=trust_code,
        limits=size_limits,
        output=output,
        classes=classes,
    )
    return compile_onnx(request, repo, progress)
