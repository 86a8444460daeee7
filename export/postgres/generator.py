"""IR → PostgreSQL: a PL/pgSQL scoring function per model that calls the runtime in library.sql.

Each IR value becomes a float8[] variable; each node one assignment statement. Weights are read from
nnsql.tensors (float8[]) at the start of each call. No extension and no superuser are needed.
"""

from __future__ import annotations

from collections.abc import Iterator

from nnsql.files import shipped

from ..codegen.generator import Dialect, render_template
from ..codegen.procedural import ProceduralGenerator
from ..codegen.sqlformat import wrap_line
from ..codegen.sqltext import literal
from ..ir import activations, kinds
from ..ir import graph as ir
from ..target import Capabilities, emitted_kinds, register
from .plpython import PlPythonGenerator

TARGET = "postgres"
TEMPLATES = shipped("sql", "postgres")


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
    length="pg_catalog.cardinality({x})",
    wrong_length="pg_catalog.cardinality({x}) <> {size}",
    wrong_dimensions="pg_catalog.array_ndims({x}) <> 1",
    depth="coalesce(pg_catalog.array_ndims({x}), 1)",
    extent="pg_catalog.array_length({x}, {axis})",
    flatten=(
        "IF pg_catalog.array_ndims({x}) > 1 THEN {value} := ARRAY(SELECT pg_catalog.unnest({x})); END IF;"
    ),
    pad=(
        "IF pg_catalog.cardinality({x}) < {size} THEN "
        "{x} := {x} || pg_catalog.array_fill({pad}::float8, ARRAY[{size} - pg_catalog.cardinality({x})]); "
        "END IF;"
    ),
    has_nulls="pg_catalog.array_position({x}, NULL) IS NOT NULL",
    # '[0:783]={...}' keeps its bounds and the kernels index from 1: a slice renumbers from 1
    prepare=(
        "IF pg_catalog.array_lower({x}, 1) <> 1 THEN "
        "{x} := {x}[pg_catalog.array_lower({x}, 1):pg_catalog.array_upper({x}, 1)]; END IF;"
    ),
    nonfinite=("nnsql.first_nonfinite({x}) IS NOT NULL", "nnsql.first_nonfinite({x})"),
    outside=("nnsql.first_outside({x}, {bound}) IS NOT NULL", "nnsql.first_outside({x}, {bound})"),
    call="nnsql.{function}({arguments})",
    weight="w_{node}_{role}",
    slice="{x}[{first}:{last}]",
    concat=("{parts}", " || "),
    binary={op: f"nnsql.binary({{a}}, {{b}}, '{op}')" for op in ir.BINARY_OPS},
    zeros="pg_catalog.array_fill(0::float8, ARRAY[{n}])",
    loop="FOR nn_t IN 0..{last} LOOP",
    loop_reverse="FOR nn_t IN REVERSE {last}..0 LOOP",
    step="{x}[nn_t * {features} + 1:(nn_t + 1) * {features}]",
    empty="'{}'",
    append="{y} := {y} || {part};",
)


def in_body(line: str) -> str:
    """A line wrapped as it stands in the function body, indented by four spaces (the template's)."""
    return wrap_line("    " + line)[4:]


# An element as the formulas read it (export/ir/activations.py): NaN stays NaN (PostgreSQL orders NaN above
# every number, so least() alone would turn it into BOUND), |e| < FLUSH is 0, the rest within ±BOUND.
GUARDED = (
    f"CASE WHEN u.e = 'NaN' THEN u.e WHEN pg_catalog.abs(u.e) < {activations.FLUSH!r} THEN 0 "
    f"ELSE least(greatest(u.e, {-activations.BOUND!r}), {activations.BOUND!r}) END"
)


def elementwise(variable: str, activation: str) -> str:
    """One of export/ir/activations.py's formulas over every element, keeping the order. Each element is
    read through GUARDED: PostgreSQL raises where a product inside a formula rounds to 0."""
    formula = activations.formula(activation, "sql", "t.e")
    return (
        f"{variable} := ARRAY(SELECT {formula} FROM (SELECT {GUARDED} AS e, u.i "
        f"FROM pg_catalog.unnest({variable}) WITH ORDINALITY AS u(e, i)) AS t ORDER BY t.i);"
    )


# The planner's price of one call, in cpu_operator_cost units (1/400 of a page read): a unit per four
# weights puts the MNIST MLP (79,510 weights, ~0.5 ms a row with the cube kernel) at 50 page reads a row.
WEIGHTS_PER_COST_UNIT = 4
# A parallel worker compiles the scoring code before its first row: about this many rows' worth of time.
PARALLEL_SETUP_ROWS = 200
CPU_OPERATOR_COST = 0.0025  # PostgreSQL's default


def returning(expression: str) -> str:
    return f"BEGIN RETURN {expression}; END"


def argmax(p: str, size: int) -> str:
    """0-based index of the largest of p's first `size` values, the first on ties, as one expression
    (nnsql.argmax, a LANGUAGE sql function, costs a plan per call where it cannot be kept)."""
    return (
        f"pg_catalog.array_position({p}, greatest({', '.join(f'{p}[{i}]' for i in range(1, size + 1))})) - 1"
    )


