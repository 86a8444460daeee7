"""Keras normalisation layers as diagonal linear maps (inference statistics baked in): the front end's
fold pass (export/passes.py) then multiplies them into the neighbouring Dense layer.

BatchNormalization: (x − moving_mean) / sqrt(moving_variance + epsilon) · gamma + beta.
Normalization:      (x − mean) / max(sqrt(variance), 1e-7), or its inverse with `invert=True`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from export import ir
from export.keras_frontend import Context, converts, describe

KERAS_EPSILON = 1e-7  # keras.backend.epsilon(), Normalization's floor on the standard deviation


def affine(
    layer: Any, inputs: tuple[str, ...], ctx: Context, scale: np.ndarray, shift: np.ndarray
) -> ir.Node:
    """y = x · scale + shift over the last axis: on a flat vector a Dense with a diagonal kernel (folded
    into its neighbours), on images and sequences an `Affine` with the per-channel values repeated for
    every position (folded into a convolution before it, see export/passes.py)."""
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


def check_last_axis(layer: Any, ctx: Context, rank: int) -> None:
    config = layer.get_config()
    axis = config.get("axis", -1)
    if (axis[0] if isinstance(axis, list) and len(axis) == 1 else axis) not in (-1, rank) or config.get(
        "rms_scaling"
    ):
        raise ctx.unsupported(
            layer, f"axis={axis}, rms_scaling={config.get('rms_scaling')} (only the last axis)"
        )


@converts("LayerNormalization", produces="PatchDense+Binary+ActivationNode+Affine")
def _layer_normalization(layer: Any, inputs: tuple[str, ...], ctx: Context) -> tuple[ir.Node, ...]:
    """Over the last axis of each position: centred = x·(I − 1/F), variance = mean(centred²) + epsilon,
    y = centred · rsqrt(variance) · gamma + beta; the per-position products are PatchDense nodes."""
    config, shape = layer.get_config(), tuple(int(d) for d in layer.input.shape[1:])
    check_last_axis(layer, ctx, len(shape))
    features, positions = shape[-1], int(np.prod(shape[:-1]))
    name, source = ctx.node_name(layer), describe(layer)

    def node_name(role: str) -> str:
        return ctx.name_for(f"{name}_{role}")

    def per_position(role: str, x: str, kernel: np.ndarray, bias: np.ndarray | None = None) -> ir.PatchDense:
        weights = ir.Weights(bias) if bias is not None else None
        kernel_weights = ir.Weights(kernel)
        return ir.PatchDense(
            name=node_name(role),
            inputs=(x,),
            kernel=kernel_weights,
            bias=weights,
            patches=positions,
            source=source,
        )

    centred = per_position("centred", inputs[0], np.eye(features) - 1.0 / features)
    squared = ir.Binary(name=node_name("squared"), inputs=(centred.name,) * 2, op="mul", source=source)
    epsilon = np.array([float(config.get("epsilon", 1e-3))])
    variance = per_position("variance", squared.name, np.full((features, 1), 1.0 / features), epsilon)
    inverse = ir.ActivationNode(
        name=node_name("inverse"), inputs=(variance.name,), activation="rsqrt", source=source
    )
    spread = per_position("spread", inverse.name, np.ones((1, features)))
    scaled = ir.Binary(name=node_name("scaled"), inputs=(centred.name, spread.name), op="mul", source=source)
    gamma = numbers(layer.gamma) if config.get("scale", True) else np.ones(features)
    beta = numbers(layer.beta) if config.get("center", True) else np.zeros(features)
    scale, shift = ir.Weights(np.tile(gamma.ravel(), positions)), ir.Weights(np.tile(beta.ravel(), positions))
    output = ir.Affine(name=name, inputs=(scaled.name,), scale=scale, shift=shift, source=source)
    return centred, squared, variance, inverse, spread, scaled, output
