"""IR → the optional PL/Python + numpy fast path for PostgreSQL.

The same `<name>.predict(float8[])`, written in plpython3u: the weights are read from nnsql.tensors
once per session into the function's static dictionary (SD) and each call is a few numpy operations.
Needs the plpython3u extension (an untrusted language: a superuser creates it and owns the function) and
numpy in the server's Python. Each IR value is a float64 numpy array; each node is one statement.
"""

from __future__ import annotations

from ..codegen.generator import Dialect
from ..codegen.procedural import ProceduralGenerator
from ..ir import activations
from ..ir import graph as ir
from ..ir.graph import FLOAT32_MAX
from ..target import Capabilities, emitted_kinds, register

TARGET = "postgres+plpython"
ACTIVATIONS = {
    "linear": "{v}",
    "relu": "np.maximum({v}, 0.0)",
    "sigmoid": "np.exp(-np.logaddexp(0.0, -{v}))",
    "tanh": "np.tanh({v})",
    "softmax": "_softmax({v})",
    **{name: activations.formula(name, "numpy", "{v}") for name in activations.FORMULAS},
}
BINARY = {
    "add": "{a} + {b}",
    "sub": "{a} - {b}",
    "mul": "{a} * {b}",
    "max": "np.maximum({a}, {b})",
    "min": "np.minimum({a}, {b})",
}
PRELUDE = """\
import numpy as np

def _softmax(v):
    e = np.exp(v - v.max())
    return e / e.sum()

def gather(x, indices):
    # an index of -1 (padding) reads the 0 appended to the row
    return np.append(x, 0.0)[indices.astype(np.int64)]

def group_max(x, size):
    return x.reshape(-1, size).max(axis=1)

def lookup(x, table, width):
    return table.reshape(-1, width)[x.astype(np.int64)].ravel()

def affine(x, scale, shift):
    return x * scale if shift is None else x * scale + shift

def step_mask(x, steps):
    return np.any(x.reshape(steps, -1) != 0.0, axis=1).astype(np.float64)

def first_outside(x, bound):
    bad = np.flatnonzero((x < 0) | (x >= bound) | (x != np.floor(x)))
    return int(bad[0]) if bad.size else None

key = ({name!r}, {version})
weights = SD.get(key)
if weights is None:
    query = "SELECT tensor, shape, value FROM nnsql.tensors WHERE model = $1 AND version = $2"
    plan = plpy.prepare(query, ["text", "integer"])
    weights = {{row["tensor"]: np.asarray(row["value"], dtype=np.float64).reshape(row["shape"])
               for row in plpy.execute(plan, [{name!r}, {version}])}}
    SD.clear()
    SD[key] = weights
"""

PLPYTHON = Dialect(
    target=TARGET,
    array_type="numpy.ndarray",
    index_base=0,
    literal=repr,
    check="if {condition}:\n    {outcome}",
    outcome_separator="\n    ",
    return_null="return None",
    error="plpy.error({message})",
    error_with_argument="plpy.error({message} % {argument})",
    message_placeholder="%d",
    error_codes=dict.fromkeys(("length", "dimensions", "nulls", "nonfinite", "index"), ""),
    is_null="{x} is None",
    length="len({x})",
    wrong_length="len({x}) != {size}",
    has_nulls="any(value is None for value in {x})",
    # a multidimensional array arrives as nested lists (rectangular: PostgreSQL's arrays are)
    depth="(np.ndim({x}) if {x} and isinstance({x}[0], list) else 1)",
    extent="np.shape({x})[{axis} - 1]",
    flatten="{value} = np.ravel(np.array({x}, dtype=object)).tolist() if {depth} > 1 else {x}",
    pad=("if len({x}) < {size}:\n    {x} = np.concatenate([{x}, np.full({size} - len({x}), {pad})])"),
    both="({a}) and ({b})",
    either="({a}) or ({b})",
    equals="{a} == {b}",
    differs="{a} != {b}",
    prepare="{value} = np.asarray({x}, dtype=np.float64)",
    nonfinite=(
        f"not (np.abs({{x}}) <= {FLOAT32_MAX!r}).all()",  # False for NaN too
        f"np.flatnonzero(~(np.abs({{x}}) <= {FLOAT32_MAX!r}))[0]",
    ),
    outside=("first_outside({x}, {bound}) is not None", "first_outside({x}, {bound})"),
    assign="{y} = {value}",
    weight='weights["{node}.{role}"]',
    null="None",
    slice="{x}[{first}:{end}]",
    concat=("np.concatenate([{parts}])", ", "),
    binary=BINARY,
    zeros="np.zeros({n})",
    loop="for nn_t in range({steps}):",
    loop_reverse="for nn_t in range({last}, -1, -1):",
    end_loop=None,
    masked="not {value}",
    skip="continue",
    step="{x}[nn_t * {features}:(nn_t + 1) * {features}]",
    empty="[]",
    append="{y}.append({part})",
    finish_sequences="{y} = np.concatenate({y})",
)


class PlPythonGenerator(ProceduralGenerator):
    """PL/Python: the shared statements over numpy arrays; products are numpy's `@`."""

    dialect = PLPYTHON

    def var(self, name: str) -> str:
        return f"v_{name}"  # the parameters are lists; their numpy arrays are v_<input>

    def affine(self, node: ir.Dense | ir.PatchDense, rows: str) -> str:
        """activation(rows @ kernel + bias), in numpy."""
        linear = f"{rows} @ {self.weight(node, 'kernel')}"
        if node.bias is not None:
            linear += f" + {self.weight(node, 'bias')}"
        return ACTIVATIONS[node.activation].format(v=f"({linear})")

    def emit_Dense(self, node: ir.Dense, x: str) -> list[str]:
        return [self.assign(self.var(node.name), self.affine(node, x))]

    def emit_PatchDense(self, node: ir.PatchDense, x: str) -> list[str]:
        windows = f"{x}.reshape({node.patches}, {node.size})"
        return [self.assign(self.var(node.name), f"({self.affine(node, windows)}).ravel()")]

    def emit_ActivationNode(self, node: ir.ActivationNode, x: str) -> list[str]:
        return [self.assign(self.var(node.name), ACTIVATIONS[node.activation].format(v=x))]

    def body(self) -> str:
        lines = [PRELUDE.format(name=self.name, version=self.version), *self.checks()]
        lines += self.statements()
        lines.append(f"return {self.var(self.graph.output)}.tolist()")
        return "\n".join(lines)


CAPABILITIES = register(
    Capabilities(target=TARGET, node_kinds=emitted_kinds(PlPythonGenerator), several_outputs=True),
    PlPythonGenerator,
)
