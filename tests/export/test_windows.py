"""Convolution windows read as whole pixels (export/ir/windows.py): the pixels picked per window give
back exactly the values the Gather picks one by one, for every padding, stride and dilation, and windows
that are not whole pixels (max pooling's, one channel at a time) are left to the Gather."""

import numpy as np
import pytest

from nnsql.export.frontend.convolution import window_indices
from nnsql.export.ir import graph as ir
from nnsql.export.ir import windows


def picked_by_pixels(x: np.ndarray, indices: np.ndarray, width: int) -> np.ndarray:
    """What a target computes from pixels: the row cut into pixels plus a zero pixel, each window's
    pixels joined in tap order."""
    cut = np.vstack([x.reshape(-1, width), np.zeros((1, width))])
    return cut[windows.pixels(indices, width, x.size)].reshape(len(indices), -1)


@pytest.mark.parametrize(
    ("shape", "window", "strides", "dilation", "padding"),
    [
        ((7, 6, 3), (3, 3), (1, 1), (1, 1), "valid"),
        ((7, 6, 4), (3, 2), (2, 1), (1, 1), "same"),
        ((9, 8, 2), (2, 3), (1, 2), (2, 1), "same"),
        ((5, 5, 6), (1, 1), (1, 1), (1, 1), "valid"),
    ],
)
def test_pixels_pick_what_the_gather_picks(shape, window, strides, dilation, padding):
    indices = window_indices(shape, window, strides, dilation, padding)
    x = np.random.default_rng(3).normal(size=int(np.prod(shape)))
    width = windows.pixel_width(indices, indices.shape[1], x.size, widest=256)
    assert width is not None and shape[2] % width == 0
    gathered = np.where(indices < 0, 0.0, x[np.maximum(indices, 0)])
    np.testing.assert_array_equal(picked_by_pixels(x, indices, width), gathered)


def test_pooling_windows_are_not_whole_pixels():
    """Max pooling's windows hold one channel of several pixels: a pixel cut would mix channels."""
    shape = (6, 6, 4)
    indices = window_indices(shape, (2, 2), (2, 2), (1, 1), "valid")
    per_channel = indices.reshape(len(indices), -1, 4).transpose(0, 2, 1).reshape(-1, 4)
    assert windows.pixel_width(per_channel, 4, 144, widest=256) is None


def test_only_windows_read_by_one_convolution_are_offered():
    indices = window_indices((4, 4, 2), (2, 2), (1, 1), (1, 1), "valid")
    spec = ir.TensorSpec("image", (4, 4, 2))
    gather = ir.Gather(name="w", inputs=("image",), indices=ir.Weights(indices.ravel()))
    conv = ir.PatchDense(name="c", inputs=("w",), kernel=ir.Weights(np.ones((8, 3))), patches=9)
    graph = ir.Graph(inputs=(spec,), nodes=(gather, conv), output="c")
    assert windows.convolution_windows(graph, widest=256) == {"w": (2, 4)}
    also_read = ir.Binary(name="sum", inputs=("w", "w"), op="add")
    two_readers = ir.Graph(inputs=(spec,), nodes=(gather, conv, also_read), output="sum")
    assert windows.convolution_windows(two_readers, widest=256) == {}
