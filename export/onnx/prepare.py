"""The ONNX target's passes before its store: load the Keras model and read its output kinds once, the class
names (given, or kept from the active version), the sample sets and what each is compared with (the Gate,
export/publish/gate.py). Writes nothing: export/publish/pipeline.py's `publish` then stages, verifies and
switches the version in the repository store (export/onnx/store.py).

ONNX converts the Keras model itself, keeps a variable length variable and takes models the exporter's IR
does not read. Where the IR reads the model, its graph says what the scores mean and its sample rows
include rows at scale; elsewhere `KerasSignature` says it from the Keras model, and a variable length is
sampled at several lengths.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from typing import Any

from ..frontend import float64
from ..frontend.keras_errors import running
from ..frontend.model import open_model
from ..frontend.outputs import OutputKinds, output_kinds
from ..ir import graph as ir
from ..publish.pipeline import Checked, ExportRequest, Signature, describe_kind
from ..registry.carry import carried_classes
from .emit import output_names
from .samples import Samples, sample_sets, scored_sets, token_inputs


@dataclass(frozen=True)
class KerasSignature:
    """What the scores of a model the IR does not read mean, read from Keras: the first output's kind and
    size, the class names, each output's columns when there are several. Its inputs and digest are left
    empty: the repository document states the Keras model's inputs and the model file's sha256."""

    kind: str
    classes: tuple[str, ...]
    first_size: int
    outputs: tuple[ir.OutputSpec, ...] = ()
    inputs: tuple[ir.TensorSpec, ...] = ()

    def sha256(self) -> str:
        return ""


@dataclass(frozen=True)
class Conversion:
    """What the store converts and what the version's metadata.json says beside the check's figures."""

    model: Any
    document: dict[str, Any]  # inputs, outputs, output_kinds, token_inputs, source, training


def prepare(
    request: ExportRequest, previous: tuple[int, list[str]] | None
) -> tuple[Checked[Signature], Conversion, ExportRequest]:
    """Every pass before the store (see the module); `previous` is the active version and its class
    names. Returns the prepared check, the conversion, and the request with the class names it settled
    (so publishing does not carry them over a second time)."""
    opened = open_model(
        request.model_path,
        trust_code=request.trust_model_code,
        limits=request.limits,
        as_float32=request.as_float32,
    )
    model = opened.model
    metadata = opened.metadata  # from the same directory, at the moment the model was copied
    read = output_kinds(model, opened.loss, request.output)
    kind, units = read.kinds[0], int(model.outputs[0].shape[-1])
    given = request.classes or tuple(metadata.get("classes", ()))
    labels = carried_classes(kind, units, given, previous)
    if read.note:
        print(f"note: {read.note}", file=sys.stderr)
    print(describe_kind(kind, read.evidence))
    rows, samples = request.sample_rows, request.samples_file
    sets = sample_sets(model, rows, metadata, samples, read.kinds, labels)
    reference = float64.predictor(model)  # before the export, which needs a called model
    with running(request.model_path):
        scored = scored_sets(model, sets)
    asked = request.tolerance_asked
    gates = [
        (each.rows, each.gate(scores, request.tolerance, reference, not asked)) for each, scores in scored
    ]
    (last, gate), earlier = gates[-1], tuple(gates[:-1])
    signature = sets[0].graph or keras_signature(model, read, labels)
    checked = Checked[Signature](signature, metadata, last, gate, read, also=earlier)
    conversion = Conversion(model, document(model, request, metadata, sets, read))
    return checked, conversion, replace(request, classes=labels)


def keras_signature(model: Any, read: OutputKinds, classes: tuple[str, ...]) -> KerasSignature:
    """What a model the IR does not read answers, from its Keras outputs (see KerasSignature)."""
    sizes = [int(tensor.shape[-1]) for tensor in model.outputs]
    names = output_names(model, read.kinds[0])
    starts = [sum(sizes[:index]) for index in range(len(sizes))]
    outputs = tuple(
        ir.OutputSpec(name, start, start + size, kind)
        for name, start, size, kind in zip(names, starts, sizes, read.kinds, strict=True)
    )
    return KerasSignature(read.kinds[0], classes, sizes[0], outputs if len(outputs) > 1 else ())


def document(
    model: Any, request: ExportRequest, metadata: dict[str, Any], sets: list[Samples], read: OutputKinds
) -> dict[str, Any]:
    """The version's metadata.json but for what the check decides (classes, sha256, parity): inputs,
    outputs, output kinds, token inputs, the source file and training's metadata."""
    kind = read.kinds[0]
    return {
        "inputs": [
            {"name": t.name, "datatype": "FP32", "shape": [-1, *[dimension(d) for d in t.shape[1:]]]}
            for t in model.inputs
        ],
        "outputs": [
            {"name": name, "datatype": "FP32", "shape": [-1, int(tensor.shape[-1])]}
            for name, tensor in zip(output_names(model, kind), model.outputs, strict=True)
        ],
        "output_kinds": list(read.kinds),
        "token_inputs": token_inputs(model, sets),
        "source": str(request.model_path),
        "training": metadata,
    }


def dimension(size: int | None) -> int:
    """A dimension as the repository document states it: -1 where it varies (KServe V2's convention)."""
    return -1 if size is None else int(size)
