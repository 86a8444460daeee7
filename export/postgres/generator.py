"""IR → PostgreSQL: a PL/pgSQL scoring function per model that calls the runtime in library.sql.

Each IR value becomes a float8[] variable; each node one assignment statement. Weights are read from
nnsql.tensors (real[]) at the start of each call. No extension and no superuser are needed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from export import activations, ir
from export.postgres.plpython import PlPythonGenerator
from export.sqlformat import wrap, wrap_line
from export.sqltext import literal
from export.target import Capabilities, emitted_kinds, emitter, register

TARGET = "postgres"
TEMPLATES = Path(__file__).resolve().parents[2] / "sql" / "postgres"


def template(name: str) -> str:
    environment = Environment(
        loader=FileSystemLoader(TEMPLATES), undefined=StrictUndefined, keep_trailing_newline=True
    )
    return environment.get_template(name)  # type: ignore[return-value]


def weight_variable(node: ir.Node, role: str) -> str:
    return f"w_{node.name}_{role}"


def value_variable(name: str, graph: ir.Graph) -> str:
    """Inputs keep their names (they are the function's parameters); node values get a v_ prefix."""
    return name if any(spec.name == name for spec in graph.inputs) else f"v_{name}"


LIBRARY_ACTIVATIONS = ("linear", "relu", "sigmoid", "tanh", "softmax")  # nnsql.activate in library.sql


def elementwise(variable: str, activation: str) -> str:
    """One of export/activations.py's formulas over every element, keeping the order."""
    formula = activations.formula(activation, "sql", "t.e")
    return (
        f"{variable} := ARRAY(SELECT {formula} FROM unnest({variable}) WITH ORDINALITY AS t(e, i) "
        "ORDER BY t.i);"
    )


def raise_if(condition: str, message: str, errcode: str, *arguments: str) -> str:
    """One PL/pgSQL guard: IF condition THEN RAISE EXCEPTION 'message' (with % arguments) END IF."""
    values = "".join(f", {argument}" for argument in arguments)
    return (
        f"IF {condition} THEN RAISE EXCEPTION {literal(message)}{values} USING ERRCODE = '{errcode}'; END IF;"
    )


class PostgresGenerator:
    """Walks an IR graph; one `emit_<Kind>` method per supported node kind returns a statement."""

    def __init__(self, graph: ir.Graph, name: str, version: int, *, plpython: bool = False) -> None:
        self.graph = graph
        self.name = name
        self.version = version
        self.plpython = plpython

    def weighted(self, node: ir.Dense | ir.PatchDense, function: str, x: str, *sizes: int) -> str:
        """`v := nnsql.<function>(x, kernel, bias, sizes..., activation)`; an activation the library
        lacks is applied after it by its formula (export/activations.py)."""
        bias = weight_variable(node, "bias") if node.bias is not None else "NULL"
        library = node.activation in LIBRARY_ACTIVATIONS
        arguments = [x, weight_variable(node, "kernel"), bias, *map(str, sizes)]
        arguments.append(literal(node.activation if library else "linear"))
        statement = f"{self.var(node.name)} := nnsql.{function}({', '.join(arguments)});"
        return statement if library else f"{statement}\n    {self.activate(node)}"

    def activate(self, node: ir.Dense | ir.PatchDense | ir.ActivationNode) -> str:
        """The node's activation applied in place to its value: the library's or the formula's."""
        if node.activation in LIBRARY_ACTIVATIONS:
            variable = self.var(node.name)
            return f"{variable} := nnsql.activate({variable}, {literal(node.activation)});"
        return elementwise(self.var(node.name), node.activation)

    def emit_Dense(self, node: ir.Dense, x: str) -> str:
        return self.weighted(node, "dense", x, node.units)

    def emit_Gather(self, node: ir.Gather, x: str) -> str:
        return f"{self.var(node.name)} := nnsql.gather({x}, {weight_variable(node, 'indices')});"

    def emit_PatchDense(self, node: ir.PatchDense, x: str) -> str:
        return self.weighted(node, "patch_dense", x, node.patches, node.size, node.units)

    def emit_GroupMax(self, node: ir.GroupMax, x: str) -> str:
        return f"{self.var(node.name)} := nnsql.group_max({x}, {node.size});"

    def emit_Concatenate(self, node: ir.Concatenate, *parts: str) -> str:
        return f"{self.var(node.name)} := {' || '.join(parts)};"

    def emit_Slice(self, node: ir.Slice, x: str) -> str:
        return f"{self.var(node.name)} := {x}[{node.start + 1}:{node.stop}];"

    def emit_Binary(self, node: ir.Binary, a: str, b: str) -> str:
        return f"{self.var(node.name)} := nnsql.binary({a}, {b}, {literal(node.op)});"

    def emit_Lookup(self, node: ir.Lookup, x: str) -> str:
        return f"{self.var(node.name)} := nnsql.lookup({x}, {weight_variable(node, 'table')}, {node.width});"

    def emit_Affine(self, node: ir.Affine, x: str) -> str:
        shift = weight_variable(node, "shift") if node.shift is not None else "NULL"
        return f"{self.var(node.name)} := nnsql.affine({x}, {weight_variable(node, 'scale')}, {shift});"

    def emit_StepMask(self, node: ir.StepMask, x: str) -> str:
        return f"{self.var(node.name)} := nnsql.step_mask({x}, {node.steps});"

    def emit_Scan(self, node: ir.Scan, x: str, mask: str | None = None) -> str:
        """A FOR loop over the steps running the body's statements; see ir.Scan for the rules."""
        y, state, size = self.var(node.name), self.var(node.state_input), node.output_size
        last, features = node.steps - 1, node.features
        loop = f"FOR nn_t IN REVERSE {last}..0 LOOP" if node.reverse else f"FOR nn_t IN 0..{last} LOOP"
        inner = []
        if mask is not None:
            skipped = f"array_fill(0::float8, ARRAY[{size}])" if node.zero_masked else f"{state}[1:{size}]"
            carry = f"{y} := {y} || {skipped}; " if node.sequences else ""
            inner.append(f"IF {mask}[nn_t + 1] = 0 THEN {carry}CONTINUE; END IF;")
        inner.append(f"{self.var(node.step_input)} := {x}[nn_t * {features} + 1:(nn_t + 1) * {features}];")
        inner += [self.statement(body_node) for body_node in node.body.nodes]
        inner.append(f"{state} := {self.var(node.body.output)};")
        if node.sequences:
            inner.append(f"{y} := {y} || {state}[1:{size}];")
        lines = [f"{state} := array_fill(0::float8, ARRAY[{node.state_size}]);"]
        lines += [f"{y} := '{{}}';", loop] if node.sequences else [loop]
        lines += [f"    {line}" for text in inner for line in text.split("\n    ")]
        lines.append("END LOOP;")
        if not node.sequences:
            lines.append(f"{y} := {state}[1:{size}];")
        return "\n    ".join(lines)

    def emit_ActivationNode(self, node: ir.ActivationNode, x: str) -> str:
        if node.activation in LIBRARY_ACTIVATIONS:
            return f"{self.var(node.name)} := nnsql.activate({x}, {literal(node.activation)});"
        return f"{self.var(node.name)} := {x};\n    {elementwise(self.var(node.name), node.activation)}"

    def emit_Reshape(self, node: ir.Reshape, x: str) -> str:
        return f"{self.var(node.name)} := {x};  -- values are flat row-major arrays already"

    def statement(self, node: ir.Node) -> str:
        method = emitter(self, node, TARGET)
        return method(node, *(self.var(name) for name in node.inputs))

    def var(self, name: str) -> str:
        return value_variable(name, self.graph)

    def weights_to_load(self) -> Iterator[tuple[ir.Node, str]]:
        """(node, role) of every weight the body reads from nnsql.tensors."""
        for node in self.graph.all_nodes():
            for role, _ in node.weights():
                yield node, role

    def loads(self) -> Iterator[str]:
        """The statements that read the weights at the start of each call."""
        for node, role in self.weights_to_load():
            yield (
                f"SELECT value INTO {weight_variable(node, role)} FROM nnsql.tensors\n"
                f"     WHERE model = {literal(self.name)} AND version = {self.version} "
                f"AND tensor = {literal(f'{node.name}.{role}')};"
            )

    def variables(self) -> Iterator[str]:
        yield "nn_bad_index bigint"  # the index of a NaN or infinite feature, if any
        for spec in self.graph.all_inputs():
            if spec not in self.graph.inputs:  # a scan's step and state
                yield f"{self.var(spec.name)} float8[]"
        for node in self.graph.all_nodes():
            yield f"{self.var(node.name)} float8[]"
            for role, _ in node.weights():
                yield f"{weight_variable(node, role)} real[]"

    def checks(self) -> Iterator[str]:
        for spec in self.graph.inputs:
            errors, x = ir.InputErrors.of(self.name, spec), spec.name
            yield f"IF {x} IS NULL THEN RETURN NULL; END IF;"
            yield raise_if(
                f"cardinality({x}) <> {spec.size}",
                errors.length + "%",
                "array_subscript_error",
                f"cardinality({x})",
            )
            yield raise_if(f"array_ndims({x}) <> 1", errors.dimensions, "array_subscript_error")
            yield raise_if(f"array_position({x}, NULL) IS NOT NULL", errors.nulls, "null_value_not_allowed")
            # '[0:783]={...}' keeps its bounds and the kernels index from 1: a slice renumbers from 1
            renumbered = f"{x}[array_lower({x}, 1):array_upper({x}, 1)]"
            yield f"IF array_lower({x}, 1) <> 1 THEN {x} := {renumbered}; END IF;"
            yield f"nn_bad_index := nnsql.first_nonfinite({x});"
            yield raise_if(
                "nn_bad_index IS NOT NULL", errors.nonfinite + "%", "data_exception", "nn_bad_index"
            )
            if spec.dtype == "int32":
                yield (
                    f"SELECT t.i - 1 INTO nn_bad_index FROM unnest({x}) WITH ORDINALITY AS t(e, i) "
                    f"WHERE t.e < 0 OR t.e >= {spec.bound} OR t.e <> floor(t.e) LIMIT 1;"
                )
                yield raise_if(
                    "nn_bad_index IS NOT NULL", errors.index + "%", "data_exception", "nn_bad_index"
                )

    def first_slice(self) -> str:
        """The subscript that takes the first output from predict_proba's joined outputs, if several."""
        return f"[1:{self.graph.outputs[0].stop}]" if self.graph.outputs else ""

    def render(self) -> str:
        arguments = ", ".join(spec.name for spec in self.graph.inputs)
        return template("model.sql.j2").render(  # type: ignore[attr-defined]
            name=self.name,
            name_literal=literal(self.name),
            version=self.version,
            sha256=self.graph.sha256(),
            parameters=", ".join(f"{spec.name} float8[]" for spec in self.graph.inputs),
            arguments=arguments,
            single_input=len(self.graph.inputs) == 1,
            outputs=self.graph.outputs,
            first_slice=self.first_slice(),
            first_output=f"({self.name}.predict_proba({arguments})){self.first_slice()}"
            if self.graph.outputs
            else f"{self.name}.predict_proba({arguments})",
            # what calls predict_proba may run in a parallel worker only if predict_proba may
            parallel="UNSAFE" if self.plpython else "SAFE",
            variables=list(self.variables()),
            checks=[wrap_line(check) for check in self.checks()],
            loads=[] if self.plpython else list(self.loads()),
            # the PL/pgSQL body, or the PL/Python one
            statements=[] if self.plpython else [wrap(self.statement(n)) for n in self.graph.nodes],
            output=self.var(self.graph.output),
            plpython_body=PlPythonGenerator(self.graph, self.name, self.version).body()
            if self.plpython
            else "",
        )


def grant_script(name: str, role: str) -> str:
    return template("grant.sql.j2").render(name=name, role=role)  # type: ignore[attr-defined]


CAPABILITIES = register(
    Capabilities(target=TARGET, node_kinds=emitted_kinds(PostgresGenerator), several_outputs=True)
)
