"""IR → the optional PL/Python + numpy fast path for PostgreSQL.

The same `<name>.predict_proba(float8[])`, written in plpython3u: the weights are read from nnsql.tensors
once per session into the function's static dictionary (SD) and each call is a few numpy operations.
Needs the plpython3u extension (an untrusted language: a superuser creates it and owns the function) and
numpy in the server's Python. Each IR value is a float64 numpy array; each node is one statement.
"""

from __future__ import annotations

from collections.abc import Iterator

from export import activations, ir
from export.target import Capabilities, emitted_kinds, emitter, register

TARGET = "postgres+plpython"
ACTIVATIONS = {
    "linear": "{v}",
    "relu": "np.maximum({v}, 0.0)",
    "sigmoid": "np.exp(-np.logaddexp(0.0, -{v}))",
    "tanh": "np.tanh({v})",
    "softmax": "_softmax({v})",
    **{name: activations.formula(name, "numpy", "{v}") for name in activations.FORMULAS},
}
PRELUDE = """\
import numpy as np

def _softmax(v):
    e = np.exp(v - v.max())
    return e / e.sum()

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


class PlPythonGenerator:
    def __init__(self, graph: ir.Graph, name: str, version: int) -> None:
        self.graph = graph
        self.name = name
        self.version = version

    def var(self, value: str) -> str:
        return f"v_{value}"

    def affine(self, node: ir.Dense | ir.PatchDense, rows: str) -> str:
        """activation(rows @ kernel + bias), in numpy."""
        linear = f'{rows} @ weights["{node.name}.kernel"]'
        if node.bias is not None:
            linear += f' + weights["{node.name}.bias"]'
        return ACTIVATIONS[node.activation].format(v=f"({linear})")

    def emit_Dense(self, node: ir.Dense, x: str) -> str:
        return f"{self.var(node.name)} = {self.affine(node, x)}"

    def emit_Concatenate(self, node: ir.Concatenate, *parts: str) -> str:
        return f"{self.var(node.name)} = np.concatenate([{', '.join(parts)}])"

    def emit_GRU(self, node: ir.GRU, x: str) -> str:
        """Keras's GRU (reset_after=True) over the steps of the flat row; masked steps keep the state."""
        units, name = node.units, node.name
        bias = f'weights["{name}.bias"]' if node.bias is not None else f"np.zeros((2, {3 * units}))"
        keep = "True" if node.mask_value is None else f"bool(np.any(xt != {node.mask_value!r}))"
        return "\n".join(
            [
                f"_steps = {x}.reshape({node.steps}, {node.features})",
                f'_k, _u, _b = weights["{name}.kernel"], weights["{name}.recurrent_kernel"], {bias}',
                f"h = np.zeros({units})",
                "for xt in _steps:",
                f"    if not {keep}:",
                "        continue",
                "    xz, xr, xh = np.split(xt @ _k + _b[0], 3)",
                "    hz, hr, hh = np.split(h @ _u + _b[1], 3)",
                "    z = 1 / (1 + np.exp(-(xz + hz)))",
                "    r = 1 / (1 + np.exp(-(xr + hr)))",
                "    h = z * h + (1 - z) * np.tanh(xh + r * hh)",
                f"{self.var(name)} = h",
            ]
        )

    def emit_Gather(self, node: ir.Gather, x: str) -> str:
        """An index of -1 (padding) reads the 0 appended to the row."""
        return f'{self.var(node.name)} = np.append({x}, 0.0)[weights["{node.name}.indices"].astype(np.int64)]'

    def emit_PatchDense(self, node: ir.PatchDense, x: str) -> str:
        windows = f"{x}.reshape({node.patches}, {node.size})"
        return f"{self.var(node.name)} = ({self.affine(node, windows)}).ravel()"

    def emit_GroupMax(self, node: ir.GroupMax, x: str) -> str:
        return f"{self.var(node.name)} = {x}.reshape(-1, {node.size}).max(axis=1)"

    def emit_ActivationNode(self, node: ir.ActivationNode, x: str) -> str:
        return f"{self.var(node.name)} = {ACTIVATIONS[node.activation].format(v=x)}"

    def emit_Reshape(self, node: ir.Reshape, x: str) -> str:
        return f"{self.var(node.name)} = {x}"

    def checks(self) -> Iterator[str]:
        for spec in self.graph.inputs:
            errors = ir.InputErrors.of(self.name, spec)
            yield f"if {spec.name} is None:\n    return None"
            yield (
                f"if len({spec.name}) != {spec.size}:\n"
                f"    plpy.error({errors.length + '%d'!r} % len({spec.name}))"
            )
            yield (f"if any(value is None for value in {spec.name}):\n    plpy.error({errors.nulls!r})")
            yield f"{self.var(spec.name)} = np.asarray({spec.name}, dtype=np.float64)"
            yield (
                f"_bad = np.flatnonzero(~np.isfinite({self.var(spec.name)}))\n"
                f"if _bad.size:\n    plpy.error({errors.nonfinite + '%d'!r} % _bad[0])"
            )

    def body(self) -> str:
        lines = [PRELUDE.format(name=self.name, version=self.version), *self.checks()]
        for node in self.graph.nodes:
            lines.append(emitter(self, node, TARGET)(node, *(self.var(n) for n in node.inputs)))
        lines.append(f"return {self.var(self.graph.output)}.tolist()")
        return "\n".join(lines)


CAPABILITIES = register(Capabilities(target=TARGET, node_kinds=emitted_kinds(PlPythonGenerator)))
