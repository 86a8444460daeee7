"""IR → PostgreSQL with the cube kernel: the PL/pgSQL generator, with every Dense product computed by the
trusted extension cube's C `cube_distance` (the algebra and its error bound: export/postgres/kernels.py).

The weights are literals of the generated code: PL/pgSQL parses a function once per session and keeps
the plan of each expression, so the points are built once per session and no call reads a table. Per
Dense node the code cuts x into points once (a variable each), divides it by a power of two s when a
point's norm exceeds R (kernels.scale_limit; exact), computes the row's term once, then every unit in one
expression, the squares of its K distances summed by cube's C as well (one power a unit, not K):

    h[j] = bias[j] + s · (row + |v_j|² − D_j²) / 2,   D_j = cube_distance((d_j1, …, d_jK), origin),
    d_jc = cube_distance(v_jc, x_c/s)

its activation inside it where the activation reads the value once (ELEMENTWISE), softmax in a few
more (a PL/pgSQL loop costs more than the products of a small layer). Each distance names the lower
point first: cube's C compares every coordinate for "a lies left of b" before "a lies right of b", so
with v ≤ x each coordinate takes one comparison and one jump fewer (bench/pg_kernels.py compares both
orders: cube_distances, cube_distances_x_first).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace

from ..codegen.generator import Check
from ..codegen.sqltext import literal
from ..ir import graph as ir
from ..target import Capabilities, emitted_kinds, register
from .generator import PostgresGenerator, weight_variable
from .kernels import CUBE_MAX_DIM, CubeKernel, cube_kernel, scale_limit

FLOAT32_MAX = 3.4028234663852886e38
# Activations applied inside each unit's expression, which they read once: no statement and no array
# read back per element (an activation statement cost as much as a tenth of the MNIST MLP's predict).
# The library's formulas (nnsql.activate) read an element up to four times; sigmoid here is the same
# function as (1 + tanh(e/2)) / 2, which neither overflows nor rounds a product to 0 (PostgreSQL raises
# on both), within 2e-16 of the library's.
ELEMENTWISE = {
    "relu": "greatest({e}, 0)",
    "tanh": "pg_catalog.tanh({e})",
    "sigmoid": "(1 + pg_catalog.tanh(({e}) / 2)) / 2",
}


def is_inlined_weight(node: ir.Node, role: str) -> bool:
    return isinstance(node, ir.Dense) and role in ("kernel", "bias")


def chunks(size: int, chunk: int) -> list[tuple[int, int]]:
    """(first, last) 1-based subscripts of each point x is cut into."""
    return [(first + 1, min(first + chunk, size)) for first in range(0, size, chunk)]


class CubeGenerator(PostgresGenerator):
    def __init__(self, graph: ir.Graph, name: str, version: int, *, cube_schema: str) -> None:
        super().__init__(graph, name, version)
        self.cube_schema = cube_schema  # quoted identifier, read from pg_extension

    def point(self, values: list[float]) -> str:
        """A cube point literal; repr() writes each float8 exactly."""
        text = "(" + ", ".join(repr(float(value)) for value in values) + ")"
        return f"{literal(text)}::{self.cube_schema}.cube"

    def distance(self, a: str, b: str) -> str:
        """The distance of two points of as many coordinates; the faster way round when a ≤ b."""
        return f"{self.cube_schema}.cube_distance({a}, {b})"

    def parts(self, x: str, size: int, chunk: int) -> list[str]:
        """x as points of `chunk` values each (the last may hold fewer)."""
        return [f"{self.cube_schema}.cube({x}[{first}:{last}])" for first, last in chunks(size, chunk)]

    def peak(self, points: list[str]) -> str:
        """The largest norm of the points (cube_distance reads a NaN coordinate as 0)."""
        origin = self.point([0.0])
        return "greatest(" + ", ".join(self.distance(point, origin) for point in points) + ")"

    def input_checks(self, spec: ir.TensorSpec) -> Iterator[Check | str]:
        """The shared checks, the scan for non-finite values skipped when C can vouch for the input: no
        NaN, and no point's norm beyond float32's range (a norm bounds each of its values)."""
        for check in super().input_checks(spec):
            if isinstance(check, Check) and check.kind == "nonfinite":
                x = spec.name
                norms = self.peak(self.parts(x, spec.size, CUBE_MAX_DIM))
                vouched = f"{norms} <= {FLOAT32_MAX!r} AND pg_catalog.array_position({x}, 'NaN') IS NULL"
                check = replace(
                    check, condition=f"(CASE WHEN {vouched} THEN false ELSE {check.condition} END)"
                )
            yield check

    def emit_Dense(self, node: ir.Dense, x: str) -> list[str]:
        layout = cube_kernel(node.kernel.float64)
        row, scale, scaled = f"c_{node.name}_row", f"c_{node.name}_scale", f"c_{node.name}_scaled"
        spans = chunks(layout.inputs, layout.chunk)
        points = [self.chunk_point(node, c) for c in range(len(spans))]
        limit = scale_limit(layout)
        shifted = [
            self.distance(self.point([-layout.shift] * (last - first + 1)), points[c])
            for c, (first, last) in enumerate(spans)
        ]
        lines = [
            *(
                f"{point} := {part};"
                for point, part in zip(points, self.parts(x, layout.inputs, layout.chunk), strict=True)
            ),
            f"{scale} := {self.peak(points)};",
            # beyond R the rounding grows with |x|²: x/s instead, s a power of two (exact)
            f"IF {scale} > {limit!r} THEN",
            f"    {scale} := 2 ^ pg_catalog.ceil(pg_catalog.ln({scale} / {limit!r}) "
            "/ pg_catalog.ln(2::float8));",
            f"    {scaled} := nnsql.cube_chunks({x}, {layout.chunk}, {scale});",
            "    " + " ".join(f"{point} := {scaled}[{c + 1}];" for c, point in enumerate(points)),
            f"ELSE {scale} := 1; END IF;",
            f"{row} := "
            + " + ".join(f"{d} ^ 2" for d in shifted)
            + f" - {float(layout.inputs * layout.shift**2)!r};",
            *self.nan_rows(x, row),
            f"{self.var(node.name)} := ARRAY[",
            *self.units(node, layout, points, row, scale),
            "];",
        ]
        return lines if node.activation in ELEMENTWISE else lines + self.activated(node)

    @staticmethod
    def chunk_point(node: ir.Dense, c: int) -> str:
        """The variable holding x's point c (0-based): one variable a point, as an element of a cube[]
        costs a subscript at each of the layer's units × points distances."""
        return f"c_{node.name}_x{c + 1}"

    def nan_rows(self, x: str, row: str) -> list[str]:
        """cube_distance reads a NaN coordinate as a distance, not NaN: a NaN value of x (a fully masked
        average's) makes every unit NaN, as in Keras. A model input the checks refuse NaN in needs no scan."""
        if self.checked_for_nan(x):
            return []
        return [f"IF pg_catalog.array_position({x}, 'NaN') IS NOT NULL THEN {row} := 'NaN'; END IF;"]

    def checked_for_nan(self, x: str) -> bool:
        """Whether x is a model input as the checks leave it: NaN refused, and padded (where the input
        pads) with a value that is not NaN."""
        for spec in self.graph.inputs:
            if spec.name == x:
                pad = self.input_form(spec).pad
                return pad is None or not math.isnan(pad)
        return False

    def units(self, node: ir.Dense, layout: CubeKernel, points: list[str], row: str, scale: str) -> list[str]:
        """One line per unit: its value (activated, where ELEMENTWISE has the activation), the kernel's
        points and |v|² as literals."""
        spans = chunks(layout.inputs, layout.chunk)
        lines = []
        for j in range(layout.units):
            vector = layout.vectors[j]
            distances = self.squared_sum(
                [
                    self.distance(self.point(list(vector[first - 1 : last])), points[c])
                    for c, (first, last) in enumerate(spans)
                ]
            )
            bias = f"{float(node.bias.float64[j])!r} + " if node.bias is not None else ""
            value = f"{bias}{scale} * ({row} + {float(layout.norms[j])!r} - ({distances})) / 2"
            comma = "," if j < layout.units - 1 else ""
            lines.append(f"    {ELEMENTWISE.get(node.activation, '{e}').format(e=value)}{comma}")
        return lines

    def squared_sum(self, distances: list[str]) -> str:
        """Σ d² of a unit's distances, one per point: cube's C sums the squares too, as the distance of
        the point (d₁, …, d_K) from the origin, then one power instead of K (kernels.dot_error_bound
        counts its rounding)."""
        if len(distances) == 1:
            return f"{distances[0]} ^ 2"
        point = f"{self.cube_schema}.cube(ARRAY[{', '.join(distances)}])"
        return f"{self.distance(point, self.point([0.0]))} ^ 2"

    def activated(self, node: ir.Dense) -> list[str]:
        """An activation the units' expressions do not apply (ELEMENTWISE), in place: softmax written out,
        others by the library."""
        y, units = self.var(node.name), node.units
        if node.activation == "linear":
            return []
        if node.activation == "softmax":
            exps = ", ".join(
                f"pg_catalog.exp(greatest({y}[{i}] - nn_peak, -700))" for i in range(1, units + 1)
            )
            total = " + ".join(f"{y}[{i}]" for i in range(1, units + 1))
            shares = ", ".join(f"{y}[{i}] / nn_total" for i in range(1, units + 1))
            return [
                f"nn_peak := greatest({', '.join(f'{y}[{i}]' for i in range(1, units + 1))});",
                f"{y} := ARRAY[{exps}];",
                f"nn_total := {total};",
                f"{y} := ARRAY[{shares}];",
            ]
        return [self.activate(node)]

    def weights_to_load(self) -> Iterator[tuple[ir.Node, str]]:
        """Every weight but the Dense kernels and biases, which are literals of the code."""
        return ((n, role) for n, role in super().weights_to_load() if not is_inlined_weight(n, role))

    def variables(self) -> Iterator[str]:
        inlined = {
            f"{weight_variable(node, role)} float8[]"
            for node in self.graph.all_nodes()
            for role, _ in node.weights()
            if is_inlined_weight(node, role)
        }
        yield from (variable for variable in super().variables() if variable not in inlined)
        for node in self.graph.all_nodes():
            if isinstance(node, ir.Dense):
                for c in range(-(-node.kernel.float64.shape[0] // CUBE_MAX_DIM)):
                    yield f"{self.chunk_point(node, c)} {self.cube_schema}.cube"
                yield f"c_{node.name}_scaled {self.cube_schema}.cube[]"
                yield f"c_{node.name}_row float8"
                yield f"c_{node.name}_scale float8"
        yield "nn_peak float8"
        yield "nn_total float8"


CAPABILITIES = register(
    Capabilities(target="postgres+cube", node_kinds=emitted_kinds(CubeGenerator), several_outputs=True),
    CubeGenerator,
)
