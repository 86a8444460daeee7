"""Keras merge layers. Add, Subtract, Multiply, Maximum, Minimum and Average of values of one shape become
chains of elementwise `Binary` nodes (Average: their sum times 1/n, an `Affine`). Concatenate joins flat
values end to end; over the last axis of sequences or images it then interleaves them position by
position (a `Gather`); over the first axis it is the flat join itself. Dot of two vectors is a `Binary`
product summed by a Dense of ones."""

from __future__ import annotations

from typing import Any

import numpy as np

from export import ir
from export.keras_frontend import Context, converts, describe
from export.layout import step_permutation

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


@converts("Concatenate", produces="Concatenate+Gather")
def _concatenate(layer: Any, inputs: tuple[str, ...], ctx: Context) -> ir.Node | tuple[ir.Node, ...]:
    shapes = [tuple(int(d) for d in tensor.shape[1:]) for tensor in layer.input]
    rank, axis = len(shapes[0]), layer.get_config().get("axis", -1)
    axis = axis + rank + 1 if axis < 0 else axis  # counted with the batch axis, as Keras does
    if any(name in ctx.masks for name in inputs) or any(len(shape) != rank for shape in shapes):
        raise ctx.unsupported(layer, f"concatenation of shapes {shapes} with a mask or of unequal ranks")
    name, source = ctx.node_name(layer), describe(layer)
    if rank == 1 or axis == 1:  # flat vectors, or whole blocks of the first axis: the flat join
        return ir.Concatenate(name=name, inputs=inputs, source=source)
    if axis != rank or len({shape[:-1] for shape in shapes}) != 1:
        raise ctx.unsupported(layer, f"concatenation over axis {axis} of shapes {shapes}")
    joined = ir.Concatenate(name=ctx.name_for(f"{name}_joined"), inputs=inputs, source=source)
    positions = int(np.prod(shapes[0][:-1]))
    order = ir.Weights(step_permutation(positions, 0, tuple(shape[-1] for shape in shapes)))
    return joined, ir.Gather(name=name, inputs=(joined.name,), indices=order, source=source)


@converts("Dot", produces="Binary+Dense")
def _dot(layer: Any, inputs: tuple[str, ...], ctx: Context) -> tuple[ir.Node, ...]:
    config = layer.get_config()
    shapes = [tuple(int(d) for d in tensor.shape[1:]) for tensor in layer.input]
    if any(len(shape) != 1 for shape in shapes) or shapes[0] != shapes[1] or config.get("normalize"):
        raise ctx.unsupported(layer, f"Dot of shapes {shapes}, normalize={config.get('normalize')} (vectors)")
    name, source = ctx.node_name(layer), describe(layer)
    product = ir.Binary(name=ctx.name_for(f"{name}_products"), inputs=inputs, op="mul", source=source)
    total = ir.Weights(np.ones((shapes[0][0], 1)))
    return product, ir.Dense(name=name, inputs=(product.name,), kernel=total, source=source)
