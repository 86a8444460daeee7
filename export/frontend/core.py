"""Keras's core layers (Dense, Activation, Softmax, Dropout, Flatten, TimeDistributed, ...) as IR nodes."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir import graph as ir
from ..ir.lowering import grouped_softmax
from .base import Context, activation_name, converts, describe, input_tensor

# Activations over a vector that the front end builds from primitives (lowering.grouped_softmax).
LOWERED_ACTIVATIONS = ("log_softmax",)


@converts("Dense", produces="Dense+PatchDense")
def _dense(layer: Any, inputs: tuple[str, ...], ctx: Context) -> ir.Node | tuple[ir.Node, ...]:
    """A Dense; over a sequence (steps, features), one Dense per step: a PatchDense over the steps, which
    passes the sequence's mask on as Keras does."""
    rank = len(layer.input.shape)
    if rank == 3:
        return per_step_dense(layer, layer, inputs, ctx)
    kernel = ir.Weights(np.asarray(layer.kernel.numpy()))
    bias = ir.Weights(np.asarray(layer.bias.numpy())) if uses_bias(layer) else None
    if rank != 2:
        raise ctx.unsupported(layer, f"Dense over a rank-{rank} input")
    name, activation = ctx.node_name(layer), activation_name(layer, ctx, lowered=LOWERED_ACTIVATIONS)
    if activation == "log_softmax":  # the logits, then log_softmax from primitives
        logits = ir.Dense(
            name=ctx.name_for(f"{name}_logits"),
            inputs=inputs,
            kernel=kernel,
            bias=bias,
            source=describe(layer),
        )
        return (logits, *softmax_nodes(ctx, name, logits.name, (kernel.shape[1],), "log_softmax", layer))
    return ir.Dense(
        name=name, inputs=inputs, kernel=kernel, bias=bias, activation=activation, source=describe(layer)
    )


def uses_bias(layer: Any) -> bool:
    """A layer's use_bias; a Dense that tf.keras revived from a SavedModel without its class (its
    activation a TensorFlow function, such as 'log_softmax_v2') keeps it in its config only."""
    return bool(getattr(layer, "use_bias", layer.get_config().get("use_bias", True)))


def softmax_nodes(
    ctx: Context, name: str, z: str, shape: tuple[int, ...], activation: str, layer: Any
) -> tuple[ir.Node, ...]:
    """softmax or log_softmax over the last axis of a value of `shape`, named `name`."""
    size = int(np.prod(shape))
    log = activation == "log_softmax"
    return tuple(grouped_softmax(ctx.name_for, name, z, size, shape[-1], log=log, source=describe(layer)))


def per_step_dense(
    owner: Any, dense: Any, inputs: tuple[str, ...], ctx: Context
) -> ir.Node | tuple[ir.Node, ...]:
    """`dense` applied to each step of the sequence `owner` (the Dense itself, or a TimeDistributed
    around it) reads; the sequence's mask flows on, as in Keras."""
    activation = activation_name(dense, ctx, lowered=LOWERED_ACTIVATIONS)
    steps = input_tensor(owner).shape[1]
    if steps is None:
        raise ctx.unsupported(owner, "a sequence of variable length")
    name = ctx.node_name(owner)
    grouped = activation in ("softmax", "log_softmax")  # over each step's features: from primitives
    node = ir.PatchDense(
        name=ctx.name_for(f"{name}_logits") if grouped else name,
        inputs=inputs,
        kernel=ir.Weights(np.asarray(dense.kernel.numpy())),
        bias=ir.Weights(np.asarray(dense.bias.numpy())) if uses_bias(dense) else None,
        activation="linear" if grouped else activation,
        patches=int(steps),
        source=describe(owner),
    )
    if inputs[0] in ctx.masks:
        ctx.masks[name] = ctx.masks[inputs[0]]
    if not grouped:
        return node
    shape = (int(steps), int(dense.kernel.shape[1]))
    return (node, *softmax_nodes(ctx, name, node.name, shape, activation, owner))


@converts("TimeDistributed", produces="PatchDense")
def _time_distributed(layer: Any, inputs: tuple[str, ...], ctx: Context) -> ir.Node | tuple[ir.Node, ...]:
    if type(layer.layer).__name__ != "Dense" or len(input_tensor(layer).shape) != 3:
        raise ctx.unsupported(
            layer, f"TimeDistributed({type(layer.layer).__name__}) (only Dense over sequences)"
        )
    return per_step_dense(layer, layer.layer, inputs, ctx)


