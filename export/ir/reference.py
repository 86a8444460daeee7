"""A numpy executor of the IR, in float64: what the compiled graph computes, without a database.

Tests check each generator's SQL against it, and it backs the optional vectorised Python UDFs, which
score at numpy speed. It runs the same IR the targets are generated from, so it never approves an
export: the parity gate compares every target with Keras itself (export/publish/pipeline.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np

from ..errors import UnsupportedLayer
from . import graph as ir

TARGET = "reference"


def activate(values: np.ndarray, activation: str) -> np.ndarray:
    """Apply an IR activation over the last axis."""
    if activation == "linear":
        return values
    activated: np.ndarray  # numpy's ufuncs are typed as returning Any
    if activation == "relu":
        activated = np.maximum(values, 0.0)
    elif activation == "sigmoid":
        activated = 1.0 / (1.0 + np.exp(-values))
    elif activation == "tanh":
        activated = np.tanh(values)
    elif activation == "softmax":
        shifted = np.exp(values - values.max(axis=-1, keepdims=True))
        activated = shifted / shifted.sum(axis=-1, keepdims=True)
    elif activation in ELEMENTWISE:
        activated = ELEMENTWISE[activation](values)
    else:
        raise ValueError(f"unknown activation {activation!r}")
    return activated


def _softplus(x: np.ndarray) -> np.ndarray:
    softplus: np.ndarray = np.logaddexp(0.0, x)
    return softplus


_erf = np.vectorize(math.erf, otypes=[np.float64])


def _hard_sigmoid(x: np.ndarray) -> np.ndarray:
    return np.clip(x + 3.0, 0.0, 6.0) / 6.0


# Keras's definitions, written here independently of export/ir/activations.py (which the targets render).
SELU = (1.6732632423543772, 1.0507009873554805)
ELEMENTWISE: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0.0))),
    "selu": lambda x: SELU[1] * np.where(x > 0, x, SELU[0] * np.expm1(np.minimum(x, 0.0))),
    "softplus": _softplus,
    "softsign": lambda x: x / (1.0 + np.abs(x)),
    "silu": lambda x: x / (1.0 + np.exp(-x)),
    "hard_sigmoid": _hard_sigmoid,
    "hard_sigmoid_keras2": lambda x: np.clip(0.2 * x + 0.5, 0.0, 1.0),
    "hard_silu": lambda x: x * _hard_sigmoid(x),
    "exponential": np.exp,
    "relu6": lambda x: np.clip(x, 0.0, 6.0),
    "leaky_relu": lambda x: np.where(x >= 0, x, 0.2 * x),
    "mish": lambda x: x * np.tanh(_softplus(x)),
    "gelu": lambda x: 0.5 * x * (1.0 + _erf(x / np.sqrt(2.0))),
    "gelu_tanh": lambda x: 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3))),
    "log_sigmoid": lambda x: -_softplus(-x),
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "ln": np.log,
    "step": lambda x: (x > 0).astype(np.float64),
    "count_reciprocal": lambda x: np.divide(1.0, x, out=np.full_like(x, np.nan), where=x > 0.5),
}


def _dense(node: ir.Dense, x: np.ndarray) -> np.ndarray:
    out = x @ node.kernel.float64
    if node.bias is not None:
        out = out + node.bias.float64
    return activate(out, node.activation)


def _activation(node: ir.ActivationNode, x: np.ndarray) -> np.ndarray:
    return activate(x, node.activation)


def _reshape(node: ir.Reshape, x: np.ndarray) -> np.ndarray:
    return x.reshape((x.shape[0], *node.shape))


def _gather(node: ir.Gather, x: np.ndarray) -> np.ndarray:
    flat = x.reshape(len(x), -1)
    padded = np.concatenate([flat, np.zeros((len(x), 1))], axis=1)  # index -1 reads the appended zero
    return padded[:, node.indices.array.astype(np.int64)]


def _patch_dense(node: ir.PatchDense, x: np.ndarray) -> np.ndarray:
    patches = x.reshape(len(x), node.patches, node.size) @ node.kernel.float64
    if node.bias is not None:
        patches = patches + node.bias.float64
    return activate(patches, node.activation).reshape(len(x), -1)


def _group_max(node: ir.GroupMax, x: np.ndarray) -> np.ndarray:
    grouped: np.ndarray = x.reshape(len(x), -1, node.size).max(axis=2)
    return grouped


def _concatenate(node: ir.Concatenate, *parts: np.ndarray) -> np.ndarray:
    """The flat values end to end (an input keeps its shape here, so flatten it first)."""
    return np.concatenate([part.reshape(len(part), -1) for part in parts], axis=1)


def _slice(node: ir.Slice, x: np.ndarray) -> np.ndarray:
    return x.reshape(len(x), -1)[:, node.start : node.stop]


BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _binary(node: ir.Binary, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    combined: np.ndarray = BINARY[node.op](a.reshape(len(a), -1), b.reshape(len(b), -1))
    return combined


def _lookup(node: ir.Lookup, x: np.ndarray) -> np.ndarray:
    rows = node.table.float64[x.reshape(len(x), -1).astype(np.int64)]
    return rows.reshape(len(x), -1)


def _affine(node: ir.Affine, x: np.ndarray) -> np.ndarray:
    flat = x.reshape(len(x), -1) * node.scale.float64
    return flat if node.shift is None else flat + node.shift.float64


def _step_mask(node: ir.StepMask, x: np.ndarray) -> np.ndarray:
    present: np.ndarray = np.any(x.reshape(len(x), node.steps, -1) != 0.0, axis=2)
    return present.astype(np.float64)


def _scan(node: ir.Scan, x: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """The body run on each step in turn; masked rows keep their state (Keras's rule)."""
    steps = x.reshape(len(x), node.steps, node.features)
    state = np.zeros((len(x), node.state_size))
    outputs = []
    for t in reversed(range(node.steps)) if node.reverse else range(node.steps):
        new = run(node.body, {node.step_input: steps[:, t, :], node.state_input: state})
        keep = np.ones((len(x), 1), bool) if mask is None else mask[:, t : t + 1] > 0
        state = np.where(keep, new, state)
        emitted = state[:, : node.output_size]
        outputs.append(np.where(keep, emitted, 0.0) if node.zero_masked else emitted)
    return np.concatenate(outputs, axis=1) if node.sequences else state[:, : node.output_size]


_KERNELS: dict[type, Callable[..., np.ndarray]] = {
    ir.Concatenate: _concatenate,
    ir.Slice: _slice,
    ir.Affine: _affine,
    ir.Lookup: _lookup,
    ir.Binary: _binary,
    ir.StepMask: _step_mask,
    ir.Scan: _scan,
    ir.Dense: _dense,
    ir.ActivationNode: _activation,
    ir.Reshape: _reshape,
    ir.Gather: _gather,
    ir.PatchDense: _patch_dense,
    ir.GroupMax: _group_max,
}


def run(graph: ir.Graph, inputs: Mapping[str, np.ndarray] | np.ndarray) -> np.ndarray:
    """Evaluate the graph on a batch; a bare array feeds the single input. Returns the output."""
    if isinstance(inputs, np.ndarray):
        inputs = {graph.inputs[0].name: inputs}
    with np.errstate(over="ignore", under="ignore"):  # exp beyond float64: inf and 0, as meant
        return _run(graph, inputs)


def _run(graph: ir.Graph, inputs: Mapping[str, np.ndarray]) -> np.ndarray:
    values: dict[str, np.ndarray] = {}
    for spec in graph.inputs:
        batch = np.asarray(inputs[spec.name], dtype=np.float64)
        values[spec.name] = batch.reshape((batch.shape[0], *spec.shape))
    for node in graph.nodes:
        kernel = _KERNELS.get(type(node))
        if kernel is None:
            raise UnsupportedLayer(node.source or node.name, TARGET, node.kind)
        values[node.name] = kernel(node, *(values[name] for name in node.inputs))
    return values[graph.output]
