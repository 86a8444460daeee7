"""IR → DuckDB SQL: schema-qualified macros that run the network inside any DuckDB client.

Every IR value is a DOUBLE[] list (row-major). Each node's result is bound once with the idiom
`list_transform([expr], lambda v: rest)[1]`, so no expression is computed twice. Weights come from one
uncorrelated subquery, `<name>.params()`, evaluated once per query; DuckDB forbids subqueries inside
lambda bodies, so the params list is the outermost lambda's input and everything else reads it.

The params are shaped as the macros read them (a Dense's units as {w, b} structs, a convolution's windows
as lists of positions) once, when a version is published, into a table of its own (`weights_table`):
shaping them from nnsql.tensors in every query cost more CPU than scoring a few CNN images.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from nnsql.files import shipped

from ..codegen.generator import Check, Dialect, Generator, render_template
from ..codegen.inputs import InputForm
from ..codegen.sqlformat import wrap
from ..codegen.sqltext import literal
from ..ir import graph as ir
from ..ir import kinds
from ..ir.graph import FLOAT32_MAX
from ..target import Capabilities, emitted_kinds, emitter, register
from . import batches, convolution, fusion, inputs, units
from .fusion import SCALAR_ACTIVATIONS, scalar_activation

TARGET = "duckdb"
TEMPLATES = shipped("sql", "duckdb")
PARAMS = "_nn_p"  # the first binding: the weights


def weights_table(name: str, version: int) -> str:
    """The table holding one version's params (see the module); names are plain identifiers, so a
    suffix `_v<version>` read from the right tells every model's and version's apart."""
    return f"nnsql.weights_{name}_v{version}"


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


ZIP_LIMIT = 256  # widest window (and most units) cut by zipping strided slices; beyond, by slicing


def windows(x: str, size: int) -> str:
    """The consecutive windows of `size` values of list `x`, as a list of lists, without a lambda that
    reads `x` (x[j::size] is the j-th value of every window)."""
    values = ", ".join(f"_nn_e[{j + 1}]" for j in range(size))
    return f"list_transform(list_zip({strided(x, size)}), lambda _nn_e: [{values}])"


def strided(x: str, size: int) -> str:
    """x[1::size], x[2::size], ..., x[size::size]: the j-th value of every run of `size`, as arguments."""
    return ", ".join(f"{x}[{j + 1}:-1:{size}]" for j in range(size))


def interleave(lists: str, count: int) -> str:
    """The `count` equally long lists of `lists` read across: element 1 of each, then element 2, ..."""
    parts = ", ".join(f"{lists}[{k + 1}]" for k in range(count))
    values = ", ".join(f"_nn_e[{k + 1}]" for k in range(count))
    return f"flatten(list_transform(list_zip({parts}), lambda _nn_e: [{values}]))"


def zeros(size: int) -> str:
    return f"list_transform(range({size}), lambda _nn_i: 0.0::DOUBLE)"


def resolve(graph: ir.Graph, name: str, refs: dict[str, str]) -> str:
    """The SQL of a bound value, through Reshape aliases (a reshape of a flat list is the list itself)."""
    while name not in refs:
        node = graph.node(name)
        assert isinstance(node, ir.Reshape), f"{name} is neither bound nor an alias"
        name = node.inputs[0]
    return refs[name]


def apply_activation(vector_expr: str, activation: str) -> str:
    if activation == "softmax":
        return f"list_transform([{vector_expr}], lambda _nn_v: {softmax('_nn_v')})[1]"
    if activation == "linear":
        return vector_expr
    return f"list_transform({vector_expr}, lambda _nn_e: {scalar_activation(activation, '_nn_e')})"


# typeof() of a list (or fixed-size array) of numbers: what a macro accepts as features.
NUMERIC_LIST = (
    r"(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|UHUGEINT|FLOAT|DOUBLE"
    r"|DECIMAL\(\d+,\d+\))\[\d*\]"
)
OUTSIDE = (
    "list_transform({x}, lambda _nn_e: _nn_e < 0 OR _nn_e >= {bound} "
    "OR _nn_e::DOUBLE <> floor(_nn_e::DOUBLE))"
)
DUCKDB = Dialect(
    target=TARGET,
    array_type="DOUBLE[]",
    check="WHEN {condition} THEN {outcome}",  # the macro's CASE
    return_null="NULL",
    error="error({message})",
    error_with_argument="error({message} || {argument})",
    error_codes=dict.fromkeys(("length", "dimensions", "nulls", "nonfinite", "index", "type"), ""),
    length="len({x})",
    wrong_length="len({x}) <> {size}",
    has_nulls="list_count({x}) <> {size}",
    # a macro's arguments are untyped: a VARCHAR or BOOLEAN list would be cast to numbers silently
    wrong_type=(f"NOT regexp_full_match(typeof({{x}}), '{NUMERIC_LIST}')", "typeof({x})"),
    # NaN is the largest value in DuckDB: list_max and list_min (cheap) find it, infinities and values
    # beyond float32's range; only then is the first one located
    nonfinite=(
        f"NOT (list_max({{x}}::DOUBLE[]) <= {FLOAT32_MAX!r} "
        f"AND list_min({{x}}::DOUBLE[]) >= -{FLOAT32_MAX!r})",
        f"(list_position(list_transform({{x}}, lambda _nn_e: NOT (abs(_nn_e::DOUBLE) <= {FLOAT32_MAX!r})), "
        "true) - 1)",
    ),
    outside=(f"list_bool_or({OUTSIDE})", f"(list_position({OUTSIDE}, true) - 1)"),
)


class DuckDBGenerator(Generator):
    """Walks an IR graph, binding each value once; one `emit_<Kind>` method per node kind it computes
    itself (the others are fused elementwise: export/duckdb/fusion.py). The macro is one expression, so
    this target shares the checks (as CASE branches) but not the procedural statements."""

    dialect = DUCKDB

    def __init__(self, graph: ir.Graph, name: str, version: int) -> None:
        super().__init__(graph, name, version)
        self.params_ref = PARAMS  # where the weights are read: a scan binds its own around its loop
        self.folded = convolution.folded_windows(graph)  # windows computed by their convolution

    def input_checks(self, spec: ir.TensorSpec) -> Iterator[Check | str]:
        """Flat, nested or (when the model masks) shorter: export/duckdb/inputs.py."""
        return inputs.input_checks(self.dialect, InputForm.of(self.graph, self.name, spec), spec)

    # -- weights ------------------------------------------------------------------------------
    def tensor_filter(self, alias: str, tensor: str) -> str:
        return (
            f"{alias}.model = {literal(self.name)} AND {alias}.version = {self.version} "
            f"AND {alias}.tensor = {literal(tensor)}"
        )

    def params_Dense(self, node: ir.Dense) -> str:
        """A list of {w, b} structs, one per unit: the kernel is stored transposed (units x inputs). Each
        unit's row is picked by list_select: a slice of the captured kernel inside the lambda copies
        the whole kernel at every unit."""
        n_in = node.in_features
        sources = ["nnsql.tensors k"]
        filters = [self.tensor_filter("k", f"{node.name}.kernel")]
        bias = "0.0"
        if node.bias is not None:
            sources.append("nnsql.tensors b")
            filters.append(self.tensor_filter("b", f"{node.name}.bias"))
            bias = "b.value[_nn_j + 1]"
        row = f"range(_nn_j * {n_in} + 1, (_nn_j + 1) * {n_in} + 1)"
        unit = f"{{w: list_select(k.value, {row}), b: {bias}}}"
        return (
            f"(SELECT list_transform(range({node.units}), lambda _nn_j: {unit}) "
            f"FROM {', '.join(sources)} WHERE {' AND '.join(filters)})"
        )

    def params_PatchDense(self, node: ir.PatchDense) -> str:
        """The convolution kernel as per-filter {w, b} structs, exactly like a Dense layer's units."""
        return self.params_Dense(node)  # type: ignore[arg-type]

    def params_Affine(self, node: ir.Affine) -> str:
        """{scale, shift} lists, zipped with the value by emit_Affine (no lambda reads them)."""
        shift = "NULL"
        sources, filters = ["nnsql.tensors s"], [self.tensor_filter("s", f"{node.name}.scale")]
        if node.shift is not None:
            sources.append("nnsql.tensors b")
            filters.append(self.tensor_filter("b", f"{node.name}.shift"))
            shift = "b.value"
        where = " AND ".join(filters)
        return f"(SELECT {{scale: s.value, shift: {shift}}} FROM {', '.join(sources)} WHERE {where})"

    def params_Lookup(self, node: ir.Lookup) -> str:
        """The table as a list of rows, selected by emit_Lookup with list_select (no lambda reads it)."""
        width, where = node.width, self.tensor_filter("k", f"{node.name}.table")
        row = f"k.value[_nn_r * {width} + 1 : (_nn_r + 1) * {width}]"
        rows = f"list_transform(range({node.table.shape[0]}), lambda _nn_r: {row})"
        return f"(SELECT {rows} FROM nnsql.tensors k WHERE {where})"

    def params_Gather(self, node: ir.Gather) -> str:
        """1-based positions for list_select, once per query; padding (-1) points past the row's end,
        where emit_Gather appends a 0. The windows of a convolution read by whole pixels list each
        window's pixels instead (export/duckdb/convolution.py)."""
        where = self.tensor_filter("k", f"{node.name}.indices")
        past_end = self.graph.size_of(node.inputs[0]) + 1
        if node.name in self.folded:
            reader = next(n for n in self.graph.nodes if node.name in n.inputs)
            assert isinstance(reader, ir.PatchDense)
            return convolution.window_params(where, past_end, reader.size, reader.patches)
        position = f"CASE WHEN _nn_i < 0 THEN {past_end} ELSE _nn_i::INTEGER + 1 END"
        return (
            f"(SELECT list_transform(k.value, lambda _nn_i: {position}) FROM nnsql.tensors k WHERE {where})"
        )

    def params_Scan(self, node: ir.Scan) -> str | None:
        """A step computed unit by unit reads its Dense's rows grouped by unit (export/duckdb/units.py);
        None (the body's nodes hold the weights) for any other step."""
        plan = units.plan(node)
        if plan is None:
            return None
        dense = plan.dense
        sources, filters = ["nnsql.tensors k"], [self.tensor_filter("k", f"{dense.name}.kernel")]
        if dense.bias is not None:
            sources.append("nnsql.tensors b")
            filters.append(self.tensor_filter("b", f"{dense.name}.bias"))
        return units.params(plan, filters, sources)

    def params(self) -> Iterator[tuple[str, str]]:
        grouped = {plan.dense.name for plan in self.per_unit_plans()}
        for node in self.graph.all_nodes():
            method = getattr(self, f"params_{node.kind}", None)
            sql = None if method is None or node.name in grouped else method(node)
            if sql is not None:
                yield node.name, sql

    def per_unit_plans(self) -> Iterator[units.PerUnit]:
        for node in self.graph.all_nodes():
            plan = units.plan(node) if isinstance(node, ir.Scan) else None
            if plan is not None:
                yield plan

    # -- nodes --------------------------------------------------------------------------------
    def emit_Dense(self, node: ir.Dense, x: str) -> str:
        """The four cheap activations are fused into each unit; the others (which name their input more
        than once) are applied to the finished vector, so no dot product is computed twice."""
        linear = f"list_dot_product(_nn_u.w, {x}) + _nn_u.b"
        units = f"list_transform({self.params_ref}.{node.name}, lambda _nn_u: {{}})"
        if node.activation in SCALAR_ACTIVATIONS:
            return units.format(scalar_activation(node.activation, linear))
        return apply_activation(units.format(linear), node.activation)

    def emit_StepMask(self, node: ir.StepMask, x: str) -> str:
        """1.0 for each step of which some feature is not 0, else 0.0 (the IR's value, so that any node may
        read it). Each step's features are read by index from the row inside a lambda over the steps: a
        slice of the row, strided or not, copies values at every call, and DuckDB reads an element of a
        captured list without copying it."""
        width = self.graph.size_of(node.inputs[0]) // node.steps
        flag = "CASE WHEN {} THEN 1.0::DOUBLE ELSE 0.0::DOUBLE END"
        if width == 1:
            return f"list_transform({x}, lambda _nn_e: {flag.format('_nn_e <> 0')})"
        if width <= ZIP_LIMIT:
            any_set = " OR ".join(f"{x}[_nn_t * {width} + {j + 1}] <> 0" for j in range(width))
        else:
            window = f"{x}[_nn_t * {width} + 1 : (_nn_t + 1) * {width}]"
            any_set = f"list_bool_or(list_transform({window}, lambda _nn_e: _nn_e <> 0))"
        return f"list_transform(range({node.steps}), lambda _nn_t: {flag.format(any_set)})"

    @staticmethod
    def step_values(x: str, features: int) -> str:
        """The features of step _nn_t of list `x`, read by index (a slice when they are many)."""
        if features > ZIP_LIMIT:
            return f"{x}[_nn_t * {features} + 1 : (_nn_t + 1) * {features}]"
        return "[" + ", ".join(f"{x}[_nn_t * {features} + {f + 1}]" for f in range(features)) + "]"

    def emit_Scan(self, node: ir.Scan, x: str, mask: str | None = None) -> str:
        """A list_reduce over the steps (see `scan_elements`); the accumulator {s: state, o: outputs, ...}
        has the elements' type, as list_reduce requires. Only this scan's weights are bound around the
        loop: whatever the loop's lambda reads from outside is copied at every step."""
        size, empty = node.output_size, "[]::DOUBLE[]"
        refs = {node.state_input: "_nn_acc.s", node.step_input: "_nn_step.x"}

        def new_accumulator(refs: dict[str, str]) -> str:
            new = refs[node.body.output]
            outputs = f"list_concat(_nn_acc.o, {new}[1:{size}])" if node.sequences else empty
            return f"{{s: {new}, o: {outputs}, k: 1.0, x: {empty}}}"

        outer, inner = self.params_ref, value_ref(f"{node.name}_weights")
        plan = units.plan(node)
        if plan is not None:
            update = self.per_unit_step(node, plan, refs, inner, new_accumulator)
        else:
            self.params_ref = inner
            update = self.let_chain(node.body, refs, new_accumulator, by_index=True)
            self.params_ref = outer
        if mask is not None and node.sequences:
            skipped = zeros(size) if node.zero_masked else f"_nn_acc.s[1:{size}]"
            carried = f"{{s: _nn_acc.s, o: list_concat(_nn_acc.o, {skipped}), k: 1.0, x: {empty}}}"
            update = f"CASE WHEN _nn_step.k > 0 THEN {update} ELSE {carried} END"
        initial = f"{{s: {zeros(node.state_size)}, o: {empty}, k: 1.0, x: {empty}}}"
        reduced = (
            f"list_reduce({self.scan_elements(node, x, mask)}, lambda _nn_acc, _nn_step: {update}, {initial})"
        )
        loop = f"{reduced}.o" if node.sequences else f"{reduced}.s[1:{size}]"
        if plan is not None:
            return self.let([(f"{outer}.{node.name}", inner)], loop)
        weights = [f"{n.name}: {outer}.{n.name}" for n in node.body.nodes if self.has_params(n)]
        return self.let([("{" + ", ".join(weights) + "}", inner)], loop) if weights else loop

    def per_unit_step(
        self,
        node: ir.Scan,
        plan: units.PerUnit,
        refs: dict[str, str],
        weights: str,
        result: Callable[[dict[str, str]], str],
    ) -> str:
        """One step unit by unit (export/duckdb/units.py): the Dense's input, then each unit's values,
        then the new state, each bound once."""
        body, source = node.body, plan.dense.inputs[0]
        bindings = []
        if source in refs:
            dense_input = refs[source]
        else:
            dense_input = value_ref(source)
            elements = fusion.Elements(body, refs, by_index=True)
            bindings.append((elements.list_of(elements.nodes[source]), dense_input))
        per_unit, new = value_ref(f"{node.name}_units"), value_ref(body.output)
        bindings.append((units.inputs_of_units(plan, weights, dense_input, refs[node.state_input]), per_unit))
        bindings.append((units.new_state(plan, per_unit), new))
        return self.let(bindings, result({body.output: new}))

    def scan_elements(self, node: ir.Scan, x: str, mask: str | None) -> str:
        """The steps as list elements {x: features, k: 1 kept or 0 masked} in the order they run, each read
        by index from the row (see `emit_StepMask`). Without sequences, masked steps are left out (Keras
        carries the state over them, so skipping them is exact): only the kept steps' indices are listed."""
        empty, steps, flag = "[]::DOUBLE[]", f"range({node.steps})", "1.0"
        if mask is not None and not node.sequences:
            steps = f"list_filter({steps}, lambda _nn_t: {mask}[_nn_t + 1] > 0)"
        elif mask is not None:
            flag = f"CASE WHEN {mask}[_nn_t + 1] > 0 THEN 1.0 ELSE 0.0 END"
        if node.reverse:
            steps = f"list_reverse({steps})"
        element = f"{{s: {empty}, o: {empty}, k: {flag}, x: {self.step_values(x, node.features)}}}"
        return f"list_transform({steps}, lambda _nn_t: {element})"

    def has_params(self, node: ir.Node) -> bool:
        return hasattr(self, f"params_{node.kind}")

    def let_chain(
        self,
        graph: ir.Graph,
        refs: dict[str, str],
        result: Callable[[dict[str, str]], str],
        *,
        by_index: bool = False,
    ) -> str:
        """`result(refs)` inside one binding per dependency level of the graph's bound values (see
        export/duckdb/fusion.py); `refs` maps the values already bound (inputs) to their SQL. With
        `by_index`, fused values read the bound ones by index (fusion.Elements)."""
        refs = dict(refs)
        elements = fusion.Elements(graph, refs, by_index=by_index)
        bindings = []
        for group in fusion.levels(graph, fusion.bound_values(graph, refs), set(refs)):
            expressions = [(name, self.value_sql(graph, name, refs, elements)) for name in group]
            if len(group) == 1:
                variable = value_ref(group[0])
                bindings.append((expressions[0][1], variable))
                refs[group[0]] = variable
                continue
            variable = value_ref(f"{group[0]}_level")
            bindings.append(("{" + ", ".join(f"{n}: {e}" for n, e in expressions) + "}", variable))
            refs.update({name: f"{variable}.{name}" for name in group})
        return self.let(bindings, result(refs))

    @staticmethod
    def let(bindings: list[tuple[str, str]], result: str) -> str:
        """`result` with each (expression, variable) bound in turn: list_transform([e], lambda v: ...)[1]."""
        indent = "\n            "
        opened = "".join(f"list_transform([{expr}], lambda {var}:{indent}" for expr, var in bindings)
        return f"{opened}{result}{')[1]' * len(bindings)}"

    def value_sql(self, graph: ir.Graph, name: str, refs: dict[str, str], elements: fusion.Elements) -> str:
        node = elements.nodes[name]
        if fusion.fusable(node):
            return elements.list_of(node)
        if isinstance(node, ir.PatchDense) and node.inputs[0] in self.folded:
            gather = graph.node(node.inputs[0])
            return self.emit_convolution(node, gather, resolve(graph, gather.inputs[0], refs))
        method = emitter(self, node, TARGET)
        sql: str = method(node, *(resolve(graph, source, refs) for source in node.inputs))
        return sql

    def emit_Gather(self, node: ir.Gather, x: str) -> str:
        """Every window's values, read one element at a time (export/duckdb/convolution.py); padding
        reads the 0 appended to the row."""
        picked = convolution.picked("_nn_x", f"{self.params_ref}.{node.name}")
        return f"list_transform([list_append({x}, 0.0::DOUBLE)], lambda _nn_x: {picked})[1]"

    def emit_PatchDense(self, node: ir.PatchDense, x: str) -> str:
        """The kernel over each window, flattened position-major. With small windows and few units, the
        windows are cut by zipped strided slices and each unit runs over all of them (a lambda over the
        positions that sliced the row, or read the weights, would copy them at every position); the
        unit-major results are then zipped back into position-major order."""
        fused = node.activation in SCALAR_ACTIVATIONS
        if node.size > ZIP_LIMIT or node.units > ZIP_LIMIT:
            window = f"{x}[_nn_q * {node.size} + 1 : (_nn_q + 1) * {node.size}]"
            unit = self.unit(node, window, fused)
            per_position = f"list_transform({self.params_ref}.{node.name}, lambda _nn_u: {unit})"
            values = f"flatten(list_transform(range({node.patches}), lambda _nn_q: {per_position}))"
        else:
            per_unit = f"list_transform(_nn_w, lambda _nn_win: {self.unit(node, '_nn_win', fused)})"
            results = f"list_transform({self.params_ref}.{node.name}, lambda _nn_u: {per_unit})"
            values = self.let(
                [(windows(x, node.size), "_nn_w"), (results, "_nn_r")], interleave("_nn_r", node.units)
            )
        return values if fused else apply_activation(values, node.activation)

    def emit_convolution(self, node: ir.PatchDense, gather: ir.Node, x: str) -> str:
        """A PatchDense whose windows are picked from `x` (the Gather's input) inside its loop over the
        output positions (export/duckdb/convolution.py)."""
        fused = node.activation in SCALAR_ACTIVATIONS
        windows, filters = f"{self.params_ref}.{gather.name}", f"{self.params_ref}.{node.name}"
        values = convolution.convolution(x, windows, filters, self.unit(node, "_nn_win", fused))
        return values if fused else apply_activation(values, node.activation)

    @staticmethod
    def unit(node: ir.PatchDense, window: str, fused: bool) -> str:
        linear = f"list_dot_product(_nn_u.w, {window}) + _nn_u.b"
        return scalar_activation(node.activation, linear) if fused else linear

    def emit_Lookup(self, node: ir.Lookup, x: str) -> str:
        rows = f"list_transform({x}, lambda _nn_e: _nn_e::INTEGER + 1)"
        return f"flatten(list_select({self.params_ref}.{node.name}, {rows}))"

    def emit_Affine(self, node: ir.Affine, x: str) -> str:
        weights = f"{self.params_ref}.{node.name}"
        if node.shift is None:
            return f"list_transform(list_zip({x}, {weights}.scale), lambda _nn_z: _nn_z[1] * _nn_z[2])"
        zipped = f"list_zip({x}, {weights}.scale, {weights}.shift)"
        return f"list_transform({zipped}, lambda _nn_z: _nn_z[1] * _nn_z[2] + _nn_z[3])"

    def emit_GroupMax(self, node: ir.GroupMax, x: str) -> str:
        if node.size <= ZIP_LIMIT:  # the groups as zipped strided slices: no lambda copies the row
            largest = ", ".join(f"_nn_e[{j + 1}]" for j in range(node.size))
            return f"list_transform(list_zip({strided(x, node.size)}), lambda _nn_e: greatest({largest}))"
        window = f"{x}[_nn_q * {node.size} + 1 : (_nn_q + 1) * {node.size}]"
        return f"list_transform(range({self.graph.size_of(node.name)}), lambda _nn_q: list_max({window}))"

    def emit_ActivationNode(self, node: ir.ActivationNode, x: str) -> str:
        return apply_activation(x, node.activation)

    def body(self) -> str:
        """The weights, then each input, then the graph's values level by level. The inputs are bound
        apart from the weights: a Dense's lambda over its units copies what it reads at every unit."""
        values = [
            (inputs.padded(InputForm.of(self.graph, self.name, spec), spec.name), value_ref(spec.name))
            for spec in self.graph.inputs
        ]
        refs = {spec.name: value_ref(spec.name) for spec in self.graph.inputs}
        chain = self.let(values, self.let_chain(self.graph, refs, lambda refs: refs[self.graph.output]))
        # params() is a one-element list: iterating it binds the weights once per query (indexing it
        # with [1] would run the subquery again for every row)
        batched = batches.in_batches(chain, batches.rows_at_once(self.graph, self.folded))
        return f"(list_transform({self.name}.params(), lambda {PARAMS}:\n            {batched})[1])"

    def function(self, function: str) -> str:
        """`<name>.<function>(<inputs>)`."""
        return f"{self.name}.{function}({', '.join(spec.name for spec in self.graph.inputs)})"

    def first_probabilities(self, p: str) -> str:
        """The first output's probabilities from predict's value `p` (codegen.Answering's steps)."""
        a = self.answering
        value = f"list_slice({p}, 1, {a.first_size})" if a.several else p
        for step in a.steps:
            if step != "complement":
                value = apply_activation(value, step)
                continue
            pair = "CASE WHEN _nn_p IS NULL THEN NULL ELSE [1.0 - _nn_p[1], _nn_p[1]] END"
            value = f"list_transform([{value}], lambda _nn_p: {pair})[1]"
        return value

    def read_probabilities(self) -> str:
        """What score and labels read: predict_proba, or with several outputs the first one's."""
        if self.answering.several:
            return self.first_probabilities(self.function("predict"))
        return self.function("predict_proba")

    def body_of(self, function: str) -> str:
        """The expression of one function users query (codegen.Answering says which answer)."""
        a = self.answering
        if not a.answers(function):
            return f"error({literal(a.refusals[function])})"
        if function == "predict_proba":
            predicted = self.function("predict")
            return predicted if a.several else self.first_probabilities(predicted)
        if function == "predict_logits":
            return self.function("predict")
        q = self.read_probabilities()
        if function == "score" and a.two_columns:  # NULL stays NULL: a comparison with NULL is NULL
            return f"list_transform([{q}], lambda _nn_q: (_nn_q[2] > {kinds.THRESHOLD})::INTEGER)[1]"
        if function == "score":
            return f"list_transform([{q}], lambda _nn_q: list_position(_nn_q, list_max(_nn_q)) - 1)[1]"
        if function == "label":
            return f"{self.name}.classes()[{self.function('score')} + 1]"
        above = "list_filter(range(1, len(_nn_q) + 1), lambda _nn_i: _nn_q[_nn_i] > threshold)"
        return f"list_select({self.name}.classes(), list_transform([{q}], lambda _nn_q: {above})[1])"

    def functions(self) -> list[tuple[str, str, str, str]]:
        """(comment, name, parameters, body) of every function users query beside predict, in order."""
        arguments = ", ".join(spec.name for spec in self.graph.inputs)
        result = []
        for function in ("predict_proba", "predict_logits", "score", "label", "labels"):
            parameters = f"{arguments}, threshold := {kinds.THRESHOLD}" if function == "labels" else arguments
            body = self.body_of(function)
            result.append((self.answering.comment(function), function, parameters, body))
        return result

    def render(self) -> str:
        """The version's macros (they read its weights table: `render_weights` first)."""
        context = self.context()
        context.update(
            weights_table=weights_table(self.name, self.version),
            body=self.body(),
            n_classes=self.graph.first_size,
            functions=self.functions(),
        )
        return wrap(render_template(TEMPLATES, "model.sql.j2", context))

    def render_weights(self) -> str:
        """The statement that builds the version's weights table from its rows of nnsql.tensors."""
        context = self.context()
        context.update(weights_table=weights_table(self.name, self.version), params=list(self.params()))
        return wrap(render_template(TEMPLATES, "weights.sql.j2", context))


CAPABILITIES = register(
    Capabilities(
        target=TARGET,
        node_kinds=emitted_kinds(DuckDBGenerator) | set(fusion.FUSED_KINDS),
        several_outputs=True,
    ),
    DuckDBGenerator,
)
