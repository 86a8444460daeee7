"""Lowering: composite IR nodes → the primitive operations every target implements once.

A Keras recurrent layer arrives as an `ir.Recurrent`; it leaves as an `ir.Scan` whose body computes one
step from primitives (Dense, Slice, Binary, ActivationNode, Concatenate). A new recurrent cell is one
function here, `CELLS[name]`, and nothing in any target. This module knows neither Keras nor SQL.

Cells follow Keras's step equations (keras/src/layers/rnn): gate order [z, r, h] for the GRU and
[i, f, c, o] for the LSTM, x·W + b + h·U with the GRU's second bias row on the recurrent product when
reset_after is set, and the LSTM's state [h, c] carried as one vector whose first `units` values are h.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import ExportError
from . import graph as ir

# The node kinds a scan's body is made of: a target that runs scans implements these too.
BODY_KINDS = frozenset({"Dense", "Slice", "Binary", "Concatenate", "ActivationNode"})


class Body:
    """Builds a Scan body: each method appends one primitive named `<scan>_<role>` and returns its name."""

    def __init__(self, node: ir.Recurrent, state_size: int) -> None:
        self.node = node
        self.prefix = node.name
        self.x = f"{node.name}_x"
        self.state = f"{node.name}_s"
        self.inputs = (
            ir.TensorSpec(self.x, (node.features,)),
            ir.TensorSpec(self.state, (state_size,)),
        )
        self.nodes: list[ir.Node] = []

    def add(self, node: ir.Node) -> str:
        self.nodes.append(node)
        return node.name

    def name(self, role: str) -> str:
        return f"{self.prefix}_{role}"

    def dense(
        self, role: str, x: str, kernel: np.ndarray, bias: np.ndarray | None, act: str = "linear"
    ) -> str:
        weights = ir.Weights(bias) if bias is not None else None
        return self.add(
            ir.Dense(
                name=self.name(role),
                inputs=(x,),
                kernel=ir.Weights(kernel),
                bias=weights,
                activation=act,
                source=self.node.source,
            )
        )

    def slice(self, role: str, x: str, start: int, stop: int) -> str:
        return self.add(ir.Slice(name=self.name(role), inputs=(x,), start=start, stop=stop))

    def binary(self, role: str, op: str, a: str, b: str) -> str:
        return self.add(ir.Binary(name=self.name(role), inputs=(a, b), op=op))

    def activate(self, role: str, x: str, activation: str) -> str:
        if activation == "linear":
            return x
        return self.add(ir.ActivationNode(name=self.name(role), inputs=(x,), activation=activation))

    def concat(self, role: str, *parts: str) -> str:
        return self.add(ir.Concatenate(name=self.name(role), inputs=parts))

    def graph(self, output: str) -> ir.Graph:
        return ir.Graph(inputs=self.inputs, nodes=tuple(self.nodes), output=output)


def _arrays(node: ir.Recurrent) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Kernel, recurrent kernel and the bias as one flat row (the GRU's two rows one after the other)."""
    bias = node.bias.array.astype(np.float32).ravel() if node.bias is not None else None
    return node.kernel.array, node.recurrent_kernel.array, bias


def simple_cell(node: ir.Recurrent) -> tuple[ir.Graph, int]:
    """h' = activation(x·W + h·U + b): one product over [x, h]."""
    body = Body(node, node.units)
    kernel, recurrent, bias = _arrays(node)
    joined = body.concat("xh", body.x, body.state)
    stacked = np.vstack([kernel, recurrent])
    return body.graph(body.dense("h", joined, stacked, bias, node.activation)), node.units


