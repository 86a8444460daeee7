"""IR → Spark SQL: one SQL function per entry point, pure Spark SQL expressions over arrays.

Every IR value is an ARRAY<DOUBLE> (row-major), computed once: the values a later node reads travel
from one binding to the next (export/spark/bindings.py), so the expressions Spark types stay shallow.
Spark forbids subqueries inside higher-order functions, so the weights are in the function body: each
tensor is one JSON string that `from_json` turns into an array, which Spark's optimizer folds into a
literal once per query (a literal `array(...)` of tens of thousands of values takes Spark minutes to
parse; the JSON string, seconds).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..codegen.generator import Dialect, Generator
from ..codegen.inputs import InputForm
from ..ir import activations, kinds
from ..ir import graph as ir
from ..ir.graph import FLOAT32_MAX
from ..target import Capabilities, emitted_kinds, emitter, register
from .bindings import Pipeline
from .sqltext import call, literal, weights_json

TARGET = "spark"
ACTIVATIONS = {
    "linear": "{z}",
    "relu": "greatest({z}, 0D)",
    "sigmoid": "1D / (1D + exp(-({z})))",
    "tanh": "tanh({z})",
}
BINARY = {
    "add": "{a} + {b}",
    "sub": "{a} - {b}",
    "mul": "{a} * {b}",
    "max": "greatest({a}, {b})",
    "min": "least({a}, {b})",
}
SPARK = Dialect(target=TARGET, array_type="ARRAY<DOUBLE>", index_base=0, literal=literal)


def let(expression: str, variable: str, body: str) -> str:
    """`body` with `variable` bound to the value of `expression`, computed once."""
    return f"transform(array({expression}), {variable} -> {body})[0]"


def dot(weights: str, x: str, start: str) -> str:
    """start + Σ weights[i]·x[i] over two arrays of one length."""
    return f"aggregate(zip_with({weights}, {x}, (_w, _x) -> _w * _x), {start}, (_a, _e) -> _a + _e)"


def appended(state: str, size: int) -> str:
    """A scan's accumulator after a step: the new state, and its first `size` values appended."""
    return f"named_struct('s', {state}, 'o', concat(_acc.o, slice({state}, 1, {size})))"


def formula(activation: str, z: str) -> str:
    """An activation of one value z: the fused four, or export/ir/activations.py's formula in SQL (its
    NaN written as Spark names the type)."""
    if activation in ACTIVATIONS:
        return ACTIVATIONS[activation].format(z=z)
    return activations.formula(activation, "sql", z).replace("DOUBLE PRECISION", "DOUBLE")


def apply_activation(vector: str, activation: str) -> str:
    if activation == "linear":
        return vector
    if activation == "softmax":
        exps = let("array_max(_v)", "_m", "transform(_v, _e -> exp(_e - _m))")
        total = "aggregate(_x, 0D, (_a, _e) -> _a + _e)"
        return let(vector, "_v", let(exps, "_x", let(total, "_s", "transform(_x, _e -> _e / _s)")))
    return f"transform({vector}, _e -> {formula(activation, '_e')})"


def units(node: ir.Dense | ir.PatchDense) -> str:
    """The kernel as an array of {w, b} structs, one per unit, from one JSON string."""
    kernel = node.kernel.float64.T
    bias = np.zeros(node.units) if node.bias is None else node.bias.float64
    text = weights_json([{"w": row, "b": b} for row, b in zip(kernel, bias, strict=True)])
    return f"from_json({literal(text)}, 'array<struct<w:array<double>,b:double>>')"


def constant(values: np.ndarray, element: str = "double") -> str:
    return f"from_json({literal(weights_json(values))}, 'array<{element}>')"


