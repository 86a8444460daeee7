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
from typing import Any

import numpy as np

from nnsql.files import shipped

from ..codegen.generator import Dialect, render_template
from ..codegen.inputs import InputForm
from ..codegen.procedural import ProceduralGenerator
from ..errors import ExportError, InvalidName
from ..ir import activations, kinds
from ..ir import graph as ir
from ..names import check_model_name
from ..publish import parity
from ..target import Capabilities, emitted_kinds, register
from .literals import entry_literal
from .literals import script_literal as literal

TARGET = "oracle"
MAX_ARRAY_LEN = 1_000_000  # UTL_NLA_ARRAY_FLT is VARRAY(1000000) OF BINARY_FLOAT
TEMPLATES = shipped("plsql")
SQL_DIR = shipped("sql", "oracle")
# Oracle reserved words and names nnsql or Oracle uses: a model may not take them.
ORACLE_RESERVED = frozenset(
    line.strip()
    for line in (SQL_DIR / "reserved_words.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
)
ROWS_TYPE = "nnsql_rows"  # VARRAY of UTL_NLA_ARRAY_FLT: a sequence or image, one array per step or row
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


PLSQL = Dialect(
    target=TARGET,
    array_type="UTL_NLA_ARRAY_FLT",
    literal=literal,  # every text stays on its line of a script SQL*Plus runs (export/oracle/literals.py)
    error="RAISE_APPLICATION_ERROR({code}, {message});",
    error_with_argument="RAISE_APPLICATION_ERROR({code}, {message} || {argument});",
    error_codes={"length": "-20001", "nulls": "-20002", "nonfinite": "-20003", "index": "-20004"},
    length="{x}.COUNT",
    wrong_length="{x}.COUNT <> {size}",
    has_nulls="first_null({x}) IS NOT NULL",
    nonfinite=("first_nonfinite({x}) IS NOT NULL", "first_nonfinite({x})"),
    outside=("first_outside({x}, {bound}) IS NOT NULL", "first_outside({x}, {bound})"),
    weight="g_{node}_{role}_1",
    slice="slice({x}, {first}, {count})",
    binary={op: f"elementwise({{a}}, {{b}}, '{op}')" for op in ir.BINARY_OPS},
    zeros="zeros({n})",
    loop="FOR nn_t IN 0 .. {last} LOOP",
    loop_reverse="FOR nn_t IN REVERSE 0 .. {last} LOOP",
    element="{x}({index})",
    step="step_of({x}, nn_t, {features})",
    empty="UTL_NLA_ARRAY_FLT()",
    append="append_first({y}, {source}, {size});",
    # a parameter is read-only: a padded input is a variable of its own (see OracleGenerator.var)
    pad="{value} := padded({x}, {size}, {pad});",
    remainder="({a} - TRUNC({a} / {b}) * {b})",
)


# The functions users query beside predict, and what they return (export/ir/kinds.py says which answer).
FUNCTIONS = [
    ("predict_proba", "UTL_NLA_ARRAY_FLT"),
    ("predict_logits", "UTL_NLA_ARRAY_FLT"),
    ("score", "NUMBER"),
    ("label", "VARCHAR2"),
    ("labels", "nnsql_labels"),
]


class OracleGenerator(ProceduralGenerator):
    """PL/SQL: the shared statements, with products as UTL_NLA BLAS calls and activations as procedures
    that work in place; every statement has one of the regular forms the test interpreter reads."""

    dialect = PLSQL

    def __init__(self, graph: ir.Graph, name: str, version: int) -> None:
        super().__init__(graph, check_oracle_name(name), version)
        self.package = f"{name}_v{version}"
        self.padded = [spec.name for spec in graph.inputs if self.input_form(spec).pad is not None]

    def var(self, name: str) -> str:
        """Inputs keep their names, except those a shorter row is padded for: a parameter is read-only,
        so the padded values are a variable v_<input> of their own."""
        return f"v_{name}" if name in self.padded else super().var(name)

    def activated(self, y: str, activation: str) -> list[str]:
        return [] if activation == "linear" else [f"activate_{activation}({y});"]

    def emit_Dense(self, node: ir.Dense, x: str) -> list[str]:
        y = self.var(node.name)
        chunks = list(kernel_chunks(node))
        single = len(chunks) == 1
        lines = [] if single else [self.assign(y, f"zeros({node.units})")]
        for chunk in chunks:
            target = y if single else "v_chunk"
            if node.bias is not None:
                start = f"slice(g_{node.name}_bias_1, {chunk.first_unit + 1}, {chunk.units})"
            else:
                start = f"zeros({chunk.units})"
            lines.append(self.assign(target, start))
            lines.append(
                f"UTL_NLA.BLAS_GEMV(trans => 'N', m => {chunk.units}, n => {node.in_features}, "
                "alpha => 1.0f, "
                f"a => {chunk.variable}, lda => {chunk.units}, x => {x}, incx => 1, beta => 1.0f, "
                f"y => {target}, incy => 1, pack => 'C');"
            )
            if not single:
                lines.append(f"place({y}, v_chunk, {chunk.first_unit});")
        return lines + self.activated(y, node.activation)

    def emit_ActivationNode(self, node: ir.ActivationNode, x: str) -> list[str]:
        y = self.var(node.name)
        return [self.assign(y, x), *self.activated(y, node.activation)]

    def emit_PatchDense(self, node: ir.PatchDense, x: str) -> list[str]:
        """All windows (patches × size, row-major) times the kernel (size × units) in one BLAS_GEMM,
        onto the bias repeated per window; the result is position-major, as Keras lays it out."""
        y = self.var(node.name)
        if node.bias is not None:
            start = f"tile(g_{node.name}_bias_1, {node.patches})"
        else:
            start = f"zeros({node.patches * node.units})"
        gemm = (
            f"UTL_NLA.BLAS_GEMM(transa => 'N', transb => 'N', m => {node.patches}, n => {node.units}, "
            f"k => {node.size}, alpha => 1.0f, a => {x}, lda => {node.size}, b => g_{node.name}_kernel_1, "
            f"ldb => {node.units}, beta => 1.0f, c => {y}, ldc => {node.units}, pack => 'R');"
        )
        return [self.assign(y, start), gemm, *self.activated(y, node.activation)]

    def emit_Concatenate(self, node: ir.Concatenate, *parts: str) -> list[str]:
        """The parts placed one after the other into a vector of their total size."""
        y = self.var(node.name)
        lines = [self.assign(y, f"zeros({self.graph.size_of(node.name)})")]
        offset = 0
        for name, part in zip(node.inputs, parts, strict=True):
            lines.append(f"place({y}, {part}, {offset});")
            offset += self.graph.size_of(name)
        return lines

    def emit_Affine(self, node: ir.Affine, x: str) -> list[str]:
        y = self.var(node.name)
        lines = [self.assign(y, f"elementwise({x}, {self.weight(node, 'scale')}, 'mul')")]
        if node.shift is not None:
            lines.append(self.assign(y, f"elementwise({y}, {self.weight(node, 'shift')}, 'add')"))
        return lines

    def parameters(self, held: bool = False) -> list[str]:
        """Every input's parameter: flat, or with `held` one array per step (row) where it has steps."""
        return [
            f"{spec.name} IN {ROWS_TYPE if held and self.has_steps(spec) else 'UTL_NLA_ARRAY_FLT'}"
            for spec in self.graph.inputs
        ]

    @staticmethod
    def has_steps(spec: ir.TensorSpec) -> bool:
        """A sequence or an image: an input users may hold as one array per step (or row)."""
        return len(spec.shape) > 1

    def held(self) -> list[tuple[int, InputForm]]:
        """The inputs the nnsql_rows overloads take as rows, numbered as their helpers held_<n> are."""
        specs = [spec for spec in self.graph.inputs if self.has_steps(spec)]
        return [(number, self.input_form(spec)) for number, spec in enumerate(specs, start=1)]

    def held_context(self) -> dict[str, Any]:
        """What the nnsql_rows overloads need: their parameters, the flat arguments they pass on, and
        per held input the extents and the messages of its checks (export/codegen/inputs.py)."""
        held = self.held()
        numbers = {form.name: number for number, form in held}
        return {
            "parameter_forms": [", ".join(self.parameters())]
            + ([", ".join(self.parameters(held=True))] if held else []),
            "held_parameters": ", ".join(self.parameters(held=True)),
            "held_arguments": ", ".join(
                f"held_{numbers[spec.name]}({spec.name})" if spec.name in numbers else spec.name
                for spec in self.graph.inputs
            ),
            "held": [
                (
                    number,
                    form.name,
                    form.steps,
                    form.extent(2, 2),
                    "TRUE" if form.pad is not None else "FALSE",
                    literal(form.outer_length()),
                    literal(form.inner_length(2, 2)),
                )
                for number, form in held
            ],
        }

    def context(self) -> dict[str, Any]:
        chunks = list(stored_chunks(self.graph))
        context = super().context()
        context.update(
            package=self.package,
            name_literal=literal(self.name),
            parameters=", ".join(self.parameters()),
            parameter_list=[f"{spec.name} UTL_NLA_ARRAY_FLT" for spec in self.graph.inputs],
            argument_list=[spec.name for spec in self.graph.inputs],
            classes=", ".join(literal(label) for label in self.graph.classes),
            tensor_variables=[chunk.variable for chunk in chunks],
            loads=[(chunk.tensor, chunk.chunk, chunk.variable) for chunk in chunks],
            value_variables=[*map(self.var, self.padded), *self.values(), "v_chunk"],
            statements=self.statements(),
            output=self.var(self.graph.output),
            functions=FUNCTIONS,
            functions_all=[("predict", "UTL_NLA_ARRAY_FLT"), *FUNCTIONS],
            refusals={function: literal(text) for function, text in self.answering.refusals.items()},
            table_refusal=""
            if kinds.one_class_per_row(self.graph.kind)
            else literal(f"{self.name}.score_table: {kinds.refusal(self.name, self.graph.kind, 'score')}"),
            elementwise=[(name, activations.formula(name, "plsql", "z")) for name in self.elementwise()],
            **self.held_context(),
        )
        return context

    def elementwise(self) -> list[str]:
        """The activations of export/ir/activations.py this graph uses: each gets a procedure."""
        used = {getattr(node, "activation", None) for node in self.graph.all_nodes()}
        return [name for name in activations.FORMULAS if name in used]

    def render(self, template: str) -> str:
        return render_template(TEMPLATES, template, self.context())

    def version_package(self) -> str:
        """The version's package: the network, the functions users query, and what activating it later
        from SQL runs (check_stored, entry_ddl; plsql/check_stored.sql.j2)."""
        context = self.context()
        sizes = [int(np.prod(spec.shape)) for spec in self.graph.inputs]
        starts = np.cumsum([1, *sizes[:-1]])
        context.update(
            input_slices=[
                (f"nn_x{i}", int(start), size)
                for i, (start, size) in enumerate(zip(starts, sizes, strict=True))
            ],
            check_arguments=", ".join(f"nn_x{i}" for i in range(len(sizes))),
            stored_questions=parity.questions(self.graph.kind, several_outputs=bool(self.graph.outputs)),
            entry_spec=entry_literal(self.dispatch_spec()),
            entry_body=entry_literal(self.dispatch_body()),
        )
        return render_template(TEMPLATES, "version_package.sql.j2", context)

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
        float32=True,  # UTL_NLA_ARRAY_FLT values and BLAS on BINARY_FLOAT
    ),
    OracleGenerator,
)
