"""IR → PostgreSQL: a PL/pgSQL scoring function per model that calls the runtime in library.sql.

Each IR value becomes a float8[] variable; each node one assignment statement. Weights are read from
nnsql.tensors (real[]) at the start of each call. No extension and no superuser are needed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from export import ir
from export.postgres.plpython import PlPythonGenerator
from export.sqlformat import wrap_line
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


class PostgresGenerator:
    """Walks an IR graph; one `emit_<Kind>` method per supported node kind returns a statement."""

    def __init__(self, graph: ir.Graph, name: str, version: int, *, fast_path: bool = False) -> None:
        self.graph = graph
        self.name = name
        self.version = version
        self.fast_path = fast_path

    def emit_Dense(self, node: ir.Dense, x: str) -> str:
        bias = weight_variable(node, "bias") if node.bias is not None else "NULL"
        return (
            f"{self.var(node.name)} := nnsql.dense({x}, {weight_variable(node, 'kernel')}, {bias}, "
            f"{node.units}, {literal(node.activation)});"
        )

    def emit_Concatenate(self, node: ir.Concatenate, *parts: str) -> str:
        return f"{self.var(node.name)} := {' || '.join(parts)};"

    def emit_ActivationNode(self, node: ir.ActivationNode, x: str) -> str:
        return f"{self.var(node.name)} := nnsql.activate({x}, {literal(node.activation)});"

    def emit_Reshape(self, node: ir.Reshape, x: str) -> str:
        return f"{self.var(node.name)} := {x};  -- values are flat row-major arrays already"

    def statement(self, node: ir.Node) -> str:
        method = emitter(self, node, TARGET)
        return method(node, *(self.var(name) for name in node.inputs))

    def var(self, name: str) -> str:
        return value_variable(name, self.graph)

    def tensors(self) -> Iterator[tuple[str, str]]:
        for node in self.graph.nodes:
            for role, _ in node.weights():
                yield literal(f"{node.name}.{role}"), weight_variable(node, role)

    def variables(self) -> Iterator[str]:
        for node in self.graph.nodes:
            yield f"{self.var(node.name)} float8[]"
            for role, _ in node.weights():
                yield f"{weight_variable(node, role)} real[]"

    def checks(self) -> Iterator[str]:
        for spec in self.graph.inputs:
            errors = ir.InputErrors.of(self.name, spec)
            yield f"IF {spec.name} IS NULL THEN RETURN NULL; END IF;"
            yield (
                f"IF cardinality({spec.name}) <> {spec.size} THEN RAISE EXCEPTION "
                f"{literal(errors.length + '%')}, cardinality({spec.name}) "
                "USING ERRCODE = 'array_subscript_error'; END IF;"
            )
            yield (
                f"IF array_position({spec.name}, NULL) IS NOT NULL THEN RAISE EXCEPTION "
                f"{literal(errors.nulls)} USING ERRCODE = 'null_value_not_allowed'; END IF;"
            )

    def render(self) -> str:
        return template("model.sql.j2").render(  # type: ignore[attr-defined]
            name=self.name,
            name_literal=literal(self.name),
            version=self.version,
            sha256=self.graph.sha256(),
            parameters=", ".join(f"{spec.name} float8[]" for spec in self.graph.inputs),
            arguments=", ".join(spec.name for spec in self.graph.inputs),
            variables=list(self.variables()),
            checks=[wrap_line(check) for check in self.checks()],
            tensors=list(self.tensors()),
            # the PL/pgSQL body, or the PL/Python one on the fast path (which compiles more node kinds)
            statements=[] if self.fast_path else [wrap_line(self.statement(n)) for n in self.graph.nodes],
            output=self.var(self.graph.output),
            plpython_body=PlPythonGenerator(self.graph, self.name, self.version).body()
            if self.fast_path
            else "",
        )


def grant_script(name: str, role: str) -> str:
    return template("grant.sql.j2").render(name=name, role=role)  # type: ignore[attr-defined]


CAPABILITIES = register(Capabilities(target=TARGET, node_kinds=emitted_kinds(PostgresGenerator)))
