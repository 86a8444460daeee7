"""What the ONNX target compiles, for the support matrix. ONNX does not go through the IR: Keras's own
exporter (tf2onnx) converts the Keras graph, so it takes every layer the front end knows (and more);
tests/export/test_zoo.py and the parity grid prove it layer by layer with onnxruntime."""

from __future__ import annotations

from ..ir import graph as ir
from ..target import Capabilities, register


def node_kinds() -> frozenset[str]:
    """Every IR node kind: each IR node stands for Keras layers that the exporter converts itself."""
    kinds: set[str] = set()
    pending = list(ir.Node.__subclasses__())
    while pending:
        kind = pending.pop()
        kinds.add(kind.__name__)
        pending.extend(kind.__subclasses__())
    return frozenset(kinds)


CAPABILITIES = register(Capabilities(target="onnx", node_kinds=node_kinds(), float32=True))
