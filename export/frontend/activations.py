"""Keras activation layers with parameters, lowered to primitives: ReLU (max_value, negative_slope,
threshold), LeakyReLU, PReLU (learned slopes) and ELU (alpha).

A slope a below zero is relu(x) − a·relu(−x); a ceiling m is m − relu(m − y); an ELU with alpha α is
relu(x) + α·(elu(x) − relu(x)). Each uses `Affine` (a constant scale and shift per value), `Binary`
and the relu and elu activations, so every target runs them without code of its own.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir import graph as ir
from .base import Context, converts, describe


class Lowered:
    """Builds one layer's nodes, named `<layer>_<role>`, the last one taking the layer's own name."""

    def __init__(self, layer: Any, ctx: Context) -> None:
        self.name, self.source, self.ctx = ctx.node_name(layer), describe(layer), ctx
        self.size = int(np.prod([int(d) for d in layer.input.shape[1:]]))
        self.nodes: list[ir.Node] = []

    def add(self, node: ir.Node) -> str:
        self.nodes.append(node)
        return node.name

    def role(self, role: str) -> str:
        return self.ctx.name_for(f"{self.name}_{role}")

    def affine(self, role: str, x: str, scale: Any, shift: float | None = None) -> str:
        scale_vector = ir.Weights(np.broadcast_to(np.asarray(scale, dtype=np.float64), (self.size,)).copy())
        shift_vector = None if shift is None else ir.Weights(np.full(self.size, shift))
        node = ir.Affine(name=role, inputs=(x,), scale=scale_vector, shift=shift_vector, source=self.source)
        return self.add(node)

    def activate(self, role: str, x: str, activation: str) -> str:
        return self.add(ir.ActivationNode(name=role, inputs=(x,), activation=activation, source=self.source))

    def binary(self, role: str, op: str, a: str, b: str) -> str:
        return self.add(ir.Binary(name=role, inputs=(a, b), op=op, source=self.source))

    def leaky(self, x: str, slope: Any, last: bool) -> str:
        """relu(x) − slope·relu(−x)."""
        negative = self.activate(self.role("negative"), self.affine(self.role("flip"), x, -1.0), "relu")
        scaled = self.affine(self.role("slope"), negative, -np.asarray(slope, dtype=np.float64))
        positive = self.activate(self.role("positive"), x, "relu")
        return self.binary(self.name if last else self.role("leaky"), "add", positive, scaled)

    def thresholded(self, x: str, threshold: float, slope: float, limit: float | None) -> str:
        """Keras 3's relu with a threshold θ: x·[x > θ], clipped to [0, limit] when there is one, minus
        slope·relu(θ − x)."""
        above = self.activate(
            self.role("above"), self.affine(self.role("shifted"), x, 1.0, -threshold), "step"
        )
        last = limit is None and not slope
        kept = self.binary(self.name if last else self.role("kept"), "mul", above, x)
        if limit is not None:
            kept = self.ceiling(self.activate(self.role("floor"), kept, "relu"), limit, last=not slope)
        if not slope:
            return kept
        under = self.activate(
            self.role("under"), self.affine(self.role("distance"), x, -1.0, threshold), "relu"
        )
        return self.binary(self.name, "add", kept, self.affine(self.role("slope"), under, -slope))

    def ceiling(self, y: str, limit: float, last: bool = True) -> str:
        """min(y, limit) = limit − relu(limit − y)."""
        below = self.activate(self.role("below"), self.affine(self.role("gap"), y, -1.0, limit), "relu")
        return self.affine(self.name if last else self.role("ceiling"), below, -1.0, limit)


@converts("ReLU", produces="ActivationNode+Affine+Binary")
def _relu(layer: Any, inputs: tuple[str, ...], ctx: Context) -> ir.Node | tuple[ir.Node, ...]:
    config = layer.get_config()
    slope, limit = float(config.get("negative_slope") or 0.0), config.get("max_value")
    # Keras compares the input with the threshold cast to the layer's float32: a float32 input equal to
    # float32(0.1) is not above it there, and was above the float64 0.1 here, on every target
    threshold = float(np.float32(config.get("threshold") or 0.0))
    if threshold != 0.0:
        lowered = Lowered(layer, ctx)
        lowered.thresholded(inputs[0], threshold, slope, None if limit is None else float(limit))
        return tuple(lowered.nodes)
    if not slope and limit is None:
        return ir.ActivationNode(
            name=ctx.node_name(layer), inputs=inputs, activation="relu", source=describe(layer)
        )
    if not slope and float(limit) == 6.0:
        return ir.ActivationNode(
            name=ctx.node_name(layer), inputs=inputs, activation="relu6", source=describe(layer)
        )
    lowered = Lowered(layer, ctx)
    value = lowered.leaky(inputs[0], slope, last=limit is None)
    if limit is not None:
        lowered.ceiling(value, float(limit))
    return tuple(lowered.nodes)


@converts("LeakyReLU", produces="ActivationNode+Affine+Binary")
def _leaky_relu(layer: Any, inputs: tuple[str, ...], ctx: Context) -> tuple[ir.Node, ...]:
    config = layer.get_config()
    slope = config.get("negative_slope", config.get("alpha", 0.3))  # tf.keras calls it alpha
    lowered = Lowered(layer, ctx)
    lowered.leaky(inputs[0], float(slope), last=True)
    return tuple(lowered.nodes)


@converts("PReLU", produces="ActivationNode+Affine+Binary")
def _prelu(layer: Any, inputs: tuple[str, ...], ctx: Context) -> tuple[ir.Node, ...]:
    """Learned slopes, broadcast over the axes Keras shares them on, flattened like the value."""
    shape = tuple(int(d) for d in layer.input.shape[1:])
    slopes = np.broadcast_to(np.asarray(layer.alpha.numpy(), dtype=np.float64), shape).ravel()
    lowered = Lowered(layer, ctx)
    lowered.leaky(inputs[0], slopes, last=True)
    return tuple(lowered.nodes)


@converts("ELU", produces="ActivationNode+Affine+Binary")
def _elu(layer: Any, inputs: tuple[str, ...], ctx: Context) -> ir.Node | tuple[ir.Node, ...]:
    alpha = float(layer.get_config().get("alpha", 1.0))
    if alpha == 1.0:
        return ir.ActivationNode(
            name=ctx.node_name(layer), inputs=inputs, activation="elu", source=describe(layer)
        )
    lowered = Lowered(layer, ctx)
    positive = lowered.activate(lowered.role("positive"), inputs[0], "relu")
    elu = lowered.activate(lowered.role("elu"), inputs[0], "elu")
    negative = lowered.affine(
        lowered.role("alpha"), lowered.binary(lowered.role("negative"), "sub", elu, positive), alpha
    )
    lowered.binary(lowered.name, "add", positive, negative)
    return tuple(lowered.nodes)
