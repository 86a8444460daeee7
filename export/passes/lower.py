"""The lowering pass: composite IR nodes → the primitives every target implements once
(export/ir/lowering.py: a recurrent layer becomes a Scan over a body of primitives)."""

from __future__ import annotations

from dataclasses import replace

from ..ir import graph as ir
from ..ir import lowering


def lower(graph: ir.Graph) -> ir.Graph:
    """The graph with every composite node replaced by its primitives."""
    return replace(graph, nodes=tuple(lowering.lower(list(graph.nodes))))
