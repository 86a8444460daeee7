"""The reference pass: the sample rows and what the target's scores of them are compared with (Keras's
predictions, the float64 reference on rows at scale: export/publish/gate.py). Writes nothing."""

from __future__ import annotations

from ..frontend import float64, keras_run
from ..frontend.keras_errors import running
from ..frontend.outputs import OutputKinds
from ..ir import graph as ir
from ..publish.gate import gate_for
from ..publish.pipeline import ExportRequest, Prepared
from ..publish.samples import sample_inputs
from ..target import Capabilities
from .load import Loaded


def reference(
    loaded: Loaded, graph: ir.Graph, kinds: OutputKinds, request: ExportRequest, capabilities: Capabilities
) -> Prepared:
    """The sample rows (--samples, the model's test split, or seeded random rows, plus rows at scale), Keras's
    predictions of them, and the gate that compares the target's scores with them."""
    model = loaded.model
    samples = sample_inputs(graph, loaded.metadata, request.sample_rows, request.samples_file)
    feeds = [samples.inputs[spec.name] for spec in graph.inputs]
    with running(request.model_path):
        predicted = keras_run.run_joined(model, feeds)
    gate = gate_for(
        graph,
        samples,
        predicted,
        request.tolerance,
        capabilities.float32,
        float64.predictor(model),
        rounding_at_scale=not request.tolerance_asked,
    )
    return Prepared(graph=graph, metadata=loaded.metadata, samples=samples, gate=gate, kinds=kinds)
