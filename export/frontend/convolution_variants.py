"""Transposed, depthwise and separable convolutions, 1-D and 2-D, lowered like Conv2D (export/
frontend_convolution.py) to a `Gather` of each output position's window and one `PatchDense`.

Conv2DTranspose (TensorFlow's conv_transpose): y[o] = Σ_{i, t: o = i·s + t·d − p} x[i] · W[t] per axis,
with W[t] of shape (out, in), s the stride, d the dilation and p the padding before (0 for 'valid'; for
'same', half of max((in − 1)·s + span − out, 0), the forward convolution's padding). The window of output
position o holds, for every tap t and input channel, x[(o + p − t·d) / s] where that is a whole number
inside the input, else 0 (index -1).

DepthwiseConv2D: y[pos, c·m + j] = Σ_t x[pos + t, c] · W[t, c, j]: a PatchDense over the usual windows with
a kernel that is zero outside each channel's own block (m = depth_multiplier). SeparableConv2D is that
depthwise product followed by a 1×1 pointwise one, both linear, so it is one PatchDense whose kernel is
their product (computed in float64), then the bias and the activation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir import graph as ir
from .base import Context, converts
from .convolution import convolution, window_indices
from .spatial import not_masked, pair, spatial_shape

CHANNELS_FIRST = "data_format='channels_first', a masked input"


def options(layer: Any, ctx: Context) -> tuple[bool, dict[str, Any]]:
    """(one-dimensional, config), refusing what none of these lowerings computes."""
    config = layer.get_config()
    if config.get("data_format", "channels_last") == "channels_first":
        raise ctx.unsupported(layer, "data_format='channels_first' (only channels last)")
    if config.get("groups", 1) != 1:
        raise ctx.unsupported(layer, f"groups={config['groups']}")
    return "1D" in type(layer).__name__, config


def transposed_windows(
    shape: tuple[int, int, int],
    out: tuple[int, int],
    window: tuple[int, int],
    strides: tuple[int, int],
    dilation: tuple[int, int],
    padding: str,
) -> np.ndarray:
    """For every output position (row-major) the flat input index read by each tap (i, j) and channel,
    -1 where no input value falls on the tap."""
    height, width, channels = shape
    axes = []
    for size, length, k, s, d in zip((height, width), out, window, strides, dilation, strict=True):
        span = (k - 1) * d + 1
        before = 0 if padding == "valid" else max((-(-length // s) - 1) * s + span - length, 0) // 2
        offset = np.arange(length)[:, None] + before - np.arange(k)[None, :] * d  # (output, tap)
        source = offset // s
        axes.append(np.where((offset % s == 0) & (source >= 0) & (source < size), source, -1))
    rows, cols = axes
    r, c = rows[:, None, :, None, None], cols[None, :, None, :, None]
    ch = np.arange(channels)[None, None, None, None, :]
    index = np.where((r >= 0) & (c >= 0), (r * width + c) * channels + ch, -1)
    return index.reshape(out[0] * out[1], -1)


@converts("Conv1DTranspose", "Conv2DTranspose", produces="Gather+PatchDense", refuses=CHANNELS_FIRST)
def _conv_transpose(layer: Any, inputs: tuple[str, ...], ctx: Context) -> tuple[ir.Node, ...]:
    one_d, config = options(layer, ctx)
    not_masked(layer, inputs, ctx)
    out_shape = tuple(int(d) for d in layer.output.shape[1:-1])
    windows = transposed_windows(
        spatial_shape(layer, ctx),
        (1, out_shape[0]) if one_d else (out_shape[0], out_shape[1]),
        pair(config["kernel_size"], one_d),
        pair(config["strides"], one_d),
        pair(config["dilation_rate"], one_d),
        config["padding"],
    )
    kernel = np.asarray(layer.kernel.numpy())  # (*taps, out, in)
    taps = kernel.shape[:-2]
    order = (*range(len(taps)), len(taps) + 1, len(taps))  # (*taps, in, out)
    return convolution(layer, inputs, ctx, windows, kernel.transpose(order))


def depthwise_kernel(kernel: np.ndarray) -> np.ndarray:
    """(*taps, in, m) → (taps·in, in·m), zero but for each input channel's own m output channels."""
    taps, channels, multiplier = int(np.prod(kernel.shape[:-2])), kernel.shape[-2], kernel.shape[-1]
    flat = kernel.reshape(taps, channels, multiplier).astype(np.float64)
    block = np.zeros((taps, channels, channels, multiplier))
    block[:, np.arange(channels), np.arange(channels), :] = flat
    return block.reshape(taps * channels, channels * multiplier)


def depthwise_windows(layer: Any, ctx: Context) -> np.ndarray:
    one_d, config = options(layer, ctx)
    return window_indices(
        spatial_shape(layer, ctx),
        pair(config["kernel_size"], one_d),
        pair(config["strides"], one_d),
        pair(config["dilation_rate"], one_d),
        config["padding"],
    )


@converts("DepthwiseConv1D", "DepthwiseConv2D", produces="Gather+PatchDense", refuses=CHANNELS_FIRST)
def _depthwise(layer: Any, inputs: tuple[str, ...], ctx: Context) -> tuple[ir.Node, ...]:
    not_masked(layer, inputs, ctx)
    windows = depthwise_windows(layer, ctx)
    weights = layer.depthwise_kernel if hasattr(layer, "depthwise_kernel") else layer.kernel  # tf.keras
    kernel = depthwise_kernel(np.asarray(weights.numpy()))
    return convolution(layer, inputs, ctx, windows, kernel)


@converts("SeparableConv1D", "SeparableConv2D", produces="Gather+PatchDense", refuses=CHANNELS_FIRST)
def _separable(layer: Any, inputs: tuple[str, ...], ctx: Context) -> tuple[ir.Node, ...]:
    not_masked(layer, inputs, ctx)
    windows = depthwise_windows(layer, ctx)
    depthwise = depthwise_kernel(np.asarray(layer.depthwise_kernel.numpy()))
    pointwise = np.asarray(layer.pointwise_kernel.numpy(), dtype=np.float64)
    kernel = depthwise @ pointwise.reshape(pointwise.shape[-2], pointwise.shape[-1])
    return convolution(layer, inputs, ctx, windows, kernel)
