"""IR → Oracle PL/SQL: a package per model version that runs the network with UTL_NLA BLAS calls.

Dense layers are one `UTL_NLA.BLAS_GEMV` each: A = kernelᵀ (units × inputs) in column-major order, which is
exactly the Keras kernel (inputs × units) flattened row-major, so `trans => 'N'`, `m => units`,
`lda => units`, `pack => 'C'`. y starts as the bias (beta = 1). A kernel over 1,000,000 values (the
VARRAY limit) is stored in chunks of whole units, one GEMV per chunk into a slice of y.

Every statement of the network body has one of a few regular forms (see `statements`), so that tests can
execute the generated text with an independent numpy reference of the documented BLAS semantics.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from export import activations, ir
from export.errors import ExportError, InvalidName
from export.names import check_model_name
from export.sqltext import literal
from export.target import Capabilities, emitted_kinds, emitter, register

TARGET = "oracle"
MAX_ARRAY_LEN = 1_000_000  # UTL_NLA_ARRAY_FLT is VARRAY(1000000) OF BINARY_FLOAT
TEMPLATES = Path(__file__).resolve().parents[2] / "plsql"
SQL_DIR = Path(__file__).resolve().parents[2] / "sql" / "oracle"
# Oracle reserved words and names nnsql or Oracle uses: a model may not take them.
ORACLE_RESERVED = frozenset(
    line.strip()
    for line in (SQL_DIR / "reserved_words.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
)
MAX_NAME = 25  # leaves room for "_v<version>" within Oracle's 30-byte names of older releases


def check_oracle_name(name: str) -> str:
    check_model_name(name, max_length=MAX_NAME)
    if name in ORACLE_RESERVED or name.startswith(("nnsql", "sys", "dbms_", "utl_")):
        raise InvalidName(f"invalid model name {name!r}: reserved in Oracle, choose another")
    return name


@dataclass(frozen=True)
class StoredChunk:
    """One row of nnsql_tensors: a tensor, or a chunk of whole output units of a large kernel."""

    tensor: str
    chunk: int
    values: np.ndarray  # flat float32, in the order the BLAS call reads it
    shape: str
    layout: str
    variable: str
    first_unit: int = 0  # offset of the chunk's units in the layer's output
    units: int = 0


def kernel_chunks(node: ir.Dense) -> Iterator[StoredChunk]:
    per_chunk = MAX_ARRAY_LEN // node.in_features
    kernel = node.kernel.array
    for number, start in enumerate(range(0, node.units, per_chunk), start=1):
        block = kernel[:, start : start + per_chunk]
        units = block.shape[1]
        yield StoredChunk(
            tensor=f"{node.name}.kernel",
            chunk=number,
            values=np.ascontiguousarray(block).ravel(),
            shape=f"{node.in_features}x{units}",
            layout=f"units {start + 1}..{start + units} x inputs, column-major (lda {units})",
            variable=f"g_{node.name}_kernel_{number}",
            first_unit=start,
            units=units,
        )


def whole(node: ir.Node, role: str, array: np.ndarray, shape: str, layout: str) -> StoredChunk:
    """A tensor stored in one row (the capability check keeps it within MAX_ARRAY_LEN)."""
    return StoredChunk(f"{node.name}.{role}", 1, array.ravel(), shape, layout, f"g_{node.name}_{role}_1")


def convolution_chunks(node: ir.Node) -> Iterator[StoredChunk]:
    if isinstance(node, ir.Gather):
        yield whole(node, "indices", node.indices.array, str(node.indices.size), "0-based input index, -1: 0")
    elif isinstance(node, ir.PatchDense):
        yield whole(
            node, "kernel", node.kernel.array, f"{node.size}x{node.units}", "window x units, row-major"
        )
        if node.bias is not None:
            yield whole(node, "bias", node.bias.array, str(node.units), "vector")


def affine_chunks(node: ir.Node) -> Iterator[StoredChunk]:
    if isinstance(node, ir.Lookup):
        shape = f"{node.table.shape[0]}x{node.width}"
        yield whole(node, "table", node.table.array, shape, "rows x width, row-major")
    if isinstance(node, ir.Affine):
        yield whole(node, "scale", node.scale.array, str(node.scale.size), "vector")
        if node.shift is not None:
            yield whole(node, "shift", node.shift.array, str(node.shift.size), "vector")


def stored_chunks(graph: ir.Graph) -> Iterator[StoredChunk]:
    """Every row the package reads, kernels split into chunks of at most MAX_ARRAY_LEN values."""
    for node in graph.all_nodes():
        yield from convolution_chunks(node)
        yield from affine_chunks(node)
        if isinstance(node, ir.Dense):
            yield from kernel_chunks(node)
            if node.bias is not None:
                yield StoredChunk(
                    f"{node.name}.bias",
                    1,
                    node.bias.array.ravel(),
                    str(node.units),
                    "vector",
                    f"g_{node.name}_bias_1",
                )


class OracleGenerator:
    """Walks an IR graph; one `emit_<Kind>` method per supported node kind yields PL/SQL statements."""

    def __init__(self, graph: ir.Graph, name: str, version: int) -> None:
        self.graph = graph
        self.name = name
        self.version = version
        self.package = f"{name}_v{version}"

    def var(self, value: str) -> str:
        return value if any(spec.name == value for spec in self.graph.inputs) else f"v_{value}"

    def emit_Dense(self, node: ir.Dense, x: str) -> Iterator[str]:
        y = self.var(node.name)
        chunks = list(kernel_chunks(node))
        single = len(chunks) == 1
        if not single:
            yield f"{y} := zeros({node.units});"
        for chunk in chunks:
            target = y if single else "v_chunk"
            if node.bias is not None:
                yield f"{target} := slice(g_{node.name}_bias_1, {chunk.first_unit + 1}, {chunk.units});"
            else:
                yield f"{target} := zeros({chunk.units});"
            yield (
                f"UTL_NLA.BLAS_GEMV(trans => 'N', m => {chunk.units}, n => {node.in_features}, "
                "alpha => 1.0f, "
                f"a => {chunk.variable}, lda => {chunk.units}, x => {x}, incx => 1, beta => 1.0f, "
                f"y => {target}, incy => 1, pack => 'C');"
            )
            if not single:
                yield f"place({y}, v_chunk, {chunk.first_unit});"
        if node.activation != "linear":
            yield f"activate_{node.activation}({y});"

    def emit_ActivationNode(self, node: ir.ActivationNode, x: str) -> Iterator[str]:
        yield f"{self.var(node.name)} := {x};"
        if node.activation != "linear":
            yield f"activate_{node.activation}({self.var(node.name)});"

    def emit_Reshape(self, node: ir.Reshape, x: str) -> Iterator[str]:
        yield f"{self.var(node.name)} := {x};"

    def emit_Gather(self, node: ir.Gather, x: str) -> Iterator[str]:
        yield f"{self.var(node.name)} := gather({x}, g_{node.name}_indices_1);"

    def emit_PatchDense(self, node: ir.PatchDense, x: str) -> Iterator[str]:
        """All windows (patches × size, row-major) times the kernel (size × units) in one BLAS_GEMM,
        onto the bias repeated per window; the result is position-major, as Keras lays it out."""
        y = self.var(node.name)
        if node.bias is not None:
            yield f"{y} := tile(g_{node.name}_bias_1, {node.patches});"
        else:
            yield f"{y} := zeros({node.patches * node.units});"
        yield (
            f"UTL_NLA.BLAS_GEMM(transa => 'N', transb => 'N', m => {node.patches}, n => {node.units}, "
            f"k => {node.size}, alpha => 1.0f, a => {x}, lda => {node.size}, b => g_{node.name}_kernel_1, "
            f"ldb => {node.units}, beta => 1.0f, c => {y}, ldc => {node.units}, pack => 'R');"
        )
        if node.activation != "linear":
            yield f"activate_{node.activation}({y});"

    def emit_GroupMax(self, node: ir.GroupMax, x: str) -> Iterator[str]:
        yield f"{self.var(node.name)} := group_max({x}, {node.size});"

    def emit_Concatenate(self, node: ir.Concatenate, *parts: str) -> Iterator[str]:
        """The parts placed one after the other into a vector of their total size."""
        y = self.var(node.name)
        yield f"{y} := zeros({self.graph.size_of(node.name)});"
        offset = 0
        for name, part in zip(node.inputs, parts, strict=True):
            yield f"place({y}, {part}, {offset});"
            offset += self.graph.size_of(name)

    def emit_Slice(self, node: ir.Slice, x: str) -> Iterator[str]:
        yield f"{self.var(node.name)} := slice({x}, {node.start + 1}, {node.stop - node.start});"

    def emit_Binary(self, node: ir.Binary, a: str, b: str) -> Iterator[str]:
        yield f"{self.var(node.name)} := elementwise({a}, {b}, {literal(node.op)});"

    def emit_Lookup(self, node: ir.Lookup, x: str) -> Iterator[str]:
        yield f"{self.var(node.name)} := lookup({x}, g_{node.name}_table_1, {node.width});"

    def emit_Affine(self, node: ir.Affine, x: str) -> Iterator[str]:
        y = self.var(node.name)
        yield f"{y} := elementwise({x}, g_{node.name}_scale_1, 'mul');"
        if node.shift is not None:
            yield f"{y} := elementwise({y}, g_{node.name}_shift_1, 'add');"

    def emit_StepMask(self, node: ir.StepMask, x: str) -> Iterator[str]:
        yield f"{self.var(node.name)} := step_mask({x}, {node.steps});"

    def emit_Scan(self, node: ir.Scan, x: str, mask: str | None = None) -> Iterator[str]:
        """A FOR loop over the steps running the body's statements (see ir.Scan); one statement per line,
        in the regular forms the test interpreter reads."""
        y, state, size = self.var(node.name), self.var(node.state_input), node.output_size
        yield f"{state} := zeros({node.state_size});"
        if node.sequences:
            yield f"{y} := UTL_NLA_ARRAY_FLT();"
        direction = "REVERSE " if node.reverse else ""
        yield f"FOR nn_t IN {direction}0 .. {node.steps - 1} LOOP"
        if mask is not None:
            carry = (
                f"append_first({y}, {'zeros(' + str(size) + ')' if node.zero_masked else state}, {size}); "
            )
            yield f"    IF {mask}(nn_t + 1) = 0 THEN {carry if node.sequences else ''}CONTINUE; END IF;"
        yield f"    {self.var(node.step_input)} := step_of({x}, nn_t, {node.features});"
        for statement in self.statements(node.body):
            yield f"    {statement}"
        yield f"    {state} := {self.var(node.body.output)};"
        if node.sequences:
            yield f"    append_first({y}, {state}, {size});"
        yield "END LOOP;"
        if not node.sequences:
            yield f"{y} := slice({state}, 1, {size});"

    def statements(self, graph: ir.Graph | None = None) -> Iterator[str]:
        for node in (graph or self.graph).nodes:
            method = emitter(self, node, TARGET)
            yield from method(node, *(self.var(name) for name in node.inputs))

    def checks(self) -> Iterator[str]:
        for spec in self.graph.inputs:
            errors = ir.InputErrors.of(self.name, spec)
            yield f"IF {spec.name} IS NULL THEN RETURN NULL; END IF;"
            yield (
                f"IF {spec.name}.COUNT <> {spec.size} THEN RAISE_APPLICATION_ERROR(-20001, "
                f"{literal(errors.length)} || {spec.name}.COUNT); END IF;"
            )
            if spec.dtype == "int32":
                x = spec.name
                outside = f"{x}(i) < 0 OR {x}(i) >= {spec.bound} OR {x}(i) <> TRUNC({x}(i))"
                error = f"RAISE_APPLICATION_ERROR(-20004, {literal(errors.index)} || (i - 1))"
                yield f"FOR i IN 1 .. {x}.COUNT LOOP IF {outside} THEN {error}; END IF; END LOOP;"
            yield (
                f"FOR i IN 1 .. {spec.name}.COUNT LOOP IF {spec.name}(i) IS NULL THEN "
                "RAISE_APPLICATION_ERROR("
                f"-20002, {literal(errors.nulls)}); END IF; "
                f"IF {spec.name}(i) IS NAN OR {spec.name}(i) IS INFINITE THEN RAISE_APPLICATION_ERROR("
                f"-20003, {literal(errors.nonfinite)} || (i - 1)); END IF; END LOOP;"
            )

    def parameters(self) -> list[str]:
        return [f"{spec.name} IN UTL_NLA_ARRAY_FLT" for spec in self.graph.inputs]

    def context(self) -> dict:
        chunks = list(stored_chunks(self.graph))
        scan_inputs = [spec.name for spec in self.graph.all_inputs() if spec not in self.graph.inputs]
        values = [self.var(name) for name in scan_inputs]
        values += [self.var(node.name) for node in self.graph.all_nodes()] + ["v_chunk"]
        return {
            "name": self.name,
            "name_literal": literal(self.name),
            "version": self.version,
            "package": self.package,
            "sha256": self.graph.sha256(),
            "parameters": ", ".join(self.parameters()),
            "parameter_list": [f"{spec.name} UTL_NLA_ARRAY_FLT" for spec in self.graph.inputs],
            "arguments": ", ".join(spec.name for spec in self.graph.inputs),
            "argument_list": [spec.name for spec in self.graph.inputs],
            "classes": ", ".join(literal(label) for label in self.graph.classes),
            "tensor_variables": [chunk.variable for chunk in chunks],
            "loads": [(chunk.tensor, chunk.chunk, chunk.variable) for chunk in chunks],
            "value_variables": values,
            "checks": list(self.checks()),
            "statements": list(self.statements()),
            "output": self.var(self.graph.output),
            "outputs": self.graph.outputs,
            # score's argmax runs over the first output (predict_proba joins several)
            "first_count": str(self.graph.outputs[0].stop) if self.graph.outputs else "p.COUNT",
            "elementwise": [(name, activations.formula(name, "plsql", "z")) for name in self.elementwise()],
        }

    def elementwise(self) -> list[str]:
        """The activations of export/activations.py this graph uses: each gets a procedure."""
        used = {getattr(node, "activation", None) for node in self.graph.all_nodes()}
        return [name for name in activations.FORMULAS if name in used]

    def render(self, template: str) -> str:
        environment = Environment(
            loader=FileSystemLoader(TEMPLATES), undefined=StrictUndefined, keep_trailing_newline=True
        )
        return environment.get_template(template).render(**self.context())

    def version_package(self) -> str:
        return self.render("version_package.sql.j2")

    def dispatch_spec(self) -> str:
        return self.render("dispatch_package.sql.j2")

    def dispatch_body(self) -> str:
        return self.render("dispatch_body.sql.j2")


def check_weights_finite(graph: ir.Graph) -> None:
    for tensor, weights in graph.named_weights():
        if not np.all(np.isfinite(weights.array)):
            raise ExportError(f"tensor {tensor} holds NaN or infinite values; refusing to export")


CAPABILITIES = register(
    Capabilities(
        target=TARGET,
        node_kinds=emitted_kinds(OracleGenerator),
        max_array_len=MAX_ARRAY_LEN,
        several_outputs=True,
    )
)
