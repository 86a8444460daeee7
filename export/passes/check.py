"""The check pass: the lowered graph against what the target declares it compiles (export/target.py), and
the parity check's cost against its budget, before Keras scores anything and before anything is written."""

from __future__ import annotations

from ..ir import graph as ir
from ..publish import budget
from ..target import Capabilities


def check(graph: ir.Graph, capabilities: Capabilities, parity_seconds: float) -> None:
    """Raise for the first node, activation, size or output the target cannot compile, or for a model
    whose sample rows would take the target longer than `parity_seconds` to score."""
    capabilities.check(graph)
    budget.refuse_dear(graph, capabilities.target, parity_seconds)