def lstm_cell(node: ir.Recurrent) -> tuple[ir.Graph, int]:
    """z = [x, h]·[W; U] + b; i, f, o = σ(z_i, z_f, z_o), g = act(z_c); c' = f·c + i·g; h' = o·act(c').
    The state is [h, c]."""
    units = node.units
    body = Body(node, 2 * units)
    kernel, recurrent, bias = _arrays(node)
    h = body.slice("h", body.state, 0, units)
    c = body.slice("c", body.state, units, 2 * units)
    z = body.dense("z", body.concat("xh", body.x, h), np.vstack([kernel, recurrent]), bias)
    gate = {name: body.slice(f"z{name}", z, k * units, (k + 1) * units) for k, name in enumerate("ifco")}
    i = body.activate("i", gate["i"], node.recurrent_activation)
    f = body.activate("f", gate["f"], node.recurrent_activation)
    o = body.activate("o", gate["o"], node.recurrent_activation)
    g = body.activate("g", gate["c"], node.activation)
    c_next = body.binary("c2", "add", body.binary("fc", "mul", f, c), body.binary("ig", "mul", i, g))
    h_next = body.binary("h2", "mul", o, body.activate("tc", c_next, node.activation))
    return body.graph(body.concat("next", h_next, c_next)), 2 * units


def _gru_update(body: Body, node: ir.Recurrent, z_in: str, candidate_in: str) -> str:
    """h' = z·h + (1 − z)·ĥ, written h' = ĥ + z·(h − ĥ)."""
    z = body.activate("z", z_in, node.recurrent_activation)
    candidate = body.activate("hh", candidate_in, node.activation)
    carried = body.binary("zd", "mul", z, body.binary("d", "sub", body.state, candidate))
    return body.binary("next", "add", candidate, carried)


def gru_cell(node: ir.Recurrent) -> tuple[ir.Graph, int]:
    """reset_after=True: one product over [x, h] gives [z, r] (both bias rows summed), x·W_h + b_h and
    h·U_h + b'_h side by side; ĥ = act(x·W_h + b_h + r·(h·U_h + b'_h))."""
    units, features = node.units, node.features
    body = Body(node, units)
    kernel, recurrent, bias = _arrays(node)
    bias = np.zeros((2, 3 * units), np.float32) if bias is None else bias.reshape(2, 3 * units)
    stacked = np.zeros((features + units, 4 * units), np.float32)
    stacked[:features, : 3 * units] = kernel  # [z, r, candidate] from x
    stacked[features:, : 2 * units] = recurrent[:, : 2 * units]  # [z, r] from h
    stacked[features:, 3 * units :] = recurrent[:, 2 * units :]  # candidate from h, kept apart
    joined_bias = np.concatenate(
        [bias[0, : 2 * units] + bias[1, : 2 * units], bias[0, 2 * units :], bias[1, 2 * units :]]
    )
    z_all = body.dense("zrh", body.concat("xh", body.x, body.state), stacked, joined_bias)
    r = body.activate("r", body.slice("rz", z_all, units, 2 * units), node.recurrent_activation)
    x_h, h_h = body.slice("xc", z_all, 2 * units, 3 * units), body.slice("hc", z_all, 3 * units, 4 * units)
    candidate = body.binary("cs", "add", x_h, body.binary("rh", "mul", r, h_h))
    return body.graph(_gru_update(body, node, body.slice("zz", z_all, 0, units), candidate)), units


def gru_v1_cell(node: ir.Recurrent) -> tuple[ir.Graph, int]:
    """reset_after=False (Keras 2's default): ĥ = act(x·W_h + b_h + (r·h)·U_h)."""
    units = node.units
    body = Body(node, units)
    kernel, recurrent, bias = _arrays(node)
    bias = np.zeros(3 * units, np.float32) if bias is None else bias.reshape(3 * units)
    gates = np.vstack([kernel[:, : 2 * units], recurrent[:, : 2 * units]])
    zr = body.dense("zr", body.concat("xh", body.x, body.state), gates, bias[: 2 * units])
    r = body.activate("r", body.slice("rz", zr, units, 2 * units), node.recurrent_activation)
    x_h = body.dense("xc", body.x, kernel[:, 2 * units :], bias[2 * units :])
    h_h = body.dense("hc", body.binary("rh", "mul", r, body.state), recurrent[:, 2 * units :], None)
    candidate = body.binary("cs", "add", x_h, h_h)
    return body.graph(_gru_update(body, node, body.slice("zz", zr, 0, units), candidate)), units


