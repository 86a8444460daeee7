"""More Keras layers over images and sequences, lowered to the primitives of export/frontend/convolution.py:
Conv1D, 1-D and average pooling, global pooling, zero padding, cropping and Reshape.

A sequence (steps, channels) is laid out like an image one row high, (1, steps, channels), so each 1-D
layer is its 2-D counterpart with a window one row high. Average pooling is a Gather of each channel's
window and a PatchDense whose kernel is 1/size: the mean, as a product the targets already run.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir import graph as ir
from .base import Context, converts, describe, input_tensor
from .convolution import convolution, window_indices, without_padding
from .masked_pooling import masked_average


def spatial_shape(layer: Any, ctx: Context) -> tuple[int, int, int]:
    """The input as (height, width, channels): a sequence is one row high."""
    shape = tuple(input_tensor(layer).shape[1:])  # a masked call's input is [value, mask] in Keras 3
    if any(d is None for d in shape) or layer.get_config().get("data_format") == "channels_first":
        raise ctx.unsupported(layer, f"input {shape} (only fixed-size, channels last)")
    if len(shape) == 2:
        return 1, int(shape[0]), int(shape[1])
    if len(shape) == 3:
        return int(shape[0]), int(shape[1]), int(shape[2])
    raise ctx.unsupported(layer, f"input {shape}")


def pair(value: Any, one_dimensional: bool) -> tuple[int, int]:
    """A Keras size option as (rows, columns); a 1-D layer's size applies to the columns."""
    values = tuple(value) if isinstance(value, list | tuple) else (value,)
    return (1, int(values[0])) if one_dimensional else (int(values[0]), int(values[-1]))


def not_masked(layer: Any, inputs: tuple[str, ...], ctx: Context) -> None:
    if any(name in ctx.masks for name in inputs):
        raise ctx.unsupported(layer, "a masked input")


@converts("Conv1D", produces="Gather+PatchDense")
def _conv1d(layer: Any, inputs: tuple[str, ...], ctx: Context) -> tuple[ir.Node, ...]:
    config = layer.get_config()
    not_masked(layer, inputs, ctx)
    if config.get("groups", 1) != 1:
        raise ctx.unsupported(layer, f"groups={config.get('groups', 1)}")
    windows = window_indices(
        spatial_shape(layer, ctx),
        pair(config["kernel_size"], True),
        pair(config["strides"], True),
        pair(config["dilation_rate"], True),
        config["padding"],
    )
    return convolution(layer, inputs, ctx, windows)


def channel_windows(windows: np.ndarray, channels: int) -> np.ndarray:
    """Per output position and channel, that channel's window: (positions·channels, window size)."""
    return windows.reshape(len(windows), -1, channels).transpose(0, 2, 1).reshape(len(windows) * channels, -1)


def pooled(
    layer: Any, inputs: tuple[str, ...], ctx: Context, windows: np.ndarray, mean: bool, *, masks: bool = False
) -> tuple[ir.Node, ...]:
    """Gather each channel's windows, then their max (GroupMax) or mean (PatchDense by 1/size). Keras pools
    over the values inside the input only: with 'same' padding a max window reads one of its own values in
    its padded places, and a mean is the window's sum times 1/(its count of values inside), an Affine.
    `masks`: the layer ignores a mask (Keras's GlobalMaxPooling1D)."""
    if not masks:
        not_masked(layer, inputs, ctx)
    name, size = ctx.node_name(layer), windows.shape[1]
    padded = (windows < 0).any()
    gather = ir.Gather(
        name=f"{name}_windows",
        inputs=inputs,
        indices=ir.Weights((windows if mean else without_padding(windows)).ravel()),
        source=describe(layer),
    )
    if not mean:
        return gather, ir.GroupMax(name=name, inputs=(gather.name,), size=size, source=describe(layer))
    average = ir.PatchDense(
        name=f"{name}_sums" if padded else name,
        inputs=(gather.name,),
        kernel=ir.Weights(np.full((size, 1), 1.0 if padded else 1.0 / size)),
        patches=len(windows),
        source=describe(layer),
    )
    if not padded:
        return gather, average
    counts = (windows >= 0).sum(axis=1)
    scale = ir.Weights(1.0 / counts)
    return gather, average, ir.Affine(name=name, inputs=(average.name,), scale=scale, source=describe(layer))


