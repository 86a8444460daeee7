"""Keras 2-D convolution and max pooling, lowered to primitives every target can run on a flat row.

The image arrives as the flat row a database stores: row-major, channels last (a 28×28×1 image is 784
values, pixel (r, c, ch) at index (r·W + c)·C + ch). A Conv2D becomes a Gather of every output
position's window (im2col; padding reads 0) and a PatchDense applying the kernel to each window; a
MaxPooling2D becomes a Gather of the pooling windows and a GroupMax. Flatten is then the identity.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir import graph as ir
from .base import Context, activation_name, converts, describe


def output_length(size: int, window: int, stride: int, dilation: int, padding: str) -> tuple[int, int]:
    """(output length, padding before) of one axis, as Keras computes them; "causal" pads only before,
    by the window's span less one (Conv1D's causal padding)."""
    span = (window - 1) * dilation + 1
    if padding == "valid":
        return (size - span) // stride + 1, 0
    if padding == "causal":
        return (size - 1) // stride + 1, span - 1
    length = -(-size // stride)
    total = max((length - 1) * stride + span - size, 0)
    return length, total // 2


def window_indices(
    shape: tuple[int, int, int],
    window: tuple[int, int],
    strides: tuple[int, int],
    dilation: tuple[int, int],
    padding: str,
) -> np.ndarray:
    """For every output position (row-major) its window's flat input indices, ordered (i, j, channel)
    like a Keras kernel; -1 where the window reaches into the padding."""
    height, width, channels = shape
    out_h, top = output_length(height, window[0], strides[0], dilation[0], padding)
    out_w, left = output_length(width, window[1], strides[1], dilation[1], padding)
    rows = np.arange(out_h)[:, None] * strides[0] + np.arange(window[0])[None, :] * dilation[0] - top
    cols = np.arange(out_w)[:, None] * strides[1] + np.arange(window[1])[None, :] * dilation[1] - left
    r = rows[:, None, :, None, None]
    c = cols[None, :, None, :, None]
    ch = np.arange(channels)[None, None, None, None, :]
    index = (r * width + c) * channels + ch
    inside = (r >= 0) & (r < height) & (c >= 0) & (c < width)
    return np.where(inside, index, -1).reshape(out_h * out_w, -1)


def image_shape(layer: Any, ctx: Context) -> tuple[int, int, int]:
    shape = tuple(layer.input.shape[1:])
    config = layer.get_config()
    if len(shape) != 3 or any(d is None for d in shape) or config.get("data_format") == "channels_first":
        raise ctx.unsupported(layer, f"input {shape} (only fixed-size channels_last images)")
    return int(shape[0]), int(shape[1]), int(shape[2])


@converts("Conv2D", produces="Gather+PatchDense")
def _conv2d(layer: Any, inputs: tuple[str, ...], ctx: Context) -> tuple[ir.Node, ...]:
    config = layer.get_config()
    if config.get("groups", 1) != 1:
        raise ctx.unsupported(layer, "grouped convolution")
    windows = window_indices(
        image_shape(layer, ctx),
        tuple(config["kernel_size"]),
        tuple(config["strides"]),
        tuple(config["dilation_rate"]),
        config["padding"],
    )
    return convolution(layer, inputs, ctx, windows)


def convolution(
    layer: Any, inputs: tuple[str, ...], ctx: Context, windows: np.ndarray, kernel: np.ndarray | None = None
) -> tuple[ir.Node, ...]:
    """The Gather of every output position's window, then the kernel (the layer's own, or one given with
    its rows in the window's order) over each (a PatchDense)."""
    config = layer.get_config()
    activation = activation_name(layer, ctx)
    if activation == "softmax":
        raise ctx.unsupported(layer, "softmax over the channels of each position")
    name = ctx.node_name(layer)
    kernel = np.asarray(layer.kernel.numpy()) if kernel is None else kernel
    gather = ir.Gather(
        name=f"{name}_windows", inputs=inputs, indices=ir.Weights(windows.ravel()), source=describe(layer)
    )
    dense = ir.PatchDense(
        name=name,
        inputs=(gather.name,),
        kernel=ir.Weights(kernel.reshape(-1, kernel.shape[-1])),
        bias=ir.Weights(np.asarray(layer.bias.numpy())) if config.get("use_bias", True) else None,
        activation=activation,
        patches=len(windows),
        source=describe(layer),
    )
    return gather, dense


def without_padding(windows: np.ndarray) -> np.ndarray:
    """Max-pooling windows whose padded places (-1) read one of the window's own values instead: Keras
    takes the max over the values inside the input only (a padded 0 could win), and a repeated value
    does not change a max. Every window of 'same' padding holds at least one value of the input."""
    return np.where(windows < 0, windows.max(axis=1, keepdims=True), windows)


@converts("MaxPooling2D", produces="Gather+GroupMax")
def _max_pooling2d(layer: Any, inputs: tuple[str, ...], ctx: Context) -> tuple[ir.Node, ...]:
    config = layer.get_config()
    pool = tuple(config["pool_size"])
    strides = tuple(config.get("strides") or pool)
    shape = image_shape(layer, ctx)
    windows = window_indices(shape, pool, strides, (1, 1), config["padding"])
    # per output position and channel, that channel's window: (positions, i·j, channels) → channel-major
    windows = windows.reshape(len(windows), -1, shape[2]).transpose(0, 2, 1).reshape(-1, pool[0] * pool[1])
    windows = without_padding(windows)
    name = ctx.node_name(layer)
    gather = ir.Gather(
        name=f"{name}_windows", inputs=inputs, indices=ir.Weights(windows.ravel()), source=describe(layer)
    )
    return gather, ir.GroupMax(
        name=name, inputs=(gather.name,), size=windows.shape[1], source=describe(layer)
    )