class SparkGenerator(Generator):
    """Walks an IR graph, binding each value once; one `emit_<Kind>` method per node kind."""

    dialect = SPARK

    def __init__(self, graph: ir.Graph, name: str, version: int, database: str | None = None) -> None:
        super().__init__(graph, name, version)
        self.database = database or name

    # -- the walk ----------------------------------------------------------------------------------
    def chain(
        self,
        graph: ir.Graph,
        refs: dict[str, str],
        result: Callable[[dict[str, str]], str],
        variable: str = "_env",
    ) -> str:
        """`result(refs)` once every node of `graph` is bound (export/spark/bindings.py says how);
        `refs` maps its inputs to their SQL, `variable` names the bindings' lambda variable."""

        def emit(node: ir.Node, inputs: list[str]) -> str:
            return str(emitter(self, node, TARGET)(node, *inputs))

        return Pipeline(graph, refs, variable).bound(emit, result)

    def emit_Dense(self, node: ir.Dense, x: str) -> str:
        scalar = node.activation in ACTIVATIONS
        z = dot("_u.w", x, "_u.b")
        unit = ACTIVATIONS[node.activation].format(z=z) if scalar else z
        values = f"transform({units(node)}, _u -> {unit})"
        return values if scalar else apply_activation(values, node.activation)

    def emit_PatchDense(self, node: ir.PatchDense, x: str) -> str:
        """The kernel over each window, position-major: y[q·units + u]."""
        scalar = node.activation in ACTIVATIONS
        window = f"slice({x}, _q * {node.size} + 1, {node.size})"
        z = dot("_u.w", "_win", "_u.b")
        unit = ACTIVATIONS[node.activation].format(z=z) if scalar else z
        per_window = let(window, "_win", f"transform(_p, _u -> {unit})")
        values = let(
            units(node), "_p", f"flatten(transform(sequence(0, {node.patches - 1}), _q -> {per_window}))"
        )
        return values if scalar else apply_activation(values, node.activation)

    def emit_Gather(self, node: ir.Gather, x: str) -> str:
        """Each window's values; padding (-1) reads 0."""
        indices = constant(np.asarray(node.indices.array).astype(np.int64).ravel(), "int")
        return f"transform({indices}, _i -> CASE WHEN _i < 0 THEN 0D ELSE {x}[_i] END)"

    def emit_GroupMax(self, node: ir.GroupMax, x: str) -> str:
        last = self.graph_size(node) - 1
        return (
            f"transform(sequence(0, {last}), _q -> array_max(slice({x}, _q * {node.size} + 1, {node.size})))"
        )

    def emit_ActivationNode(self, node: ir.ActivationNode, x: str) -> str:
        return apply_activation(x, node.activation)

    def emit_Slice(self, node: ir.Slice, x: str) -> str:
        return f"slice({x}, {node.start + 1}, {node.stop - node.start})"

    def emit_Concatenate(self, node: ir.Concatenate, *parts: str) -> str:
        return f"concat({', '.join(parts)})"

    def emit_Binary(self, node: ir.Binary, a: str, b: str) -> str:
        return f"zip_with({a}, {b}, (_a, _b) -> {BINARY[node.op].format(a='_a', b='_b')})"

    def emit_Affine(self, node: ir.Affine, x: str) -> str:
        """x·scale + shift elementwise (a normalisation; Masking(v) tests x - v)."""
        scale = node.scale.float64.ravel()
        if node.shift is None:
            return f"zip_with({x}, {constant(scale)}, (_a, _b) -> _a * _b)"
        shift = node.shift.float64.ravel()
        pairs = weights_json([{"m": m, "c": c} for m, c in zip(scale, shift, strict=True)])
        parts = f"from_json({literal(pairs)}, 'array<struct<m:double,c:double>>')"
        return f"zip_with({x}, {parts}, (_a, _p) -> _a * _p.m + _p.c)"

    def emit_StepMask(self, node: ir.StepMask, x: str) -> str:
        """1.0 for each step of which some feature is not 0, else 0.0."""
        width = self.size_in(node) // node.steps
        step = f"slice({x}, _t * {width} + 1, {width})"
        flag = f"CASE WHEN exists({step}, _e -> _e <> 0) THEN 1D ELSE 0D END"
        return f"transform(sequence(0, {node.steps - 1}), _t -> {flag})"

    def emit_Scan(self, node: ir.Scan, x: str, mask: str | None = None) -> str:
        """An aggregate over the steps. Without sequences, masked steps are left out (Keras carries the
        state over them); with sequences, each step appends its output, a masked one the carried state
        (or zeros)."""
        f, size = node.features, node.output_size
        steps = f"sequence(0, {node.steps - 1})"
        if mask is not None and not node.sequences:
            steps = f"filter({steps}, _t -> {mask}[_t] > 0)"
        if node.reverse:
            steps = f"reverse({steps})"
        refs = {node.step_input: f"slice({x}, _t * {f} + 1, {f})", node.state_input: "_acc.s"}
        zeros = f"array_repeat(0D, {size})"
        if not node.sequences:
            refs[node.state_input] = "_acc"
            update = self.chain(node.body, refs, lambda r: r[node.body.output], "_step")
            start = f"array_repeat(0D, {node.state_size})"
            return f"slice(aggregate({steps}, {start}, (_acc, _t) -> {update}), 1, {size})"
        new = self.chain(node.body, refs, lambda r: appended(r[node.body.output], size), "_step")
        if mask is not None:
            carried = zeros if node.zero_masked else f"slice(_acc.s, 1, {size})"
            kept = f"named_struct('s', _acc.s, 'o', concat(_acc.o, {carried}))"
            new = f"CASE WHEN {mask}[_t] > 0 THEN {new} ELSE {kept} END"
        start = f"named_struct('s', array_repeat(0D, {node.state_size}), 'o', CAST(array() AS ARRAY<DOUBLE>))"
        return f"aggregate({steps}, {start}, (_acc, _t) -> {new}).o"

    def graph_size(self, node: ir.Node) -> int:
        return self.graph.size_of(node.name)

    def size_in(self, node: ir.Node) -> int:
        return self.graph.size_of(node.inputs[0])

    # -- the functions users call ----------------------------------------------------------------------
    def qualified(self, function: str) -> str:
        """Every call names its database: a look-alike function elsewhere is never called."""
        return f"{self.database}.{function}"

    def parameters(self) -> str:
        return ", ".join(f"{spec.name} {parameter_type(spec)}" for spec in self.graph.inputs)

    def form(self, spec: ir.TensorSpec) -> InputForm:
        """What the input takes: its steps, and the value a shorter sequence is padded with where the
        model masks it (export/codegen/inputs.py)."""
        return InputForm.of(self.graph, self.name, spec)

    def flat(self, spec: ir.TensorSpec) -> str:
        """The values the network reads: a sequence's steps one after the other, and where the model
        masks it, the missing steps padded at the end (NULL for NULL; the checks refuse a bad one)."""
        if not nested(spec):
            return f"CAST({spec.name} AS ARRAY<DOUBLE>)"
        form, values = self.form(spec), f"flatten(CAST({spec.name} AS ARRAY<ARRAY<DOUBLE>>))"
        if form.pad is None:
            return values
        missing = f"greatest({form.steps} - size({spec.name}), 0) * {form.step}"
        return f"concat({values}, array_repeat({form.pad!r}D, {missing}))"

    def step_checks(self, spec: ir.TensorSpec) -> list[tuple[str, str]]:
        """A sequence's number of steps (at most the model's where it pads), then each step's size."""
        x, form = spec.name, self.form(spec)
        wrong = f"size({x}) > {form.steps}" if form.pad is not None else f"size({x}) <> {form.steps}"
        bad = f"filter({x}, _s -> _s IS NULL OR size(_s) <> {form.step})"
        size_of_bad = f"coalesce(CAST(size(element_at({bad}, 1)) AS STRING), 'NULL')"
        return [
            (wrong, f"raise_error({literal(form.outer_length())} || size({x}))"),
            (f"size({bad}) > 0", f"raise_error({literal(form.inner_length(2, 2))} || {size_of_bad})"),
        ]

    def checks_of(self, spec: ir.TensorSpec) -> list[tuple[str, str]]:
        """(condition, outcome) pairs of one input, in order: NULL answers NULL, the rest raise."""
        x, errors = f"_in_{spec.name}", ir.InputErrors.of(self.name, spec)
        outside = f"transform({x}, _e -> _e IS NULL OR NOT (abs(_e) <= {FLOAT32_MAX!r}))"
        return [
            (f"{spec.name} IS NULL", "NULL"),
            *(self.step_checks(spec) if nested(spec) else []),
            (f"size({x}) <> {spec.size}", f"raise_error({literal(errors.length)} || size({x}))"),
            (f"exists({x}, _e -> _e IS NULL)", f"raise_error({literal(errors.nulls)})"),
            (
                f"exists({outside}, _e -> _e)",
                f"raise_error({literal(errors.nonfinite)} || (array_position({outside}, true) - 1))",
            ),
        ]

    def predict_body(self) -> str:
        inputs = self.graph.inputs
        refs = {spec.name: f"_in_{spec.name}" for spec in inputs}
        network = self.chain(self.graph, refs, lambda r: r[self.graph.output])
        checks = [pair for spec in inputs for pair in self.checks_of(spec)]
        guarded = "CASE " + " ".join(f"WHEN {c} THEN {o}" for c, o in checks) + f" ELSE {network} END"
        for spec in reversed(inputs):
            guarded = let(self.flat(spec), f"_in_{spec.name}", guarded)
        return guarded

    def versioned(self, function: str) -> str:
        return f"{function}_v{self.version}"

    def call(self, function: str) -> str:
        return call(self.qualified(self.versioned(function)), [spec.name for spec in self.graph.inputs])

    def first_probabilities(self, p: str) -> str:
        a = self.answering
        value = f"slice({p}, 1, {a.first_size})" if a.several else p
        for step in a.steps:
            if step == "complement":
                value = let(value, "_p", "CASE WHEN _p IS NULL THEN NULL ELSE array(1D - _p[0], _p[0]) END")
            else:
                value = apply_activation(value, step)
        return value

    def body_of(self, function: str) -> tuple[str, str]:
        """The return type and expression of one function users call (codegen.Answering says which)."""
        a = self.answering
        types = {"score": "INT", "label": "STRING", "labels": "ARRAY<STRING>"}
        kind = types.get(function, "ARRAY<DOUBLE>")
        if not a.answers(function):
            return kind, f"CAST(raise_error({literal(a.refusals[function])}) AS {kind})"
        if function == "predict":
            return kind, self.predict_body()
        predicted = self.call("predict")
        if function == "predict_proba":
            return kind, predicted if a.several else self.first_probabilities(predicted)
        if function == "predict_logits":
            return kind, predicted
        q = self.first_probabilities(predicted) if a.several else self.call("predict_proba")
        if function == "score" and a.two_columns:
            return kind, let(q, "_q", f"CASE WHEN _q[1] > {kinds.THRESHOLD} THEN 1 ELSE 0 END")
        if function == "score":
            return kind, let(q, "_q", "array_position(_q, array_max(_q)) - 1")
        classes = f"array({', '.join(literal(c) for c in self.graph.classes)})"
        if function == "label":
            return kind, f"element_at({classes}, {self.call('score')} + 1)"
        above = "filter(sequence(0, size(_q) - 1), _i -> _q[_i] > threshold)"
        return kind, let(q, "_q", f"transform({above}, _i -> element_at({classes}, _i + 1))")

    def statements(self) -> list[str]:
        """CREATE FUNCTION statements of this version, under versioned names (predict first)."""
        result = []
        for function in ("predict", *FUNCTIONS):
            kind, body = self.body_of(function)
            parameters = self.parameters()
            if function == "labels":
                parameters += f", threshold DOUBLE DEFAULT {kinds.THRESHOLD}"
            result.append(
                f"CREATE OR REPLACE FUNCTION {self.qualified(self.versioned(function))}({parameters}) "
                f"RETURNS {kind} RETURN {body}"
            )
        return result

    def public(self) -> list[str]:
        """The functions users call, each calling this version's: created only once it is verified."""
        result = []
        names = [spec.name for spec in self.graph.inputs]
        for function in ("predict", *FUNCTIONS):
            kind, _ = self.body_of(function)
            parameters, arguments = self.parameters(), names
            if function == "labels":
                parameters += f", threshold DOUBLE DEFAULT {kinds.THRESHOLD}"
                arguments = [*names, "threshold"]
            target = call(self.qualified(self.versioned(function)), arguments)
            name = self.qualified(function)
            result.append(f"CREATE OR REPLACE FUNCTION {name}({parameters}) RETURNS {kind} RETURN {target}")
        return result


FUNCTIONS = ("predict_proba", "predict_logits", "score", "label", "labels")


def nested(spec: ir.TensorSpec) -> bool:
    """A (steps, features) sequence is an array of arrays, one per step; any other input is flat."""
    return len(spec.shape) == 2


def parameter_type(spec: ir.TensorSpec) -> str:
    return "ARRAY<ARRAY<DOUBLE>>" if nested(spec) else "ARRAY<DOUBLE>"


CAPABILITIES = register(
    Capabilities(
        target=TARGET,
        node_kinds=emitted_kinds(SparkGenerator) | {"Reshape"},
        activations=frozenset({*ACTIVATIONS, "softmax", *activations.FORMULAS}),
        several_outputs=True,
    ),
    SparkGenerator,
)
