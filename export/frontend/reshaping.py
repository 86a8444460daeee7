"""Keras layers that move, repeat or pass values through, lowered to one `Gather` of constant indices (or to
nothing): Permute, RepeatVector, UpSampling1D/2D, and the layers that are the identity at inference.

Every value is stored flat and row-major, so moving values is a Gather whose indices say, for each output
position, which input position it reads. Bilinear UpSampling2D is a Gather of the four neighbours of each
output value, an `Affine` by their interpolation weights and a `PatchDense` of ones that sums them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir import graph as ir
from .base import Context, converts, describe, input_tensor


@converts(
    "ActivityRegularization",
    "Identity",
    "SpatialDropout1D",
    "SpatialDropout2D",
    "SpatialDropout3D",
    produces="identity",
)
def _pass_through(layer: Any, inputs: tuple[str, ...], ctx: Context) -> str:
    """The identity at inference: ActivityRegularization only adds a loss, Identity is one by definition,
    and the spatial dropouts drop nothing outside training. A mask flows on with the value."""
    return inputs[0]


def shape_of(layer: Any, ctx: Context) -> tuple[int, ...]:
    shape = tuple(input_tensor(layer).shape[1:])
    if any(d is None for d in shape):
        raise ctx.unsupported(layer, f"input {shape} (only fixed sizes)")
    return tuple(int(d) for d in shape)


def moved(layer: Any, inputs: tuple[str, ...], ctx: Context, indices: np.ndarray) -> ir.Gather:
    """The layer's value as a Gather of `indices` (flat input positions, in output order)."""
    if any(name in ctx.masks for name in inputs):
        raise ctx.unsupported(layer, "a masked input")
    return ir.Gather(
        name=ctx.node_name(layer),
        inputs=inputs,
        indices=ir.Weights(indices.ravel().astype(np.float32)),
        source=describe(layer),
    )


@converts("Permute", produces="Gather")
def _permute(layer: Any, inputs: tuple[str, ...], ctx: Context) -> ir.Gather:
    """y = transpose(x, (0, *dims)): dims count the axes from 1, the batch axis being 0."""
    shape = shape_of(layer, ctx)
    order = [int(d) - 1 for d in layer.get_config()["dims"]]
    return moved(layer, inputs, ctx, np.arange(int(np.prod(shape))).reshape(shape).transpose(order))


@converts("RepeatVector", produces="Gather")
def _repeat_vector(layer: Any, inputs: tuple[str, ...], ctx: Context) -> ir.Gather:
    """A vector (features,) repeated n times: y[t, f] = x[f], shape (n, features)."""
    (features,) = shape_of(layer, ctx)
    return moved(layer, inputs, ctx, np.tile(np.arange(features), int(layer.get_config()["n"])))


def channels_last(layer: Any, ctx: Context) -> None:
    if layer.get_config().get("data_format", "channels_last") == "channels_first":
        raise ctx.unsupported(layer, "data_format='channels_first' (only channels last)")


@converts("UpSampling1D", produces="Gather")
def _up_sampling1d(layer: Any, inputs: tuple[str, ...], ctx: Context) -> ir.Gather:
    """Each step repeated `size` times: y[t, c] = x[t // size, c]."""
    steps, channels = shape_of(layer, ctx)
    size = int(layer.get_config()["size"])
    return moved(layer, inputs, ctx, np.repeat(np.arange(steps * channels).reshape(steps, channels), size, 0))


@converts(
    "UpSampling2D",
    produces="Gather+Affine+PatchDense",
    refuses="interpolation bicubic or lanczos, data_format='channels_first'",
)
def _up_sampling2d(layer: Any, inputs: tuple[str, ...], ctx: Context) -> ir.Node | tuple[ir.Node, ...]:
    """nearest: y[r, c, k] = x[r // size_r, c // size_c, k]. bilinear: TensorFlow's resize with half-pixel
    centres, source row (r + 0.5) / size_r − 0.5 clamped to the image, interpolated between its two
    nearest rows, and likewise for columns (the weights are constants of the layer's shape)."""
    channels_last(layer, ctx)
    height, width, channels = shape_of(layer, ctx)
    config = layer.get_config()
    size_r, size_c = (int(s) for s in config["size"])
    interpolation = config.get("interpolation", "nearest")
    index = np.arange(height * width * channels).reshape(height, width, channels)
    if interpolation == "nearest":
        return moved(layer, inputs, ctx, index.repeat(size_r, 0).repeat(size_c, 1))
    if interpolation != "bilinear":
        raise ctx.unsupported(layer, f"interpolation={interpolation!r} (nearest or bilinear)")
    (low_r, high_r, lerp_r), (low_c, high_c, lerp_c) = neighbours(height, size_r), neighbours(width, size_c)
    corners = [(low_r, low_c), (low_r, high_c), (high_r, low_c), (high_r, high_c)]
    # per output value (r, c, k): its four corners' positions and weights, the corners last
    gathered = np.stack([index[rows][:, cols] for rows, cols in corners], axis=-1)
    wr, wc = lerp_r[:, None, None], lerp_c[None, :, None]
    weights = [(1 - wr) * (1 - wc), (1 - wr) * wc, wr * (1 - wc), wr * wc]
    weight = np.stack([np.broadcast_to(w, gathered.shape[:-1]) for w in weights], axis=-1)
    name, source = ctx.node_name(layer), describe(layer)
    corner = ir.Gather(
        name=ctx.name_for(f"{name}_corners"),
        inputs=inputs,
        indices=ir.Weights(gathered.ravel().astype(np.float32)),
        source=source,
    )
    weighted = ir.Affine(
        name=ctx.name_for(f"{name}_weighted"),
        inputs=(corner.name,),
        scale=ir.Weights(weight.ravel()),
        source=source,
    )
    total = ir.PatchDense(
        name=name,
        inputs=(weighted.name,),
        kernel=ir.Weights(np.ones((4, 1))),
        patches=int(np.prod(gathered.shape[:-1])),
        source=source,
    )
    return corner, weighted, total


def neighbours(size: int, factor: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """TensorFlow's bilinear sampling of one axis resized by `factor` (half-pixel centres): per output
    position the lower and upper source positions and the weight of the upper one."""
    source = (np.arange(size * factor) + 0.5) / factor - 0.5
    floor = np.floor(source)
    lower = np.maximum(floor, 0).astype(np.int64)
    upper = np.minimum(np.ceil(source), size - 1).astype(np.int64)
    return lower, upper, source - floor
