"""Keras normalisation layers. With inference statistics baked in, BatchNormalization and Normalization are
diagonal linear maps, which the front end's fold pass (export/ir/passes.py) multiplies into the neighbouring
Dense layer; LayerNormalization, GroupNormalization and UnitNormalization compute their statistics per
row from primitives (export/ir/builder.py).

BatchNormalization: (x − moving_mean) / sqrt(moving_variance + epsilon) · gamma + beta.
Normalization:      (x − mean) / max(sqrt(variance), 1e-7), or its inverse with `invert=True`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir import graph as ir
from ..ir.builder import Builder, moved_last
from .base import Context, converts, describe

KERAS_EPSILON = 1e-7  # keras.backend.epsilon(), Normalization's floor on the standard deviation


def affine(
    layer: Any, inputs: tuple[str, ...], ctx: Context, scale: np.ndarray, shift: np.ndarray
) -> ir.Node:
    """y = x · scale + shift over the last axis: on a flat vector a Dense with a diagonal kernel (folded
    into its neighbours), on images and sequences an `Affine` with the per-channel values repeated for
    every position (folded into a convolution before it, see export/ir/passes.py)."""
    shape = tuple(int(d) for d in layer.input.shape[1:])
    if len(shape) > 1:
        positions, channels = int(np.prod(shape[:-1])), shape[-1]
        scale = np.tile(np.broadcast_to(np.asarray(scale, dtype=np.float64).ravel(), (channels,)), positions)
        shift = np.tile(np.broadcast_to(np.asarray(shift, dtype=np.float64).ravel(), (channels,)), positions)
        return ir.Affine(
            name=ctx.node_name(layer),
            inputs=inputs,
            scale=ir.Weights(scale),
            shift=ir.Weights(shift),
            source=describe(layer),
        )
    size = shape[-1]
    scale = np.broadcast_to(np.asarray(scale, dtype=np.float64).ravel(), (size,))
    shift = np.broadcast_to(np.asarray(shift, dtype=np.float64).ravel(), (size,))
    return ir.Dense(
        name=ctx.node_name(layer),
        inputs=inputs,
        kernel=ir.Weights(np.diag(scale)),
        bias=ir.Weights(shift),
        activation="linear",
        source=describe(layer),
    )


def numbers(value: Any) -> np.ndarray:
    return np.asarray(value.numpy() if hasattr(value, "numpy") else value, dtype=np.float64)


@converts("BatchNormalization", produces="Dense+Affine")
def _batch_normalization(layer: Any, inputs: tuple[str, ...], ctx: Context) -> ir.Node:
    """y = (x − moving_mean) / sqrt(moving_variance + epsilon) · gamma + beta, the statistics indexed by the
    normalised axis (or axes): over the last axis per channel, over another (axis=1, channels first) each
    value scaled by the statistics of its place on that axis."""
    config = layer.get_config()
    if config.get("renorm"):
        raise ctx.unsupported(layer, "renorm")
    inverse = 1.0 / np.sqrt(numbers(layer.moving_variance) + float(config["epsilon"]))
    gamma = numbers(layer.gamma) if config.get("scale", True) else 1.0
    beta = numbers(layer.beta) if config.get("center", True) else 0.0
    scale = inverse * gamma
    shift = beta - numbers(layer.moving_mean) * scale
    shape = tuple(int(d) for d in layer.input.shape[1:])
    axes = sorted({(a if a >= 0 else a + len(shape) + 1) - 1 for a in axis_list(config.get("axis", -1))})
    if axes == [len(shape) - 1]:
        return affine(layer, inputs, ctx, scale, shift)
    return ir.Affine(
        name=ctx.node_name(layer),
        inputs=inputs,
        scale=ir.Weights(along(scale, shape, axes)),
        shift=ir.Weights(along(shift, shape, axes)),
        source=describe(layer),
    )


def axis_list(axis: Any) -> list[int]:
    return [int(a) for a in axis] if isinstance(axis, list | tuple) else [int(axis)]


def along(values: np.ndarray | float, shape: tuple[int, ...], axes: list[int]) -> np.ndarray:
    """Statistics of the `axes` of a value of `shape`, repeated over its other axes, flat row-major."""
    kept = [shape[a] if a in axes else 1 for a in range(len(shape))]
    return np.broadcast_to(np.asarray(values, dtype=np.float64).reshape(kept), shape).ravel()


@converts("Normalization", produces="Dense+Affine")
def _normalization(layer: Any, inputs: tuple[str, ...], ctx: Context) -> ir.Node:
    mean, variance = numbers(layer.mean), numbers(layer.variance)
    deviation = np.maximum(np.sqrt(variance), KERAS_EPSILON)
    if layer.get_config().get("invert"):
        return affine(layer, inputs, ctx, deviation, mean)
    return affine(layer, inputs, ctx, 1.0 / deviation, -mean / deviation)


def normalised_axes(layer: Any, shape: tuple[int, ...], ctx: Context) -> tuple[int, ...]:
    """The layer's `axis` option as sorted axes of the row (0 is the first axis after the batch's)."""
    option = layer.get_config()["axis"]
    axes = sorted({(a if a >= 0 else a + len(shape) + 1) - 1 for a in axis_list(option)})
    if not axes or axes[0] < 0 or axes[-1] >= len(shape):
        raise ctx.unsupported(layer, f"axis {option} of an input of shape {shape}")
    return tuple(axes)


def weight_or(layer: Any, name: str, default: float, size: int) -> np.ndarray:
    value = getattr(layer, name, None)
    return np.full(size, default) if value is None else numbers(value).ravel()


def grouped_last(
    build: Builder, x: str, shape: tuple[int, ...], axes: tuple[int, ...]
) -> tuple[str, np.ndarray | None]:
    """x with `axes` moved last (nothing to do when they are last already), and the Gather indices that
    put the values back (None when nothing moved)."""
    order = moved_last(shape, axes)
    if np.array_equal(order, np.arange(order.size)):
        return x, None
    return build.gather("moved", x, order), np.argsort(order)


@converts("LayerNormalization", produces="PatchDense+Gather+Binary+ActivationNode+Affine")
def _layer_normalization(layer: Any, inputs: tuple[str, ...], ctx: Context) -> tuple[ir.Node, ...]:
    """Over the axes of each position (the last by default): y = (x − mean) / sqrt(variance + epsilon) ·
    gamma + beta; with rms_scaling (deprecated in Keras, kept as it computes): y = x / sqrt(variance +
    epsilon) · gamma, the variance still about the mean. Axes other than the last are moved last by a
    Gather first, and back after."""
    config, shape = layer.get_config(), tuple(int(d) for d in layer.input.shape[1:])
    axes = normalised_axes(layer, shape, ctx)
    size, features = int(np.prod(shape)), int(np.prod([shape[a] for a in axes]))
    build = Builder(ctx.name_for, ctx.node_name(layer), describe(layer))
    x, back = grouped_last(build, inputs[0], shape, axes)
    epsilon = float(config.get("epsilon", 1e-3))
    value = build.standardized("normalised", x, size, features, epsilon, centre=not config.get("rms_scaling"))
    gamma, beta = weight_or(layer, "gamma", 1.0, features), weight_or(layer, "beta", 0.0, features)
    positions = size // features
    build.affine(
        "scaled" if back is not None else "", value, np.tile(gamma, positions), np.tile(beta, positions)
    )
    if back is not None:
        build.gather("", build.nodes[-1].name, back)
    return tuple(build.nodes)


@converts("GroupNormalization", produces="PatchDense+Gather+Binary+ActivationNode+Affine")
def _group_normalization(layer: Any, inputs: tuple[str, ...], ctx: Context) -> tuple[ir.Node, ...]:
    """The channels (axis, the last by default) split into `groups` consecutive groups; over each group
    and every position, y = (x − mean) / sqrt(variance + epsilon), then · gamma + beta per channel. The
    values of each group are gathered together first, and put back after."""
    config, shape = layer.get_config(), tuple(int(d) for d in layer.input.shape[1:])
    (axis,) = normalised_axes(layer, shape, ctx)
    groups, channels = int(config["groups"]), shape[axis]
    size, per_group = int(np.prod(shape)), int(np.prod(shape)) // groups
    split = (*shape[:axis], groups, channels // groups, *shape[axis + 1 :])
    order = moved_last(split, tuple(a for a in range(len(split)) if a != axis))  # group first
    build = Builder(ctx.name_for, ctx.node_name(layer), describe(layer))
    grouped = build.gather("grouped", inputs[0], order)
    value = build.standardized("normalised", grouped, size, per_group, float(config.get("epsilon", 1e-3)))
    restored = build.gather("restored", value, np.argsort(order))
    gamma, beta = weight_or(layer, "gamma", 1.0, channels), weight_or(layer, "beta", 0.0, channels)
    build.affine("", restored, along(gamma, shape, [axis]), along(beta, shape, [axis]))
    return tuple(build.nodes)


UNIT_EPSILON = 1e-12  # UnitNormalization's floor on the norm


@converts("UnitNormalization", produces="PatchDense+Gather+Binary+ActivationNode+Affine")
def _unit_normalization(layer: Any, inputs: tuple[str, ...], ctx: Context) -> tuple[ir.Node, ...]:
    """y = x / max(‖x‖, 1e-12) over the axes (ops.normalize: x · min(rsqrt(Σ x²), 1e12))."""
    shape = tuple(int(d) for d in layer.input.shape[1:])
    axes = normalised_axes(layer, shape, ctx)
    build = Builder(ctx.name_for, ctx.node_name(layer), describe(layer))
    x, back = grouped_last(build, inputs[0], shape, axes)
    size, group = int(np.prod(shape)), int(np.prod([shape[a] for a in axes]))
    inverse = build.inverse_norms("inverse", x, size, group, UNIT_EPSILON**2)
    each = build.spread("each", inverse, size // group, group)
    build.binary("scaled" if back is not None else "", "mul", x, each)
    if back is not None:
        build.gather("", build.nodes[-1].name, back)
    return tuple(build.nodes)