POOLS = {
    "MaxPooling1D": False,
    "AveragePooling1D": True,
    "AveragePooling2D": True,
}


@converts("MaxPooling1D", produces="Gather+GroupMax")
@converts("AveragePooling1D", "AveragePooling2D", produces="Gather+PatchDense+Affine")
def _pooling(layer: Any, inputs: tuple[str, ...], ctx: Context) -> tuple[ir.Node, ...]:
    config, kind = layer.get_config(), type(layer).__name__
    shape, one_d = spatial_shape(layer, ctx), kind.endswith("1D")
    pool = pair(config["pool_size"], one_d)
    strides = pair(config.get("strides") or config["pool_size"], one_d)
    windows = window_indices(shape, pool, strides, (1, 1), config["padding"])
    return pooled(layer, inputs, ctx, channel_windows(windows, shape[2]), POOLS[kind])


@converts("GlobalMaxPooling1D", "GlobalMaxPooling2D", produces="Gather+GroupMax")
@converts("GlobalAveragePooling1D", "GlobalAveragePooling2D", produces="Gather+PatchDense")
def _global_pooling(layer: Any, inputs: tuple[str, ...], ctx: Context) -> tuple[ir.Node, ...]:
    """Over a masked sequence, the average counts the kept steps only (export/frontend/masked_pooling.py)
    and the max ignores the mask, as Keras does."""
    height, width, channels = spatial_shape(layer, ctx)
    mean, masked = "Average" in type(layer).__name__, inputs[0] in ctx.masks
    if masked and mean:
        return masked_average(layer, inputs[0], ctx, width, channels)
    every = np.arange(height * width * channels).reshape(1, -1)
    windows = channel_windows(every, channels)
    return pooled(layer, inputs, ctx, windows, mean, masks=masked)


def margins(layer: Any, one_d: bool) -> tuple[tuple[int, int], tuple[int, int]]:
    """((top, bottom), (left, right)) of a ZeroPadding or Cropping layer."""
    option = layer.get_config().get("padding", layer.get_config().get("cropping"))
    if one_d:
        values = tuple(option) if isinstance(option, list | tuple) else (option, option)
        return (0, 0), (int(values[0]), int(values[1]))
    rows, cols = option
    return both_sides(rows), both_sides(cols)


def both_sides(value: Any) -> tuple[int, int]:
    return (int(value[0]), int(value[1])) if isinstance(value, list | tuple) else (int(value), int(value))


@converts("ZeroPadding1D", "ZeroPadding2D", "Cropping1D", "Cropping2D", produces="Gather")
def _pad_or_crop(layer: Any, inputs: tuple[str, ...], ctx: Context) -> ir.Node:
    """A Gather of the kept or padded positions (padding reads index -1: a 0)."""
    not_masked(layer, inputs, ctx)
    height, width, channels = spatial_shape(layer, ctx)
    (top, bottom), (left, right) = margins(layer, type(layer).__name__.endswith("1D"))
    sign = 1 if type(layer).__name__.startswith("ZeroPadding") else -1
    rows = np.arange(-sign * top, height + sign * bottom)
    cols = np.arange(-sign * left, width + sign * right)
    r, c, ch = rows[:, None, None], cols[None, :, None], np.arange(channels)[None, None, :]
    inside = (r >= 0) & (r < height) & (c >= 0) & (c < width)
    indices = np.where(inside, (r * width + c) * channels + ch, -1).ravel()
    return ir.Gather(
        name=ctx.node_name(layer), inputs=inputs, indices=ir.Weights(indices), source=describe(layer)
    )


@converts("Reshape", produces="Reshape")
def _reshape(layer: Any, inputs: tuple[str, ...], ctx: Context) -> ir.Node:
    shape = tuple(int(d) for d in layer.output.shape[1:])
    return ir.Reshape(name=ctx.node_name(layer), inputs=inputs, shape=shape, source=describe(layer))