CELLS: dict[str, Callable[[ir.Recurrent], tuple[ir.Graph, int]]] = {
    "simple": simple_cell,
    "lstm": lstm_cell,
    "gru": gru_cell,
    "gru_v1": gru_v1_cell,
}


def lower_recurrent(node: ir.Recurrent) -> ir.Scan:
    body, _ = CELLS[node.cell](node)
    return ir.Scan(
        name=node.name,
        inputs=node.inputs,
        body=body,
        steps=node.steps,
        output_size=node.units,
        reverse=node.go_backwards,
        sequences=node.return_sequences,
        zero_masked=node.zero_masked,
        source=node.source,
    )


def grouped_softmax(
    name_for: Callable[[str], str],
    output: str,
    z: str,
    size: int,
    group: int,
    *,
    log: bool,
    source: str,
    floor: float | None = None,
) -> list[ir.Node]:
    """softmax, or log_softmax, over each of the size/group consecutive groups of `group` values (one
    group for a flat vector; one per step or position over the last axis), from primitives:
    d = z − max(group), s = Σ exp(d) per group (a PatchDense of ones), log_softmax = d − ln s and
    softmax = exp(log_softmax). Every exp argument is ≤ 0 and every ln argument ≥ 1. With `floor`, d is
    raised to at least `floor` (max(d, floor)) before its exp, so that masked values (z = −1e9, whose
    weight is 0 to float precision) never reach an exp that underflows (PostgreSQL raises)."""
    groups = size // group
    each = ir.Weights(np.repeat(np.arange(groups), group).astype(np.float32))  # value k → its group
    names = {role: name_for(f"{output}_{role}") for role in ("max", "max_each", "d", "exp", "sum", "ln")}
    names |= {"ln_each": name_for(f"{output}_ln_each"), "log": output if log else name_for(f"{output}_log")}
    floored: list[ir.Node] = []
    if floor is not None:
        low, raw = name_for(f"{output}_floor"), name_for(f"{output}_d_raw")
        zero, floors = ir.Weights(np.zeros(size)), ir.Weights(np.full(size, floor))
        floored = [
            ir.Binary(name=raw, inputs=(z, names["max_each"]), op="sub", source=source),
            ir.Affine(name=low, inputs=(raw,), scale=zero, shift=floors, source=source),
            ir.Binary(name=names["d"], inputs=(raw, low), op="max", source=source),
        ]
    nodes: list[ir.Node] = [
        ir.GroupMax(name=names["max"], inputs=(z,), size=group, source=source),
        ir.Gather(name=names["max_each"], inputs=(names["max"],), indices=each, source=source),
        *(floored or [ir.Binary(name=names["d"], inputs=(z, names["max_each"]), op="sub", source=source)]),
        ir.ActivationNode(name=names["exp"], inputs=(names["d"],), activation="exponential", source=source),
        ir.PatchDense(
            name=names["sum"],
            inputs=(names["exp"],),
            kernel=ir.Weights(np.ones((group, 1), dtype=np.float32)),
            patches=groups,
            source=source,
        ),
        ir.ActivationNode(name=names["ln"], inputs=(names["sum"],), activation="ln", source=source),
        ir.Gather(name=names["ln_each"], inputs=(names["ln"],), indices=each, source=source),
        ir.Binary(name=names["log"], inputs=(names["d"], names["ln_each"]), op="sub", source=source),
    ]
    if not log:
        nodes.append(
            ir.ActivationNode(name=output, inputs=(names["log"],), activation="exponential", source=source)
        )
    return nodes


def lower(nodes: list[ir.Node]) -> list[ir.Node]:
    """Every composite node replaced by its primitives; names stay unique (checked)."""
    lowered = [lower_recurrent(node) if isinstance(node, ir.Recurrent) else node for node in nodes]
    graph = ir.Graph(inputs=(), nodes=tuple(lowered), output="")
    names = [node.name for node in graph.all_nodes()] + [spec.name for spec in graph.all_inputs()]
    clashes = sorted({name for name in names if names.count(name) > 1})
    if clashes:
        raise ExportError(f"layer names clash with names the lowering derives: {', '.join(clashes)}")
    return lowered
