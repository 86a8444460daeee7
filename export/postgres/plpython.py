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

    def emit_Slice(self, node: ir.Slice, x: str) -> str:
        return f"{self.var(node.name)} = {x}[{node.start}:{node.stop}]"

    def emit_Binary(self, node: ir.Binary, a: str, b: str) -> str:
        return f"{self.var(node.name)} = {BINARY[node.op].format(a=a, b=b)}"

    def emit_Lookup(self, node: ir.Lookup, x: str) -> str:
        return f'{self.var(node.name)} = weights["{node.name}.table"][{x}.astype(np.int64)].ravel()'

    def emit_Affine(self, node: ir.Affine, x: str) -> str:
        shift = f' + weights["{node.name}.shift"]' if node.shift is not None else ""
        return f'{self.var(node.name)} = {x} * weights["{node.name}.scale"]{shift}'

    def emit_StepMask(self, node: ir.StepMask, x: str) -> str:
        return f"{self.var(node.name)} = np.any({x}.reshape({node.steps}, -1) != 0.0, axis=1)"

    def emit_Scan(self, node: ir.Scan, x: str, mask: str | None = None) -> str:
        """A Python loop over the steps running the body's statements; see ir.Scan for the rules."""
        state, outputs, size = self.var(node.state_input), f"_outputs_{node.name}", node.output_size
        order = f"range({node.steps} - 1, -1, -1)" if node.reverse else f"range({node.steps})"
        inner = []
        if mask is not None:
            skipped = f"np.zeros({size})" if node.zero_masked else f"{state}[:{size}]"
            inner += [
                f"if not {mask}[_t]:",
                f"    {outputs}.append({skipped})" if node.sequences else "",
                "    continue",
            ]
        inner.append(f"{self.var(node.step_input)} = {x}[_t * {node.features}:(_t + 1) * {node.features}]")
        inner += self.statements(node.body)
        inner.append(f"{state} = {self.var(node.body.output)}")
        if node.sequences:
            inner.append(f"{outputs}.append({state}[:{size}])")
        result = f"np.concatenate({outputs})" if node.sequences else f"{state}[:{size}]"
        lines = [f"{state} = np.zeros({node.state_size})", f"{outputs} = []", f"for _t in {order}:"]
        lines += [f"    {line}" for text in inner if text for line in text.splitlines()]
        return "\n".join([*lines, f"{self.var(node.name)} = {result}"])

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
            if spec.dtype == "int32":
                x = self.var(spec.name)
                yield (
                    f"_bad = np.flatnonzero(({x} < 0) | ({x} >= {spec.bound}) | ({x} != np.floor({x})))\n"
                    f"if _bad.size:\n    plpy.error({errors.index + '%d'!r} % _bad[0])"
                )

    def statements(self, graph: ir.Graph) -> list[str]:
        return [
            emitter(self, node, TARGET)(node, *(self.var(n) for n in node.inputs)) for node in graph.nodes
        ]

    def body(self) -> str:
        lines = [PRELUDE.format(name=self.name, version=self.version), *self.checks()]
        lines += self.statements(self.graph)
        lines.append(f"return {self.var(self.graph.output)}.tolist()")
        return "\n".join(lines)


CAPABILITIES = register(
    Capabilities(target=TARGET, node_kinds=emitted_kinds(PlPythonGenerator), several_outputs=True)
)
