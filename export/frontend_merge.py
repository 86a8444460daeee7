"""Keras merge layers over values of one shape: Add, Subtract, Multiply, Maximum, Minimum and Average
become chains of elementwise `Binary` nodes (Average: their sum times 1/n, an `Affine`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from export import ir
from export.keras_frontend import Context, converts, describe

OPS = {
    "Add": "add",
    "Subtract": "sub",
    "Multiply": "mul",
    "Maximum": "max",
    "Minimum": "min",
    "Average": "add",
}


@converts(*OPS, produces="Binary")
def _merge(layer: Any, inputs: tuple[str, ...], ctx: Context) -> tuple[ir.Node, ...]:
    kind = type(layer).__name__
    shapes = {tuple(tensor.shape[1:]) for tensor in layer.input}
    if len(shapes) != 1:
        raise ctx.unsupported(layer, f"inputs of shapes {sorted(shapes)} (only one shape, no broadcasting)")
    if any(name in ctx.masks for name in inputs):
        raise ctx.unsupported(layer, "a masked input")
    name, source = ctx.node_name(layer), describe(layer)
    nodes: list[ir.Node] = []
    value = inputs[0]
    for index, other in enumerate(inputs[1:], start=1):
        last = index == len(inputs) - 1 and kind != "Average"
        step = name if last else ctx.name_for(f"{name}_{index}")
        nodes.append(ir.Binary(name=step, inputs=(value, other), op=OPS[kind], source=source))
        value = step
    if kind == "Average":
        size = int(np.prod(next(iter(shapes))))
        scale = ir.Weights(np.full(size, 1.0 / len(inputs)))
        nodes.append(ir.Affine(name=name, inputs=(value,), scale=scale, source=source))
    return tuple(nodes)