def call_cost(graph: ir.Graph) -> int:
    """predict's COST: PostgreSQL weighs a parallel plan of score_table by it."""
    weights = sum(w.size for node in graph.all_nodes() for _, w in node.weights())
    return max(100, weights // WEIGHTS_PER_COST_UNIT)  # 100: the default of a PL/pgSQL function


class PostgresGenerator(ProceduralGenerator):
    """PL/pgSQL: the shared statements, with the products computed by library.sql's functions."""

    dialect = PLPGSQL

    def __init__(self, graph: ir.Graph, name: str, version: int, *, plpython: bool = False) -> None:
        super().__init__(graph, name, version)
        self.plpython = plpython

    def weighted(self, node: ir.Dense | ir.PatchDense, function: str, x: str, *sizes: int) -> list[str]:
        """`v := nnsql.<function>(x, kernel, bias, sizes..., activation)`; an activation the library
        lacks is applied after it by its formula (export/ir/activations.py)."""
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
                yield f"{weight_variable(node, role)} float8[]"

    def function(self, function: str) -> str:
        return f"{self.name}.{function}({', '.join(spec.name for spec in self.graph.inputs)})"

    def first_probabilities(self) -> str:
        """An expression: the first output's probabilities from predict (codegen.Answering's steps).
        [1 - p, p] reads p twice, so p is computed once in a subquery that OFFSET 0 keeps whole."""
        a = self.answering
        value = self.function("predict")
        if a.several:
            value = f"({value})[1:{a.first_size}]"
        for step in a.steps:
            if step != "complement":
                value = f"nnsql.activate({value}, {literal(step)})"
                continue
            pair = "CASE WHEN s.p IS NULL THEN NULL ELSE ARRAY[1 - s.p[1], s.p[1]] END"
            value = f"(SELECT {pair} FROM (SELECT {value} AS p OFFSET 0) AS s)"
        return value

    def probabilities_read(self) -> str:
        """What score and labels read: predict_proba, or with several outputs the first one's."""
        return self.first_probabilities() if self.answering.several else self.function("predict_proba")

    def decision(self, p: str) -> str:
        """score from the probabilities in variable `p`: 1 when p > 0.5 (NULL stays NULL), or the argmax
        (the first on ties; NaN, the largest float8 here, wins, as in nnsql.argmax) written out."""
        if self.answering.two_columns:
            return f"({p}[2] > {kinds.THRESHOLD})::integer"
        return argmax(p, self.answering.first_size)

    def body_of(self, function: str) -> str:
        """The PL/pgSQL body of one function users query (codegen.Answering says which answer). PL/pgSQL
        keeps a function's parsed body for the session and its expressions for the transaction; a
        LANGUAGE sql function that calls another is parsed again on every call of the outer one."""
        a = self.answering
        if function == "predict_proba":
            return returning(self.function("predict") if a.several else self.first_probabilities())
        if function == "predict_logits":
            return returning(self.function("predict"))
        if function == "score":
            decision = self.decision("nn_p")
            return f"DECLARE nn_p float8[] := {self.probabilities_read()}; BEGIN RETURN {decision}; END"
        if function == "label":
            return returning(f"({self.name}.classes())[{self.function('score')} + 1]")
        above = (
            # unnest(a, b) is FROM-clause syntax, not a function: the same as ROWS FROM with each qualified
            f"ARRAY(SELECT t.label FROM ROWS FROM (pg_catalog.unnest({self.name}.classes()), "
            "pg_catalog.unnest(nn_p)) WITH ORDINALITY AS t(label, p, i) "
            "WHERE t.p > threshold ORDER BY t.i)"
        )
        return (
            f"DECLARE nn_p float8[] := {self.probabilities_read()}; "
            f"BEGIN IF nn_p IS NULL THEN RETURN NULL; END IF; RETURN {above}; END"
        )

    def refusal(self, function: str) -> str:
        message = literal(self.answering.refusals[function])
        return f"BEGIN RAISE EXCEPTION {message} USING ERRCODE = 'feature_not_supported'; END"

    def functions(self) -> list[dict[str, str]]:
        """Every function users query beside predict, in an order where each reads only earlier ones."""
        parameters = ", ".join(f"{spec.name} float8[]" for spec in self.graph.inputs)
        returns = {"score": "integer", "label": "text", "labels": "text[]"}
        result = []
        for function in ("predict_proba", "predict_logits", "score", "label", "labels"):
            answers = self.answering.answers(function)
            result.append(
                {
                    "name": function,
                    "comment": self.answering.comment(function),
                    "parameters": parameters
                    + (f", threshold float8 DEFAULT {kinds.THRESHOLD}" if function == "labels" else ""),
                    "returns": returns.get(function, "float8[]"),
                    "body": in_body(self.body_of(function) if answers else self.refusal(function)),
                }
            )
        return result

    def table_score(self) -> str:
        """score_table's class from the column s.p (predict_proba), written out: its caller needs no
        access to schema nnsql. With several outputs s.p is every output joined: the first is read."""
        a = self.answering
        if a.two_columns and not a.several:
            return f"(s.p[2] > {kinds.THRESHOLD})::integer"
        if a.two_columns:  # the first output's one value: p > 0.5, or a logit above 0 (sigmoid > 0.5)
            return f"(s.p[1] > {0 if a.kind == 'logits' else kinds.THRESHOLD})::integer"
        return argmax("s.p", a.first_size)

    def render(self) -> str:
        context = self.context()
        context.update(
            parameters=", ".join(f"{spec.name} float8[]" for spec in self.graph.inputs),
            single_input=len(self.graph.inputs) == 1,
            functions=self.functions(),
            table_score=self.table_score(),
            table_refusal=""
            if kinds.one_class_per_row(self.graph.kind)
            else literal(f"{self.name}.score_table: {kinds.refusal(self.name, self.graph.kind, 'score')}"),
            # what calls predict may run in a parallel worker only if predict may
            parallel="UNSAFE" if self.plpython else "SAFE",
            cost=call_cost(self.graph),
            parallel_setup_rows=PARALLEL_SETUP_ROWS,
            parallel_setup_cost=max(
                1000, round(PARALLEL_SETUP_ROWS * call_cost(self.graph) * CPU_OPERATOR_COST)
            ),
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
)
