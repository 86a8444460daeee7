"""A convolution whose windows are whole pixels, as DuckDB list SQL: cut the row into pixels once, pick
each window's pixels, then one dot product per window and filter.

Picking single values with `list_select` costs about as much per value as a dot product's multiply-add,
and a lambda over the windows that sliced one long gathered row copied that row at every window; so the
im2col windows are built from pixels instead (9 picks per 3×3 window instead of 9·channels), and no
lambda slices a list it captures. The weights' lambda over the filters reads each window as its element.
"""

from __future__ import annotations

from ..ir import graph as ir
from ..ir import windows

ZIP_LIMIT = 256  # most lists zipped in one list_zip (a pixel's channels, a window's pixels)


def chunks(x: str, size: int) -> str:
    """The consecutive runs of `size` values of list `x` as a list of lists, cut by zipping the strided
    slices x[j::size] (no lambda reads `x`)."""
    slices = ", ".join(f"{x}[{j + 1}:-1:{size}]" for j in range(size))
    values = ", ".join(f"_nn_e[{j + 1}]" for j in range(size))
    return f"list_transform(list_zip({slices}), lambda _nn_e: [{values}])"


def pixel_params(where: str, width: int, pixels: int, taps: int) -> str:
    """Each window's 1-based pixel positions, from the Gather's stored flat indices (one run of `width`
    per tap): padding (-1) points at pixel `pixels + 1`, the zero pixel the convolution appends."""
    position = f"CASE WHEN _nn_i < 0 THEN {pixels + 1} ELSE _nn_i::INTEGER // {width} + 1 END"
    starts = f"list_transform(k.value[1:-1:{width}], lambda _nn_i: {position})"
    grouped = f"list_transform([{starts}], lambda _nn_s: {chunks('_nn_s', taps)})[1]"
    return f"(SELECT {grouped} FROM nnsql.tensors k WHERE {where})"


def windows_of(x: str, pixel_positions: str, width: int) -> str:
    """Every window as a list: the row cut into pixels (and a zero pixel), then each window's pixels
    picked and joined in tap order, which is the order of the kernel's rows."""
    zero = f"[{', '.join(['0.0::DOUBLE'] * width)}]"
    cut = f"list_append({chunks(x, width)}, {zero})"
    return (
        f"list_transform([{cut}], lambda _nn_px: list_transform({pixel_positions}, "
        "lambda _nn_ix: flatten(list_select(_nn_px, _nn_ix))))[1]"
    )


def over_windows(windows: str, filters: str, unit: str) -> str:
    """`unit` (an expression of `_nn_u`, one filter's {w, b}, and `_nn_win`, one window) for every
    filter of every window, position-major as the IR lays a PatchDense out. The filters are bound
    before the loop over the windows: a lambda copies what it captures at every element, and the
    filters are a small part of all the weights."""
    per_window = f"list_transform(_nn_f, lambda _nn_u: {unit})"
    loop = f"flatten(list_transform({windows}, lambda _nn_win: {per_window}))"
    return f"list_transform([{filters}], lambda _nn_f: {loop})[1]"


def folded_windows(graph: ir.Graph) -> dict[str, tuple[int, int]]:
    """The Gathers this target computes inside their PatchDense (never bound as a value), with their
    pixel width and taps, when a pixel's channels and a window's pixels each fit one list_zip."""
    found = windows.convolution_windows(graph, ZIP_LIMIT)
    return {name: (width, taps) for name, (width, taps) in found.items() if taps <= ZIP_LIMIT}
