"""A recurrent step computed unit by unit: the DuckDB form of a Scan whose body is one Dense followed by
elementwise nodes (a GRU with reset_after, Keras's default).

When unit k of the new state reads the Dense's output only at k + a few fixed offsets (for a GRU: its
update gate, reset gate and the two halves of its candidate) and the old state only at k, one lambda over
the units computes, for each unit, those few dot products and the old state's value, and a second lambda
forms the new state from them. The Dense's rows are grouped by unit when the version is published (see
`params`): struct k holds the rows unit k reads. The whole-vector form instead binds all of the Dense's
outputs and then reads them by index, and costs about half as much CPU again per step.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir import graph as ir
from . import fusion
from .fusion import SCALAR_ACTIVATIONS, scalar_activation


@dataclass(frozen=True)
class PerUnit:
    """How unit k of a scan's new state is computed: from `dense`'s outputs k + each of `offsets`, the
    state's value k and `element` (scalar SQL reading them as _nn_z.v1, _nn_z.v2, ... in `reads` order)."""

    dense: ir.Dense
    units: int
    reads: tuple[tuple[str, int], ...]  # (value, offset) in the order of _nn_z's fields
    element: str

    @property
    def offsets(self) -> list[int]:
        return [offset for name, offset in self.reads if name == self.dense.name]


def plan(scan: ir.Scan) -> PerUnit | None:
    """The per-unit form of the scan's step, or None when its body is not one Dense (with a linear or
    cheap activation) followed by elementwise nodes that read it and the state at fixed offsets."""
    body = scan.body
    loops = [node for node in body.nodes if not fusion.fusable(node)]
    if len(loops) != 1 or not isinstance(loops[0], ir.Dense) or body.output == loops[0].name:
        return None
    dense, units = loops[0], scan.state_size
    if dense.activation not in SCALAR_ACTIVATIONS or body.size_of(body.output) != units:
        return None
    refs = {dense.name: dense.name, scan.state_input: scan.state_input}
    elements = fusion.Elements(body, refs)
    reads: dict[tuple[str, int], str] = {}
    element = elements.offset_element(elements.nodes[body.output], 0, reads, "_nn_z.v{}")
    if element is None or not reads:
        return None
    for name, offset in reads:
        size = dense.units if name == dense.name else scan.state_size
        if name not in refs or offset < 0 or offset + units > size:
            return None
    return PerUnit(dense, units, tuple(reads), element)


def params(unit: PerUnit, filters: list[str], sources: list[str]) -> str:
    """The Dense's rows grouped by unit: struct k is {i: k + 1, w1, b1, w2, b2, ...}, one (w, b) per
    offset the unit reads. `sources` and `filters` select the kernel (alias k, stored transposed, units x
    inputs) and, when there is one, the bias (alias b) in nnsql.tensors."""
    n_in, has_bias = unit.dense.in_features, len(sources) > 1
    fields = ["i: _nn_j + 1"]
    for j, offset in enumerate(unit.offsets, start=1):
        row = f"_nn_j + {offset}" if offset else "_nn_j"
        rows = f"range(({row}) * {n_in} + 1, ({row} + 1) * {n_in} + 1)"
        bias = f"b.value[{row} + 1]" if has_bias else "0.0"
        fields += [f"w{j}: list_select(k.value, {rows})", f"b{j}: {bias}"]
    struct = "{" + ", ".join(fields) + "}"
    return (
        f"(SELECT list_transform(range({unit.units}), lambda _nn_j: {struct}) "
        f"FROM {', '.join(sources)} WHERE {' AND '.join(filters)})"
    )


def inputs_of_units(unit: PerUnit, weights: str, dense_input: str, state: str) -> str:
    """For each unit, a struct of the values its element reads (see PerUnit): its dot products with the
    bound `dense_input` and its values of the `state`. A struct, not a list: DuckDB builds a list of
    values per unit at a quarter more CPU per step."""
    values, j = [], 0
    for name, offset in unit.reads:
        if name != unit.dense.name:
            values.append(f"{state}[_nn_u.i + {offset}]" if offset else f"{state}[_nn_u.i]")
            continue
        j += 1
        linear = f"list_dot_product(_nn_u.w{j}, {dense_input}) + _nn_u.b{j}"
        values.append(scalar_activation(unit.dense.activation, linear))
    fields = ", ".join(f"v{k}: {value}" for k, value in enumerate(values, start=1))
    return f"list_transform({weights}, lambda _nn_u: {{{fields}}})"


def new_state(unit: PerUnit, per_unit: str) -> str:
    """The new state from the bound list of each unit's values."""
    return f"list_transform({per_unit}, lambda _nn_z: {unit.element})"
