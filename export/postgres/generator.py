"""IR → PostgreSQL: a PL/pgSQL scoring function per model that calls the runtime in library.sql.

Each IR value becomes a float8[] variable; each node one assignment statement. Weights are read from
nnsql.tensors (real[]) at the start of each call. No extension and no superuser are needed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from export import activations, ir
from export.codegen import Dialect, render_template
from export.postgres.plpython import PlPythonGenerator
from export.procedural import ProceduralGenerator
from export.sqlformat import wrap_line
from export.sqltext import literal
from export.target import Capabilities, emitted_kinds, register

TARGET = "postgres"
TEMPLATES = Path(__file__).resolve().parents[2] / "sql" / "postgres"


def weight_variable(node: ir.Node, role: str) -> str:
    return f"w_{node.name}_{role}"


LIBRARY_ACTIVATIONS = ("linear", "relu", "sigmoid", "tanh", "softmax")  # nnsql.activate in library.sql

PLPGSQL = Dialect(
    target=TARGET,
    array_type="float8[]",
    error="RAISE EXCEPTION {message} USING ERRCODE = '{code}';",
    error_with_argument="RAISE EXCEPTION {message}, {argument} USING ERRCODE = '{code}';",
    message_placeholder="%",
    error_codes={
        "length": "array_subscript_error",
        "dimensions": "array_subscript_error",
        "nulls": "null_value_not_allowed",
        "nonfinite": "data_exception",
        "index": "data_exception",
    },
    length="cardinality({x})",
    wrong_length="cardinality({x}) <> {size}",
    wrong_dimensions="array_ndims({x}) <> 1",
    has_nulls="array_position({x}, NULL) IS NOT NULL",
    # '[0:783]={...}' keeps its bounds and the kernels index from 1: a slice renumbers from 1
    prepare="IF array_lower({x}, 1) <> 1 THEN {x} := {x}[array_lower({x}, 1):array_upper({x}, 1)]; END IF;",
    nonfinite=("nnsql.first_nonfinite({x}) IS NOT NULL", "nnsql.first_nonfinite({x})"),
    outside=("nnsql.first_outside({x}, {bound}) IS NOT NULL", "nnsql.first_outside({x}, {bound})"),
    call="nnsql.{function}({arguments})",
    weight="w_{node}_{role}",
    slice="{x}[{first}:{last}]",
    concat=("{parts}", " || "),
    binary={op: f"nnsql.binary({{a}}, {{b}}, '{op}')" for op in ir.BINARY_OPS},
    zeros="array_fill(0::float8, ARRAY[{n}])",
    loop="FOR nn_t IN 0..{last} LOOP",
    loop_reverse="FOR nn_t IN REVERSE {last}..0 LOOP",
    step="{x}[nn_t * {features} + 1:(nn_t + 1) * {features}]",
    empty="'{}'",
    append="{y} := {y} || {part};",
)


def in_body(line: str) -> str:
    """A line wrapped as it stands in the function body, indented by four spaces (the template's)."""
    return wrap_line("    " + line)[4:]


# An element as the formulas read it (export/activations.py): NaN stays NaN (PostgreSQL orders NaN above
# every number, so least() alone would turn it into BOUND), |e| < FLUSH is 0, the rest within ±BOUND.
GUARDED = (
    f"CASE WHEN u.e = 'NaN' THEN u.e WHEN abs(u.e) < {activations.FLUSH!r} THEN 0 "
    f"ELSE least(greatest(u.e, {-activations.BOUND!r}), {activations.BOUND!r}) END"
)


def elementwise(variable: str, activation: str) -> str:
    """One of export/activations.py's formulas over every element, keeping the order. Each element is
    read through GUARDED: PostgreSQL raises where a product inside a formula rounds to 0."""
    formula = activations.formula(activation, "sql", "t.e")
    return (
        f"{variable} := ARRAY(SELECT {formula} FROM (SELECT {GUARDED} AS e, u.i "
        f"FROM unnest({variable}) WITH ORDINALITY AS u(e, i)) AS t ORDER BY t.i);"
    )


class PostgresGenerator(ProceduralGenerator):
    """PL/pgSQL: the shared statements, with the products computed by library.sql's functions."""

    dialect = PLPGSQL

    def __init__(self, graph: ir.Graph, name: str, version: int, *, plpython: bool = False) -> None:
        super().__init__(graph, name, version)
        self.plpython = plpython

    def weighted(self, node: ir.Dense | ir.PatchDense, function: str, x: str, *sizes: int) -> list[str]:
        """`v := nnsql.<function>(x, kernel, bias, sizes..., activation)`; an activation the library
        lacks is applied after it by its formula (export/activations.py)."""
        bias = weight_variable(node, "bias") if node.bias is not None else "NULL"
        library = node.activation in LIBRARY_ACTIVATIONS
        arguments = [x, weight_variable(node, "kernel"), bias, *map(str, sizes)]
        arguments.append(literal(node.activation if library else "linear"))
        statement = self.assign(self.var(node.name), self.call(function, *arguments))
        return [statement] if library else [statement, self.activate(node)]

    def activate(self, node: ir.Dense | ir.PatchDense | ir.ActivationNode) -> str:
        """The node's activation applied in place to its value: the library's or the formula's."""
        variable = self.var(node.name)
        if node.activation in LIBRARY_ACTIVATIONS:
            return self.assign(variable, self.call("activate", variable, literal(node.activation)))
        return elementwise(variable, node.activation)

    def emit_Dense(self, node: ir.Dense, x: str) -> list[str]:
        return self.weighted(node, "dense", x, node.units)

    def emit_PatchDense(self, node: ir.PatchDense, x: str) -> list[str]:
        return self.weighted(node, "patch_dense", x, node.patches, node.size, node.units)

    def emit_ActivationNode(self, node: ir.ActivationNode, x: str) -> list[str]:
        if node.activation in LIBRARY_ACTIVATIONS:
            return [self.assign(self.var(node.name), self.call("activate", x, literal(node.activation)))]
        return [self.assign(self.var(node.name), x), elementwise(self.var(node.name), node.activation)]

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
        yield from (f"{value} {self.dialect.array_type}" for value in self.values())
        for node in self.graph.all_nodes():
            for role, _ in node.weights():
                yield f"{weight_variable(node, role)} real[]"

    def render(self) -> str:
        context = self.context()
        # the first output of predict_proba's joined outputs, if several: what score() reads
        subscript = f"[1:{self.graph.outputs[0].stop}]" if self.graph.outputs else ""
        arguments = context["arguments"]
        context.update(
            parameters=", ".join(f"{spec.name} float8[]" for spec in self.graph.inputs),
            single_input=len(self.graph.inputs) == 1,
            first_slice=subscript,
            first_output=f"({self.name}.predict_proba({arguments})){subscript}"
            if subscript
            else f"{self.name}.predict_proba({arguments})",
            # what calls predict_proba may run in a parallel worker only if predict_proba may
            parallel="UNSAFE" if self.plpython else "SAFE",
            variables=list(self.variables()),
            checks=[in_body(check) for check in context["checks"]],
            loads=[] if self.plpython else list(self.loads()),
            # the PL/pgSQL body, or the PL/Python one
            statements=[] if self.plpython else [in_body(line) for line in self.lines()],
            output=self.var(self.graph.output),
            plpython_body=PlPythonGenerator(self.graph, self.name, self.version).body()
            if self.plpython
            else "",
        )
        return render_template(TEMPLATES, "model.sql.j2", context)

    def lines(self) -> list[str]:
        return [line for statement in self.statements() for line in statement.split("\n")]


def grant_script(name: str, role: str) -> str:
    return render_template(TEMPLATES, "grant.sql.j2", {"name": name, "role": role})


CAPABILITIES = register(
    Capabilities(target=TARGET, node_kinds=emitted_kinds(PostgresGenerator), several_outputs=True),
    PostgresGenerator,
    command="export.postgres.__main__",
)
