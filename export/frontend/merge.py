"""Keras merge layers. Add, Subtract, Multiply, Maximum, Minimum and Average of values of one shape become
chains of elementwise `Binary` nodes (Average: their sum times 1/n, an `Affine`). Concatenate joins flat
values end to end; over the last axis of sequences or images it then interleaves them position by
position (a `Gather`); over the first axis it is the flat join itself. Dot is a product of two values
(export/ir/builder.py: both gathered into one layout, a `Binary` product and a `PatchDense` of ones)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir import graph as ir
from ..ir.builder import Builder
from ..ir.layout import step_permutation
from .base import Context, converts, describe

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
    name, source = ctx.node_name(layer), describe(layer)
    nodes: list[ir.Node] = merged_masks(inputs, name, source, ctx)
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


def merged_masks(inputs: tuple[str, ...], name: str, source: str, ctx: Context) -> list[ir.Node]:
    """Keras's merge layers keep the values as they are and mask a step masked by any input (the AND of
    their masks): one mask flows on as it is, several become their product (Binary nodes)."""
    masks = list(dict.fromkeys(ctx.masks[value] for value in inputs if value in ctx.masks))
    nodes: list[ir.Node] = []
    for index, mask in enumerate(masks[1:], start=1):
        both = ir.Binary(
            name=ctx.name_for(f"{name}_mask{index}"), inputs=(masks[0], mask), op="mul", source=source
        )
        nodes.append(both)
        masks[0] = both.name
    if masks:
        ctx.masks[name] = masks[0]
    return nodes


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


KERAS_EPSILON = 1e-7  # keras.backend.epsilon(): ops.normalize's floor on a norm


@converts("Dot", produces="Gather+Binary+PatchDense+Affine+ActivationNode")
def _dot(layer: Any, inputs: tuple[str, ...], ctx: Context) -> tuple[ir.Node, ...]:
    """Keras's batch_dot: y = Σ_k a[..., k]·b[..., k] over axes[0] of a and axes[1] of b, the result's axes
    a's others then b's (two vectors give one value). normalize=True first divides each input by its
    L2 norm over that axis, floored as ops.normalize does: x · min(rsqrt(Σ x²), 1/epsilon)."""
    config = layer.get_config()
    shapes = [tuple(int(d) for d in tensor.shape[1:]) for tensor in layer.input]
    axes = config["axes"]
    pair = [axes, axes] if isinstance(axes, int) else list(axes)
    # counted with the batch axis, as Keras does; a negative axis counts from the end
    axis = [(a % (len(s) + 1) if a < 0 else a) - 1 for a, s in zip(pair, shapes, strict=True)]
    if any(a < 0 for a in axis) or shapes[0][axis[0]] != shapes[1][axis[1]]:
        raise ctx.unsupported(layer, f"Dot of shapes {shapes} over axes {axes}")
    if any(name in ctx.masks for name in inputs):
        raise ctx.unsupported(layer, "a masked input")
    build = Builder(ctx.name_for, ctx.node_name(layer), describe(layer))
    values = list(inputs)
    if config.get("normalize"):
        for k in range(2):
            values[k], shapes[k] = build.normalized(
                f"unit{k}", values[k], shapes[k], axis[k], KERAS_EPSILON**2
            )
            axis[k] = len(shapes[k]) - 1
    build.product("", values[0], shapes[0], axis[0], values[1], shapes[1], axis[1])
    return tuple(build.nodes)
