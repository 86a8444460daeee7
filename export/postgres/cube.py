"""IR → PostgreSQL with the cube kernel: the PL/pgSQL generator, with every Dense product computed by the
trusted extension cube's C `cube_distance` (the algebra and its error bound: export/postgres/kernels.py).

Per Dense node, the generated code cuts the input into points, divides it by a power of two s at or above
their largest norm when that exceeds 1 (exact), computes the row's term once, then runs one statement per
unit whose chunks are unrolled:

    h[j] = bias[j] + s · (row + |v_j|² − Σ_c cube_distance(x_c/s, v_jc)²) / 2
"""

from __future__ import annotations

from collections.abc import Iterator

from ..codegen.sqltext import literal
from ..ir import graph as ir
from ..target import Capabilities, emitted_kinds, register
from .generator import PostgresGenerator, weight_variable
from .kernels import cube_kernel


def is_dense_kernel(node: ir.Node, role: str) -> bool:
    return isinstance(node, ir.Dense) and role == "kernel"


class CubeGenerator(PostgresGenerator):
    def __init__(self, graph: ir.Graph, name: str, version: int, *, cube_schema: str) -> None:
        super().__init__(graph, name, version)
        self.cube_schema = cube_schema  # quoted identifier, read from pg_extension

    def emit_Dense(self, node: ir.Dense, x: str) -> list[str]:
        layout = cube_kernel(node.kernel.array)
        y, points, row = self.var(node.name), f"c_{node.name}_x", f"c_{node.name}_row"
        distances = " + ".join(
            f"{self.cube_schema}.cube_distance({points}[{c + 1}], c_{node.name}_points[nn_j * "
            f"{layout.chunks} + {c + 1}]) ^ 2"
            for c in range(layout.chunks)
        )
        bias = f"{weight_variable(node, 'bias')}[nn_j + 1] + " if node.bias is not None else ""
        scale = f"c_{node.name}_scale"
        lines = [
            f"{points} := nnsql.cube_chunks({x}, {layout.chunk});",
            f"{scale} := nnsql.cube_scale({points});",  # 1 for inputs within ±1: nothing more to do
            f"IF {scale} > 1 THEN {points} := nnsql.cube_chunks({x}, {layout.chunk}, {scale}); END IF;",
            f"{row} := nnsql.cube_row_term({points}, {layout.shift!r});",
            # cube_distance reads a NaN coordinate as a distance, not NaN: a NaN input (a fully masked
            # average's) makes every unit NaN, as in Keras
            f"IF array_position({x}, 'NaN') IS NOT NULL THEN {row} := 'NaN'; END IF;",
            f"FOR nn_j IN 0..{layout.units - 1} LOOP",
            f"    {y}[nn_j + 1] := {bias}{scale} * ({row} + c_{node.name}_norms[nn_j + 1] "
            f"- ({distances})) / 2;",
            "END LOOP;",
        ]
        if node.activation != "linear":
            lines.append(self.activate(node))
        return lines

    def dense_nodes(self) -> Iterator[ir.Dense]:
        return (node for node in self.graph.all_nodes() if isinstance(node, ir.Dense))

    def weights_to_load(self) -> Iterator[tuple[ir.Node, str]]:
        """Every weight but the Dense kernels, which come from nnsql.cube_tensors (loads)."""
        return ((n, role) for n, role in super().weights_to_load() if not is_dense_kernel(n, role))

    def loads(self) -> Iterator[str]:
        yield from super().loads()
        for node in self.dense_nodes():
            yield (
                f"SELECT points, norms INTO c_{node.name}_points, c_{node.name}_norms\n"
                f"      FROM nnsql.cube_tensors WHERE model = {literal(self.name)} "
                f"AND version = {self.version} AND tensor = {literal(f'{node.name}.kernel')};"
            )

    def variables(self) -> Iterator[str]:
        yield from super().variables()
        for node in self.dense_nodes():
            yield f"c_{node.name}_x {self.cube_schema}.cube[]"
            yield f"c_{node.name}_row float8"
            yield f"c_{node.name}_scale float8"
            yield f"c_{node.name}_points {self.cube_schema}.cube[]"
            yield f"c_{node.name}_norms float8[]"


CAPABILITIES = register(
    Capabilities(target="postgres+cube", node_kinds=emitted_kinds(CubeGenerator), several_outputs=True),
    CubeGenerator,
)
