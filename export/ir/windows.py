"""Windows of a convolution read as whole pixels: the shape a Gather's indices have when each window is
made of the channels of a few pixels.

A convolution's Gather (export/frontend/convolution.py) lists, for every output position, the flat
input indices of its window ordered (tap, channel): each tap reads the `channels` consecutive values of
one pixel, or `channels` times -1 in the padding. A target can then cut the input into pixels once and
pick whole pixels per window, instead of picking every value one by one. This module knows no SQL.
"""

from __future__ import annotations

import numpy as np

from . import graph as ir


def aligned(indices: np.ndarray, width: int) -> bool:
    """Whether every run of `width` indices is one whole pixel (start a multiple of `width`, then
    consecutive) or all padding (-1)."""
    runs = indices.reshape(-1, width).astype(np.int64)
    start = runs[:, :1]
    padding = (runs == -1).all(axis=1)
    whole = (start % width == 0).ravel() & (runs == start + np.arange(width)).all(axis=1)
    return bool((padding | whole).all())


def pixel_width(indices: np.ndarray, window: int, input_size: int, widest: int) -> int | None:
    """The largest pixel width (at most `widest`) that cuts the input and every window of `window`
    values into whole pixels; None when only single values do."""
    for width in range(min(window, widest), 1, -1):
        if window % width == 0 and input_size % width == 0 and aligned(indices, width):
            return width
    return None


def pixels(indices: np.ndarray, width: int, input_size: int) -> np.ndarray:
    """(windows, taps) 0-based pixel numbers; padding reads pixel `input_size / width`, one past the
    last, which a target appends as zeros."""
    starts = indices.reshape(-1, width)[:, 0].astype(np.int64)
    return np.where(starts < 0, input_size // width, starts // width)


def convolution_windows(graph: ir.Graph, widest: int) -> dict[str, tuple[int, int]]:
    """The Gathers read only by one PatchDense whose windows are whole pixels, each with its pixel
    width and its window's pixel count (taps): a target may compute those windows inside the
    PatchDense instead of as a value."""
    readers: dict[str, list[ir.Node]] = {}
    for node in graph.nodes:
        for name in node.inputs:
            readers.setdefault(name, []).append(node)
    found: dict[str, tuple[int, int]] = {}
    for node in graph.nodes:
        reading = readers.get(node.name, [])
        if not isinstance(node, ir.Gather) or node.name == graph.output or len(reading) != 1:
            continue
        reader = reading[0]
        if not isinstance(reader, ir.PatchDense):
            continue
        width = pixel_width(node.indices.array, reader.size, graph.size_of(node.inputs[0]), widest)
        if width is not None:
            found[node.name] = (width, reader.size // width)
    return found