@converts("Activation", produces="ActivationNode+GroupMax+Gather+Binary+PatchDense")
def _activation(layer: Any, inputs: tuple[str, ...], ctx: Context) -> ir.Node | tuple[ir.Node, ...] | str:
    name = activation_name(layer, ctx, lowered=LOWERED_ACTIVATIONS)
    if name == "linear":
        return inputs[0]
    return activation_nodes(layer, inputs, ctx, name)


def activation_nodes(
    layer: Any, inputs: tuple[str, ...], ctx: Context, activation: str
) -> ir.Node | tuple[ir.Node, ...]:
    """An activation over the layer's input; softmax over the last axis of a sequence or an image, and
    log_softmax, are built from primitives (a flat softmax is every target's own)."""
    shape = tuple(int(d) for d in input_tensor(layer).shape[1:])
    if activation == "log_softmax" or (activation == "softmax" and len(shape) > 1):
        return softmax_nodes(ctx, ctx.node_name(layer), inputs[0], shape, activation, layer)
    return ir.ActivationNode(
        name=ctx.node_name(layer), inputs=inputs, activation=activation, source=describe(layer)
    )


@converts("Gelu", produces="ActivationNode")
def _gelu_op(layer: Any, inputs: tuple[str, ...], ctx: Context) -> ir.Node:
    """`keras.ops.gelu(x, approximate=...)` applied in a functional model: an operation in the graph,
    saved with the model, not a layer."""
    activation = "gelu_tanh" if getattr(layer, "approximate", False) else "gelu"
    return ir.ActivationNode(
        name=ctx.node_name(layer), inputs=inputs, activation=activation, source=describe(layer)
    )


@converts("Softmax", produces="ActivationNode+GroupMax+Gather+Binary+PatchDense")
def _softmax(layer: Any, inputs: tuple[str, ...], ctx: Context) -> ir.Node | tuple[ir.Node, ...]:
    axis = layer.get_config().get("axis", -1)
    shape = tuple(int(d) for d in input_tensor(layer).shape[1:])
    if isinstance(axis, list) and len(axis) == 1:
        axis = axis[0]
    if not isinstance(axis, int) or not -len(shape) <= axis <= len(shape) or axis == 0:
        raise ctx.unsupported(layer, f"softmax over axis {axis} (one axis of the row)")
    moved = (axis if axis > 0 else len(shape) + 1 + axis) - 1  # the axis among the row's own
    if moved == len(shape) - 1:
        return activation_nodes(layer, inputs, ctx, "softmax")
    return softmax_over_axis(layer, inputs[0], ctx, shape, moved)


def softmax_over_axis(
    layer: Any, x: str, ctx: Context, shape: tuple[int, ...], axis: int
) -> tuple[ir.Node, ...]:
    """Softmax over a middle axis: a Gather moves that axis last, the grouped softmax runs, and a second
    Gather puts every value back in its place."""
    name, source = ctx.node_name(layer), describe(layer)
    order = [*(a for a in range(len(shape)) if a != axis), axis]
    moved = np.arange(int(np.prod(shape))).reshape(shape).transpose(order).ravel()
    forward = ir.Gather(
        name=ctx.name_for(f"{name}_moved"),
        inputs=(x,),
        indices=ir.Weights(moved.astype(np.float32)),
        source=source,
    )
    inner = ctx.name_for(f"{name}_grouped")
    grouped = softmax_nodes(ctx, inner, forward.name, tuple(shape[a] for a in order), "softmax", layer)
    back = np.argsort(moved).astype(np.float32)
    restored = ir.Gather(name=name, inputs=(inner,), indices=ir.Weights(back), source=source)
    return (forward, *grouped, restored)


@converts("Dropout", "GaussianDropout", "GaussianNoise", "AlphaDropout", produces="identity")
def _identity(layer: Any, inputs: tuple[str, ...], ctx: Context) -> str:
    return inputs[0]  # inference-time identity


@converts("Flatten", produces="Reshape")
def _flatten(layer: Any, inputs: tuple[str, ...], ctx: Context) -> ir.Node | str:
    if len(layer.input.shape) == 2:
        return inputs[0]
    size = int(np.prod(layer.input.shape[1:]))
    return ir.Reshape(name=ctx.node_name(layer), inputs=inputs, shape=(size,), source=describe(layer))
