"""Each value of a graph bound once, in a pipeline of bindings whose depth Spark never walks.

Spark SQL has no `let` inside an expression. `transform(array(e), v -> body)[0]` binds e to v; nested
once per node, each node's binding sits in the lambda body of the one before. Spark computes the type
of `transform` from its lambda's body, and that of `[0]` from both the type and the nullability of
what it indexes: each level asks the level inside it twice, so typing the outermost binding costs
Spark time exponential in the number of nodes, when a query is planned and again each time the
interpreter evaluates `[0]` (24 nested bindings took 13 s of CPU to analyse, 32 over two minutes).

Here `GROUP` nodes at most are nested that way in one level; the values still needed after a level
travel in one struct that the next level's binding takes as its *argument*:

    transform(array(<the values after level k-1>), _env -> <level k's nodes> named_struct('v3', …))[0]

A lambda's body reads only its own variable, whose type Spark fixes once when it binds the lambda, and
`array(...)` is never NULL: each level's type is found from that level alone. Levels of one node each
would not do: Spark's analyser binds one chained level a pass and stops at 100 passes
(`spark.sql.analyzer.maxIterations`, a session's setting), and a LayerNormalization with nine dense
layers was refused. A single live value travels bare, without a struct.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..ir import graph as ir

Emit = Callable[[ir.Node, list[str]], str]
GROUP = 6  # nodes nested in one binding: Spark types them in 2^6 steps, and analyses a binding a pass


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
        for start in range(0, len(self.nodes), GROUP):
            level = self.level(self.nodes[start : start + GROUP], start, last, emit)
            state = passed(state, level, self.variable)
        final = result(self.reads())
        return state if final == self.variable and state is not None else passed(state, final, self.variable)

    def level(self, group: Sequence[ir.Node], start: int, last: dict[str, int], emit: Emit) -> str:
        """One binding: the group's nodes nested (few, so Spark types them quickly), then the values
        read after the group packed for the next binding."""
        reads, bindings = self.reads(), []
        for node in group:
            value = emit(node, [reads[name] for name in node.inputs])
            variable = f"{self.variable}_{self.field[node.name]}"
            bindings.append((value, variable))
            reads |= {name: variable for name, of in self.source.items() if of == node.name}
        end = start + len(group)
        kept = [name for name in [*self.carried, *(node.name for node in group)] if last.get(name, -1) >= end]
        body = self.packed(kept, reads)
        for value, variable in reversed(bindings):
            body = value if body == variable else f"transform(array({value}), {variable} -> {body})[0]"
        self.carried = kept
        return body
