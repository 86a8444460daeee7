"""A convolution as DuckDB list SQL: each window is picked from the row inside the loop over the output
positions, then one dot product per window and filter.

Two costs of DuckDB's lists shape this code (measured with DuckDB 1.5 on a 28×28 Conv 32 / Conv 64 CNN):
  * `list_select` copies value by value through a slow path (about 0.3 µs a value), whereas reading one
    element, `x[i]`, inside a lambda over the indices costs a sixth of that: windows are picked by
    element reads;
  * DuckDB evaluates an expression for all the rows it computes at once (export/duckdb/batches.py), so
    every list bound per row lives for all of them: a list of all the windows of a row is 1.3 MB for
    the second convolution. A window picked inside the loop over the positions lives only while its
    filters run, a few thousand windows at a time whatever the rows.
"""

from __future__ import annotations

from ..ir import graph as ir


def window_params(where: str, past_end: int, size: int, patches: int) -> str:
    """Each window's 1-based positions in the row, a list per output position, from the Gather's stored
    flat indices: padding (-1) points at `past_end`, the zero the convolution appends to the row."""
    position = f"CASE WHEN _nn_i < 0 THEN {past_end} ELSE _nn_i::INTEGER + 1 END"
    flat = f"list_transform(k.value, lambda _nn_i: {position})"
    window = f"list_transform(range({size}), lambda _nn_j: _nn_a[_nn_q * {size} + _nn_j + 1])"
    per_window = f"list_transform(range({patches}), lambda _nn_q: {window})"
    windows = f"list_transform([{flat}], lambda _nn_a: {per_window})[1]"
    return f"(SELECT {windows} FROM nnsql.tensors k WHERE {where})"


def picked(x: str, positions: str) -> str:
    """The values of list `x` at the 1-based `positions`, read one element at a time (see the module)."""
    return f"list_transform({positions}, lambda _nn_i: {x}[_nn_i])"


def convolution(x: str, windows: str, filters: str, unit: str) -> str:
    """`unit` (an expression of `_nn_u`, one filter's {w, b}, and `_nn_win`, one window) for every
    filter at every output position of row `x`, position-major as the IR lays a PatchDense out;
    `windows` lists each position's 1-based window positions (window_params)."""
    window = picked("_nn_px", "_nn_ix")
    per_filter = f"list_transform(_nn_f, lambda _nn_u: {unit})"
    per_position = f"list_transform([{window}], lambda _nn_win: {per_filter})[1]"
    loop = f"flatten(list_transform({windows}, lambda _nn_ix: {per_position}))"
    bound = f"list_transform([{filters}], lambda _nn_f: {loop})[1]"
    return f"list_transform([list_append({x}, 0.0::DOUBLE)], lambda _nn_px: {bound})[1]"


def folded_windows(graph: ir.Graph) -> set[str]:
    """The Gathers this target computes inside their PatchDense (never bound as a value): those read
    only by one PatchDense."""
    readers: dict[str, list[ir.Node]] = {}
    for node in graph.nodes:
        for name in node.inputs:
            readers.setdefault(name, []).append(node)
    return {
        node.name
        for node in graph.nodes
        if isinstance(node, ir.Gather)
        and node.name != graph.output
        and [reader.kind for reader in readers.get(node.name, [])] == ["PatchDense"]
    }
