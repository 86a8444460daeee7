"""The optimisation pass: IR → IR rewrites that every target benefits from (export/ir/passes.py: linear
chains of products folded into one, per-unit affine maps folded into the product before them)."""

from __future__ import annotations

from dataclasses import replace

from ..ir import graph as ir
from ..ir.passes import fold_linear_chains


def optimise(graph: ir.Graph) -> ir.Graph:
    """The graph with its linear chains folded; what it computes is unchanged (within float32)."""
    return replace(graph, nodes=tuple(fold_linear_chains(list(graph.nodes), graph.output)))
