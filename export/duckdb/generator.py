"""IR → DuckDB SQL: schema-qualified macros that run the network inside any DuckDB client.

Every IR value is a DOUBLE[] list (row-major). Each node's result is bound once with the idiom
`list_transform([expr], lambda v: rest)[1]`, so no expression is computed twice. Weights come from one
uncorrelated subquery, `<name>.params()`, evaluated once per query; DuckDB forbids subqueries inside
lambda bodies, so the params list is the outermost lambda's input and everything else reads it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from export import activations, ir
from export.sqlformat import wrap
from export.sqltext import literal
from export.target import Capabilities, emitted_kinds, emitter, register

TARGET = "duckdb"
TEMPLATES = Path(__file__).resolve().parents[2] / "sql" / "duckdb"
PARAMS = "_nn_p"

BINARY = {"add": "+", "sub": "-", "mul": "*"}
SCALAR_ACTIVATIONS = {
    "linear": "{z}",
    "relu": "greatest({z}, 0.0)",
    "sigmoid": "1.0 / (1.0 + exp(-({z})))",
    "tanh": "tanh({z})",
}


def value_ref(name: str) -> str:
    """The lambda variable that holds an IR value inside the macro body."""
    return f"_nn_v_{name}"


def softmax(vector: str) -> str:
    """Numerically safe softmax of a bound list variable `vector`."""
    shifted = (
        f"list_transform([list_max({vector})], lambda _nn_m: "
        f"list_transform({vector}, lambda _nn_e: exp(_nn_e - _nn_m)))[1]"
    )
    return (
        f"list_transform([{shifted}], lambda _nn_x: list_transform([list_sum(_nn_x)], "
        f"lambda _nn_s: list_transform(_nn_x, lambda _nn_e: _nn_e / _nn_s))[1])[1]"
    )


def scalar_activation(activation: str, z: str) -> str:
    if activation in SCALAR_ACTIVATIONS:
        return SCALAR_ACTIVATIONS[activation].format(z=z)
    return activations.formula(activation, "sql", z)


def apply_activation(vector_expr: str, activation: str) -> str:
    if activation == "softmax":
        return f"list_transform([{vector_expr}], lambda _nn_v: {softmax('_nn_v')})[1]"
    if activation == "linear":
        return vector_expr
    return f"list_transform({vector_expr}, lambda _nn_e: {scalar_activation(activation, '_nn_e')})"


class DuckDBGenerator:
    """Walks an IR graph; one `emit_<Kind>` method per supported node kind."""

    def __init__(self, graph: ir.Graph, name: str, version: int) -> None:
        self.graph = graph
        self.name = name
        self.version = version

    # -- weights ------------------------------------------------------------------------------
    def tensor_filter(self, alias: str, tensor: str) -> str:
        return (
            f"{alias}.model = {literal(self.name)} AND {alias}.version = {self.version} "
            f"AND {alias}.tensor = {literal(tensor)}"
        )

    def params_Dense(self, node: ir.Dense) -> str:
        """A list of {w, b} structs, one per unit: the kernel is stored transposed (units x inputs)."""
        n_in = node.in_features
        sources = ["nnsql.tensors k"]
        filters = [self.tensor_filter("k", f"{node.name}.kernel")]
        bias = "0.0"
        if node.bias is not None:
            sources.append("nnsql.tensors b")
            filters.append(self.tensor_filter("b", f"{node.name}.bias"))
            bias = "b.value[_nn_j + 1]"
        unit = f"{{w: k.value[_nn_j * {n_in} + 1 : (_nn_j + 1) * {n_in}], b: {bias}}}"
        return (
            f"(SELECT list_transform(range({node.units}), lambda _nn_j: {unit}) "
            f"FROM {', '.join(sources)} WHERE {' AND '.join(filters)})"
        )

    def params_PatchDense(self, node: ir.PatchDense) -> str:
        """The convolution kernel as per-filter {w, b} structs, exactly like a Dense layer's units."""
        return self.params_Dense(node)  # type: ignore[arg-type]

    def params_Gather(self, node: ir.Gather) -> str:
        """1-based positions for list_select, once per query; padding (-1) points past the row's end,
        where emit_Gather appends a 0."""
        past_end = self.graph.size_of(node.inputs[0]) + 1
        position = f"CASE WHEN _nn_i < 0 THEN {past_end} ELSE _nn_i::INTEGER + 1 END"
        where = self.tensor_filter("k", f"{node.name}.indices")
        return (
            f"(SELECT list_transform(k.value, lambda _nn_i: {position}) FROM nnsql.tensors k WHERE {where})"
        )

    def params(self) -> Iterator[tuple[str, str]]:
        for node in self.graph.all_nodes():
            method = getattr(self, f"params_{node.kind}", None)
            if method is not None:
                yield node.name, method(node)

    # -- nodes --------------------------------------------------------------------------------
    def emit_Dense(self, node: ir.Dense, x: str) -> str:
        """The four cheap activations are fused into each unit; the others (which name their input more
        than once) are applied to the finished vector, so no dot product is computed twice."""
        linear = f"list_dot_product(_nn_u.w, {x}) + _nn_u.b"
        units = f"list_transform({PARAMS}.{node.name}, lambda _nn_u: {{}})"
        if node.activation in SCALAR_ACTIVATIONS:
            return units.format(scalar_activation(node.activation, linear))
        return apply_activation(units.format(linear), node.activation)

    def emit_Concatenate(self, node: ir.Concatenate, *parts: str) -> str:
        joined = parts[0]
        for part in parts[1:]:
            joined = f"list_concat({joined}, {part})"
        return joined

    def emit_Slice(self, node: ir.Slice, x: str) -> str:
        return f"{x}[{node.start + 1}:{node.stop}]"

    def emit_Binary(self, node: ir.Binary, a: str, b: str) -> str:
        return f"list_transform({a}, lambda _nn_a, _nn_i: _nn_a {BINARY[node.op]} {b}[_nn_i])"

    def emit_StepMask(self, node: ir.StepMask, x: str) -> str:
        width = self.graph.size_of(node.inputs[0]) // node.steps
        step = f"{x}[_nn_t * {width} + 1 : (_nn_t + 1) * {width}]"
        kept = f"list_bool_or(list_transform({step}, lambda _nn_e: _nn_e <> 0))"
        return f"list_transform(range({node.steps}), lambda _nn_t: CASE WHEN {kept} THEN 1.0 ELSE 0.0 END)"

    def emit_Scan(self, node: ir.Scan, x: str, mask: str | None = None) -> str:
        """A list_reduce over the step indices; the accumulator {s: state, o: outputs, t: step} is also
        the element type (list_reduce needs one type). Without sequences, masked steps are filtered out
        before the loop: Keras carries the state over them, so skipping them is exact."""
        order = f"range({node.steps - 1}, -1, -1)" if node.reverse else f"range({node.steps})"
        if mask is not None and not node.sequences:
            order = f"list_filter({order}, lambda _nn_t: {mask}[_nn_t + 1] > 0)"
        features, size, empty = node.features, node.output_size, "[]::DOUBLE[]"
        step = f"{x}[_nn_step.t * {features} + 1 : (_nn_step.t + 1) * {features}]"
        lets = [("_nn_acc.s", value_ref(node.state_input)), (step, value_ref(node.step_input))]
        lets += [(self.emit(body_node), value_ref(body_node.name)) for body_node in node.body.nodes]
        new = value_ref(node.body.output)
        outputs = f"list_concat(_nn_acc.o, {new}[1:{size}])" if node.sequences else empty
        update = self.let(lets, f"{{s: {new}, o: {outputs}, t: _nn_step.t}}")
        if mask is not None and node.sequences:
            skipped = f"list_transform(range({size}), lambda _nn_i: 0.0::DOUBLE)" if node.zero_masked else f"_nn_acc.s[1:{size}]"
            carried = f"{{s: _nn_acc.s, o: list_concat(_nn_acc.o, {skipped}), t: _nn_step.t}}"
            update = f"CASE WHEN {mask}[_nn_step.t + 1] > 0 THEN {update} ELSE {carried} END"
        zeros = f"list_transform(range({node.state_size}), lambda _nn_i: 0.0::DOUBLE)"
        reduced = (
            f"list_reduce(list_transform({order}, lambda _nn_t: {{s: {empty}, o: {empty}, t: _nn_t}}), "
            f"lambda _nn_acc, _nn_step: {update}, {{s: {zeros}, o: {empty}, t: -1}})"
        )
        return f"{reduced}.o" if node.sequences else f"{reduced}.s[1:{size}]"

    @staticmethod
    def let(bindings: list[tuple[str, str]], result: str) -> str:
        """`result` with each (expression, variable) bound in turn: list_transform([e], lambda v: ...)[1]."""
        opened = "".join(f"list_transform([{expr}], lambda {var}: " for expr, var in bindings)
        return f"{opened}{result}{')[1]' * len(bindings)}"

    def emit_Gather(self, node: ir.Gather, x: str) -> str:
        """Every window's values (list_select, in C++); padding reads the 0 appended to the row."""
        return f"list_select(list_append({x}, 0.0::DOUBLE), {PARAMS}.{node.name})"

    def emit_PatchDense(self, node: ir.PatchDense, x: str) -> str:
        """The kernel over each window: a Dense per output position, flattened position-major."""
        window = f"{x}[_nn_q * {node.size} + 1 : (_nn_q + 1) * {node.size}]"
        linear = f"list_dot_product(_nn_u.w, {window}) + _nn_u.b"
        fused = node.activation in SCALAR_ACTIVATIONS
        unit = scalar_activation(node.activation, linear) if fused else linear
        per_position = f"list_transform({PARAMS}.{node.name}, lambda _nn_u: {unit})"
        values = f"flatten(list_transform(range({node.patches}), lambda _nn_q: {per_position}))"
        return values if fused else apply_activation(values, node.activation)

    def emit_GroupMax(self, node: ir.GroupMax, x: str) -> str:
        window = f"{x}[_nn_q * {node.size} + 1 : (_nn_q + 1) * {node.size}]"
        return f"list_transform(range({self.graph.size_of(node.name)}), lambda _nn_q: list_max({window}))"

    def emit_ActivationNode(self, node: ir.ActivationNode, x: str) -> str:
        return apply_activation(x, node.activation)

    def emit_Reshape(self, node: ir.Reshape, x: str) -> str:
        return x  # values are flat row-major lists already

    def emit(self, node: ir.Node) -> str:
        method = emitter(self, node, TARGET)
        return method(node, *(value_ref(name) for name in node.inputs))

    # -- whole macros -------------------------------------------------------------------------
    def bindings(self) -> Iterator[tuple[str, str]]:
        """(list expression, lambda variable) pairs: params, inputs, then one per node."""
        yield f"{self.name}.params()", PARAMS
        for spec in self.graph.inputs:
            yield f"[{spec.name}::DOUBLE[]]", value_ref(spec.name)
        for node in self.graph.nodes:
            yield f"[{self.emit(node)}]", value_ref(node.name)

    def body(self) -> str:
        """Nested let-bindings, one per line: list_transform([value], lambda name: ...)[1]."""
        indent = "\n            "
        bound = list(self.bindings())
        lets = "".join(f"{indent}list_transform({expr}, lambda {var}:" for expr, var in bound)
        return f"({lets}{indent}{value_ref(self.graph.output)}{indent}{')[1]' * len(bound)})"

    def checks(self) -> Iterator[str]:
        for spec in self.graph.inputs:
            errors = ir.InputErrors.of(self.name, spec)
            length_error = literal(errors.length)
            yield f"WHEN {spec.name} IS NULL THEN NULL"
            yield (f"WHEN len({spec.name}) <> {spec.size} THEN error({length_error} || len({spec.name}))")
            yield (f"WHEN list_count({spec.name}) <> {spec.size} THEN error({literal(errors.nulls)})")
            # a NaN or an infinity makes the sum non-finite: cheap to test, and only then is it located
            bad = f"list_transform({spec.name}, lambda _nn_e: NOT isfinite(_nn_e::DOUBLE))"
            yield (
                f"WHEN NOT isfinite(list_sum({spec.name}::DOUBLE[])) THEN "
                f"error({literal(errors.nonfinite)} || (list_position({bad}, true) - 1))"
            )

    def render(self) -> str:
        environment = Environment(
            loader=FileSystemLoader(TEMPLATES),
            undefined=StrictUndefined,
            keep_trailing_newline=True,
        )
        text = environment.get_template("model.sql.j2").render(
            name=self.name,
            version=self.version,
            sha256=self.graph.sha256(),
            params=list(self.params()),
            arguments=", ".join(spec.name for spec in self.graph.inputs),
            checks=list(self.checks()),
            body=self.body(),
            n_classes=self.graph.n_classes,
            name_literal=literal(self.name),
        )
        return wrap(text)


CAPABILITIES = register(Capabilities(target=TARGET, node_kinds=emitted_kinds(DuckDBGenerator)))
