"""IR → IR passes that every target benefits from, run by the front end before any target sees the graph.

`fold_linear_chains`: a linear Dense whose result only feeds another Dense is multiplied into it
(W = W1·W2, b = b1·W2 + b2), computed and kept in float64 (ir.Weights: float32 targets round the
result, float64 targets compute what Keras in float64 does). BatchNormalization and Normalization
arrive as diagonal linear Dense nodes, so after a Dense (or before one) they cost nothing.

`fold_affine`: an Affine of per-unit values (a BatchNormalization after a convolution) after a linear
Dense or PatchDense that only it reads is multiplied into that product's kernel and bias.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np

from . import graph as ir


def consumers(nodes: list[ir.Node], output: str) -> Counter[str]:
    """How many times each value is read (the graph output counts as a reader)."""
    counts: Counter[str] = Counter(name for node in nodes for name in node.inputs)
    counts[output] += 1
    return counts


def merge(first: ir.Dense, second: ir.Dense) -> ir.Dense:
    w1, w2 = first.kernel.float64, second.kernel.float64
    bias = np.zeros(w2.shape[1]) if second.bias is None else second.bias.float64
    if first.bias is not None:
        bias = bias + first.bias.float64 @ w2
    return ir.Dense(
        name=second.name,
        inputs=first.inputs,
        kernel=ir.Weights(w1 @ w2),
        bias=ir.Weights(bias),
        activation=second.activation,
        source=second.source,
    )


def fold_once(nodes: list[ir.Node], output: str) -> list[ir.Node] | None:
    """The nodes with one linear Dense folded into the Dense that reads it, or None when none can be."""
    by_name = {node.name: node for node in nodes}
    reads = consumers(nodes, output)
    for index, node in enumerate(nodes):
        if not isinstance(node, ir.Dense) or len(node.inputs) != 1:
            continue
        first = by_name.get(node.inputs[0])
        if isinstance(first, ir.Dense) and first.activation == "linear" and reads[first.name] == 1:
            folded = [*nodes[:index], merge(first, node), *nodes[index + 1 :]]
            return [n for n in folded if n is not first]
    return None


def per_unit(values: np.ndarray, units: int) -> np.ndarray | None:
    """The per-unit values when `values` repeats one row of `units` values, else None."""
    rows = values.reshape(-1, units)
    return rows[0] if np.array_equal(rows, np.broadcast_to(rows[0], rows.shape)) else None


def fold_affine(product: ir.Dense | ir.PatchDense, affine: ir.Affine) -> ir.Node | None:
    """A linear Dense or PatchDense followed by an Affine of per-unit values, as one product."""
    scale = per_unit(affine.scale.float64, product.units)
    shifts = np.zeros(product.units) if affine.shift is None else affine.shift.float64
    shift = per_unit(shifts, product.units)
    if scale is None or shift is None:
        return None
    bias = np.zeros(product.units) if product.bias is None else product.bias.float64
    kernel = ir.Weights(product.kernel.float64 * scale)
    return replace(product, name=affine.name, kernel=kernel, bias=ir.Weights(bias * scale + shift))


def fold_affine_once(nodes: list[ir.Node], output: str) -> list[ir.Node] | None:
    by_name, reads = {node.name: node for node in nodes}, consumers(nodes, output)
    for index, node in enumerate(nodes):
        if not isinstance(node, ir.Affine):
            continue
        product = by_name.get(node.inputs[0])
        if not isinstance(product, ir.Dense | ir.PatchDense) or product.activation != "linear":
            continue
        if reads[product.name] == 1 and (folded := fold_affine(product, node)) is not None:
            return [n for n in [*nodes[:index], folded, *nodes[index + 1 :]] if n is not product]
    return None


def fold_linear_chains(nodes: list[ir.Node], output: str) -> list[ir.Node]:
    while (folded := fold_once(nodes, output) or fold_affine_once(nodes, output)) is not None:
        nodes = folded
    return nodes
