"""The front-end pass: the loaded Keras model → the IR, with what each output means.

The layers are read first, so that an unsupported layer is named before anything else; then the outputs'
kinds, read once (from the model's layers and the loss saved in its file, or --output); then the graph.
Composite nodes are left for the lowering pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..frontend.model import to_graph, trace
from ..frontend.outputs import OutputKinds, output_kinds
from ..ir import graph as ir
from ..publish.pipeline import ExportRequest
from .load import Loaded


@dataclass(frozen=True)
class FrontEnd:
    """The IR as the front end built it, and what its outputs' kinds were read from."""

    graph: ir.Graph
    kinds: OutputKinds


def front_end(loaded: Loaded, request: ExportRequest, target: str) -> FrontEnd:
    """The model's IR for `target` (named in the errors), its output kinds read once; an output that fits
    no kind is refused in one line unless --output names it."""
    traced = trace(loaded.model, target=target)
    kinds = output_kinds(loaded.model, loaded.loss, request.output)
    graph = to_graph(traced, loaded.model, kinds.kinds, loaded.classes)
    return FrontEnd(graph=graph, kinds=kinds)
