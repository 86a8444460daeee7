"""The generator of the procedural targets (PL/pgSQL, Oracle PL/SQL, PL/Python): every IR value is a
variable and every node a few statements, written once here in the forms of the target's `Dialect`.

A target subclasses `ProceduralGenerator`, sets `dialect` and writes the products with stored tensors
(Dense, PatchDense) and whatever else it computes its own way (Oracle's BLAS calls, for instance). The
scan over time steps is shared: see ir.Scan for its rules.
"""

from __future__ import annotations

from ..ir import graph as ir
from ..target import emitter
from .generator import Generator


def indented(statements: list[str]) -> list[str]:
    """Statements one level deeper (a statement may hold several lines)."""
    return ["    " + line for statement in statements for line in statement.split("\n")]


class ProceduralGenerator(Generator):
    """Shared `emit_<Kind>` methods; each returns the node's statements."""

    def assign(self, y: str, value: str) -> str:
        return self.dialect.assign.format(y=y, value=value)

    def call(self, function: str, *arguments: object) -> str:
        return self.dialect.call.format(function=function, arguments=", ".join(map(str, arguments)))

    def weight(self, node: ir.Node, role: str) -> str:
        return self.dialect.weight.format(node=node.name, role=role)

    def statements(self, graph: ir.Graph | None = None) -> list[str]:
        """The statements of a graph's nodes, in order (the model's, or a scan's body)."""
        lines: list[str] = []
        for node in (graph or self.graph).nodes:
            method = emitter(self, node, self.dialect.target)
            lines += method(node, *(self.var(name) for name in node.inputs))
        return lines

    def emit_Reshape(self, node: ir.Reshape, x: str) -> list[str]:
        return [self.assign(self.var(node.name), x)]  # values are flat row-major arrays already

    def emit_Slice(self, node: ir.Slice, x: str) -> list[str]:
        return [self.assign(self.var(node.name), self.dialect.slice_of(x, node.start, node.stop))]

    def emit_Concatenate(self, node: ir.Concatenate, *parts: str) -> list[str]:
        assert self.dialect.concat is not None, "a dialect without concat overrides emit_Concatenate"
        form, separator = self.dialect.concat
        return [self.assign(self.var(node.name), form.format(parts=separator.join(parts)))]

    def emit_Binary(self, node: ir.Binary, a: str, b: str) -> list[str]:
        return [self.assign(self.var(node.name), self.dialect.binary[node.op].format(a=a, b=b))]

    def emit_Gather(self, node: ir.Gather, x: str) -> list[str]:
        return [self.assign(self.var(node.name), self.call("gather", x, self.weight(node, "indices")))]

    def emit_GroupMax(self, node: ir.GroupMax, x: str) -> list[str]:
        return [self.assign(self.var(node.name), self.call("group_max", x, node.size))]

    def emit_Lookup(self, node: ir.Lookup, x: str) -> list[str]:
        table = self.weight(node, "table")
        return [self.assign(self.var(node.name), self.call("lookup", x, table, node.width))]

    def emit_Affine(self, node: ir.Affine, x: str) -> list[str]:
        shift = self.weight(node, "shift") if node.shift is not None else self.dialect.null
        value = self.call("affine", x, self.weight(node, "scale"), shift)
        return [self.assign(self.var(node.name), value)]

    def emit_StepMask(self, node: ir.StepMask, x: str) -> list[str]:
        return [self.assign(self.var(node.name), self.call("step_mask", x, node.steps))]

    def emit_Scan(self, node: ir.Scan, x: str, mask: str | None = None) -> list[str]:
        """A loop over the steps running the body's statements; a masked step carries the state."""
        d, y, state = self.dialect, self.var(node.name), self.var(node.state_input)
        inner = [] if mask is None else [self.skip_masked(node, mask)]
        step = d.step.format(x=x, features=node.features)
        inner += [self.assign(self.var(node.step_input), step), *self.statements(node.body)]
        inner.append(self.assign(state, self.var(node.body.output)))
        if node.sequences:
            inner.append(self.appended(node, state))
        lines = [self.assign(state, d.zeros.format(n=node.state_size))]
        if node.sequences:
            lines.append(self.assign(y, d.empty))
        lines.append(
            (d.loop_reverse if node.reverse else d.loop).format(last=node.steps - 1, steps=node.steps)
        )
        lines += indented(inner)
        lines += [] if d.end_loop is None else [d.end_loop]
        if node.sequences and d.finish_sequences is not None:
            lines.append(d.finish_sequences.format(y=y))
        if not node.sequences:
            lines.append(self.assign(y, d.slice_of(state, 0, node.output_size)))
        return lines

    def skip_masked(self, node: ir.Scan, mask: str) -> str:
        """On a masked step: the output (zeros, or the carried state) if sequences are kept, then skip."""
        d = self.dialect
        masked = d.masked.format(value=d.element.format(x=mask, index=d.subscript("nn_t")))
        carry = (
            [self.appended(node, self.var(node.state_input), zero=node.zero_masked)] if node.sequences else []
        )
        return self.if_then(masked, [*carry, d.skip])

    def appended(self, node: ir.Scan, state: str, *, zero: bool = False) -> str:
        """The step's output (the state's first values, or zeros) after the scan's outputs so far."""
        d, size = self.dialect, node.output_size
        source = d.zeros.format(n=size) if zero else state
        part = source if zero else d.slice_of(state, 0, size)
        return d.append.format(y=self.var(node.name), part=part, source=source, size=size)

    def values(self) -> list[str]:
        """Every variable the statements assign: the scans' step and state, then each node's value."""
        scan_inputs = [spec for spec in self.graph.all_inputs() if spec not in self.graph.inputs]
        return [self.var(spec.name) for spec in scan_inputs] + [
            self.var(node.name) for node in self.graph.all_nodes()
        ]
