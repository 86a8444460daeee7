"""Each value of a graph bound once, in a pipeline of bindings whose depth Spark never walks.

Spark SQL has no `let` inside an expression. `transform(array(e), v -> body)[0]` binds e to v; nested
once per node, each node's binding sits in the lambda body of the one before. Spark computes the type
of `transform` from its lambda's body, and that of `[0]` from both the type and the nullability of
what it indexes: each level asks the level inside it twice, so typing the outermost binding costs
Spark time exponential in the number of nodes, when a query is planned and again each time the
interpreter evaluates `[0]` (24 nested bindings took 13 s of CPU to analyse, 32 over two minutes).

Here the values still needed after a node travel in one struct that the next binding takes as its
*argument*:

    transform(array(<the values after node k-1>), _env -> named_struct('v3', _env.v3, 'v4', <node k>))[0]

A lambda's body reads only its own variable, whose type Spark fixes once when it binds the lambda, and
`array(...)` is never NULL: each level's type is found from that level alone, whatever the number of
nodes. A single live value travels bare, without a struct.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..ir import graph as ir

Emit = Callable[[ir.Node, list[str]], str]


def sources(graph: ir.Graph) -> dict[str, str]:
    """Each value's name → the value it is: a Reshape of a flat array is the array itself."""
    source: dict[str, str] = {}
    for node in graph.nodes:
        name = node.inputs[0] if isinstance(node, ir.Reshape) else node.name
        source[node.name] = source.get(name, name)
    return source


def needed(graph: ir.Graph, source: dict[str, str]) -> list[ir.Node]:
    """The nodes that compute a value the output depends on, in order (a Reshape is no node here)."""
    wanted = {source.get(graph.output, graph.output)}
    for node in reversed(graph.nodes):
        if node.name in wanted and source[node.name] == node.name:
            wanted |= {source.get(name, name) for name in node.inputs}
    return [node for node in graph.nodes if source[node.name] == node.name and node.name in wanted]


def last_uses(nodes: Sequence[ir.Node], source: dict[str, str], output: str) -> dict[str, int]:
    """Each node's value → the position of the last node that reads it (the output: past the end)."""
    last = {source.get(name, name): i for i, node in enumerate(nodes) for name in node.inputs}
    last[source.get(output, output)] = len(nodes)
    return last


def passed(state: str | None, body: str, variable: str) -> str:
    """`body` with `variable` bound to the value of `state` (no binding before the first node)."""
    return body if state is None else f"transform(array({state}), {variable} -> {body})[0]"


class Pipeline:
    """One graph's values bound in order; `refs` gives the SQL of its inputs."""

    def __init__(self, graph: ir.Graph, refs: dict[str, str], variable: str) -> None:
        self.graph, self.refs, self.variable = graph, refs, variable
        self.source = sources(graph)
        self.nodes = needed(graph, self.source)
        self.field = {node.name: f"v{i}" for i, node in enumerate(self.nodes)}
        self.carried: list[str] = []

    def reads(self) -> dict[str, str]:
        """The SQL of every value readable inside the current binding: inputs, and what it carries."""
        if len(self.carried) == 1:
            inner = {self.carried[0]: self.variable}
        else:
            inner = {name: f"{self.variable}.{self.field[name]}" for name in self.carried}
        values = {**self.refs, **inner}
        return {name: values[of] for name, of in {**self.identity(), **self.source}.items() if of in values}

    def identity(self) -> dict[str, str]:
        return {name: name for name in self.refs}

    def packed(self, kept: list[str], values: dict[str, str]) -> str:
        if len(kept) == 1:
            return values[kept[0]]
        return "named_struct(" + ", ".join(f"'{self.field[name]}', {values[name]}" for name in kept) + ")"

    def bound(self, emit: Emit, result: Callable[[dict[str, str]], str]) -> str:
        """`result` of the values, each node's value (`emit(node, inputs)`) computed once."""
        last = last_uses(self.nodes, self.source, self.graph.output)
        state: str | None = None
        for i, node in enumerate(self.nodes):
            reads = self.reads()
            value = emit(node, [reads[name] for name in node.inputs])
            kept = [name for name in [*self.carried, node.name] if last.get(name, -1) > i]
            state = passed(state, self.packed(kept, {**reads, node.name: value}), self.variable)
            self.carried = kept
        final = result(self.reads())
        return state if final == self.variable and state is not None else passed(state, final, self.variable)
