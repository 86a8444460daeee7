"""The ONNX target's compile order: load the Keras model and read its output kinds once, the sample rows and
what they are compared with (the Gate, export/publish/gate.py), then in the repository store's session
(export/onnx/store.py): emit model.onnx, verify it in onnxruntime, keep the check and switch. ONNX keeps a
variable length variable and converts models the exporter's IR does not read, so it takes the Keras model
itself, not the IR, and has its own sample sets (export/onnx/samples.py)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..frontend import float64
from ..frontend.model import load_model, read_metadata
from ..frontend.model_limits import DEFAULT_LIMITS, Limits
from ..frontend.outputs import OutputKinds, output_kinds
from ..names import check_model_name
from ..publish import budget, parity
from ..publish.pipeline import describe_kind
from ..registry.carry import carried_classes
from .emit import output_names
from .repository import sha256_of
from .samples import Samples, sample_sets, scored_sets, token_inputs
from .store import RepositoryStore
from .verify import Meaning, check_parity, kept_check


def export(
    model_path: Path,
    repo: Path,
    name: str,
    rows: int,
    tolerance: float,
    *,
    samples_file: Path | None = None,
    parity_seconds: float = budget.DEFAULT_SECONDS,
    progress: bool = False,
    trust_code: bool = False,
    size_limits: Limits = DEFAULT_LIMITS,
    output: str | None = None,
    classes: tuple[str, ...] = (),
) -> tuple[int, parity.ParityReport]:
    """Compile the model at `model_path` to ONNX and publish it as the next version of REPO/NAME, or raise
    with the previous version still active. Returns the version and its parity report."""
    check_model_name(name)
    model = load_model(model_path, trust_code=trust_code, limits=size_limits)
    metadata = read_metadata(model_path)
    read = output_kinds(model, model_path, output)
    kind, units = read.kinds[0], int(model.outputs[0].shape[-1])
    given = classes or tuple(metadata.get("classes", ()))
    store = RepositoryStore(repo, name)
    labels = carried_classes(kind, units, given, store.active_classes())
    if read.note:
        print(f"note: {read.note}", file=sys.stderr)
    print(describe_kind(kind, read.evidence))
    sets = sample_sets(model, rows, metadata, samples_file, read.kinds, labels)
    # before the export, which needs a called model
    reference = float64.predictor(model)
    expected = [
        (scores, each.gate(scores, tolerance, reference)) for each, scores in scored_sets(model, sets)
    ]
    with store.session():
        staged = store.stage(model, kind)
        limits = budget.Budget(seconds=parity_seconds)
        meaning = Meaning(kind, units, labels, len(model.outputs) > 1)
        report, sample_source = check_parity(staged, sets, expected, tolerance, limits, progress, meaning)
        store.keep(kept_check(sets[0], expected[0], report, meaning))
        verified = Verified(report, sample_source, read, labels, sha256_of(staged))
        store.activate(document(model, model_path, metadata, sets, verified))
    return store.version, report


@dataclass(frozen=True)
class Verified:
    """What the published version's metadata.json says of its check and its meaning."""

    report: parity.ParityReport
    sample_source: str
    kinds: OutputKinds
    classes: tuple[str, ...]
    sha256: str


def document(
    model: Any, model_path: Path, metadata: dict[str, Any], sets: list[Samples], verified: Verified
) -> dict[str, Any]:
    """The version's metadata.json: inputs, outputs, output kinds, classes, sha256, parity, training's."""
    report, kind = verified.report, verified.kinds.kinds[0]
    return {
        "inputs": [
            {"name": t.name, "datatype": "FP32", "shape": [-1, *[dimension(d) for d in t.shape[1:]]]}
            for t in model.inputs
        ],
        "outputs": [
            {"name": name, "datatype": "FP32", "shape": [-1, int(tensor.shape[-1])]}
            for name, tensor in zip(output_names(model, kind), model.outputs, strict=True)
        ],
        "output_kinds": list(verified.kinds.kinds),
        "token_inputs": token_inputs(model, sets),
        "classes": list(verified.classes),
        "sha256": verified.sha256,
        "source": str(model_path),
        "parity": {**report.as_dict(), "bounds": report.bounds(), "sample_source": verified.sample_source},
        "training": metadata,
    }


def dimension(size: int | None) -> int:
    """A dimension as the repository document states it: -1 where it varies (KServe V2's convention)."""
    return -1 if size is None else int(size)
