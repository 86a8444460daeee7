"""Which IR values a DuckDB macro binds to a name, and scalar SQL for one element of any value.

DuckDB binds nested lambdas in time exponential in their depth (measured with DuckDB 1.5: 12 nested
`list_transform([v], lambda x: ...)` bindings take ~10 ms to compile, 16 take ~60 ms, 20 take ~900 ms), so
a macro cannot bind every node's value in a lambda of its own. Instead:
  * elementwise nodes (Slice, Binary, elementwise activations, Concatenate, Reshape) are fused into their
    consumers as scalar expressions of an element index, and bound only where they must be: a value read
    by a node that loops over it (Dense, Scan, ...), read more than once, or the graph's output;
  * values that do not depend on each other share one binding: a struct per dependency level.
"""

from __future__ import annotations

from collections import Counter

from ..ir import activations
from ..ir import graph as ir
from . import convolution

FUSED_KINDS = ("Slice", "Binary", "ActivationNode", "Concatenate", "Reshape")
SCALAR_ACTIVATIONS = {
    "linear": "{z}",
    "relu": "greatest({z}, 0.0)",
    "sigmoid": "1.0 / (1.0 + exp(-({z})))",
    "tanh": "tanh({z})",
}
BINARY = {
    "add": "({a} + {b})",
    "sub": "({a} - {b})",
    "mul": "({a} * {b})",
    "max": "greatest({a}, {b})",
    "min": "least({a}, {b})",
}


def scalar_activation(activation: str, z: str) -> str:
    if activation in SCALAR_ACTIVATIONS:
        return SCALAR_ACTIVATIONS[activation].format(z=z)
    return activations.formula(activation, "sql", z)


def fusable(node: ir.Node) -> bool:
    if isinstance(node, ir.ActivationNode):
        return node.activation != "softmax"
    return node.kind in FUSED_KINDS


DUPLICATE_BELOW = 200  # characters: a value read twice is bound only when its element costs more


def bound_values(graph: ir.Graph, refs: dict[str, str]) -> list[str]:
    """The graph's nodes that get a name of their own, in graph order. A fused value read twice is
    written out twice when its element is a short expression (a binding costs more than that)."""
    readers: Counter[str] = Counter(name for node in graph.nodes for name in node.inputs)
    must: set[str] = {graph.output}
    for node in graph.nodes:
        if not fusable(node) or (
            isinstance(node, ir.ActivationNode) and node.activation not in SCALAR_ACTIVATIONS
        ):
            must.update(node.inputs)  # read in a loop, or by a formula that names its input twice
    folded = convolution.folded_windows(graph)
    for node in reversed(graph.nodes):  # a loop reading a reshape (or folded windows) reads its input
        if (isinstance(node, ir.Reshape) or node.name in folded) and node.name in must:
            must.add(node.inputs[0])
    bound: list[str] = []
    elements = Elements(graph, dict(refs))
    for node in graph.nodes:
        alias = isinstance(node, ir.Reshape) and node.name != graph.output
        if alias or node.name in folded:
            continue
        shared = (
            fusable(node) and readers[node.name] > 1 and len(elements.expand(node, "_nn_k")) > DUPLICATE_BELOW
        )
        if not fusable(node) or node.name in must or shared:
            bound.append(node.name)
            elements.refs[node.name] = node.name  # later expansions read it, as the macro will
    return bound


class Elements:
    """Scalar SQL for element `i` (an SQL integer expression, 0-based) of any value of a graph, given
    the SQL reference of each bound value and input."""

    def __init__(self, graph: ir.Graph, refs: dict[str, str], *, by_index: bool = False) -> None:
        self.graph = graph
        self.refs = refs
        self.nodes = {node.name: node for node in graph.nodes}
        self.by_index = by_index  # whole values as a lambda over their indices, never zipped slices

    def of(self, name: str, i: str) -> str:
        if name in self.refs:
            return f"{self.refs[name]}[{i} + 1]"
        return self.expand(self.nodes[name], i)

    def expand(self, node: ir.Node, i: str) -> str:
        """The node's own element, its inputs read through `of`."""
        if isinstance(node, ir.Slice):
            return self.of(node.inputs[0], f"{i} + {node.start}" if node.start else i)
        if isinstance(node, ir.Binary):
            a, b = (self.of(name, i) for name in node.inputs)
            return BINARY[node.op].format(a=a, b=b)
        if isinstance(node, ir.ActivationNode):
            return scalar_activation(node.activation, self.of(node.inputs[0], i))
        if isinstance(node, ir.Reshape):
            return self.of(node.inputs[0], i)
        assert isinstance(node, ir.Concatenate)
        branches, offset = [], 0
        for part in node.inputs:
            size = self.graph.size_of(part)
            shifted = f"{i} - {offset}" if offset else i
            branches.append(f"WHEN {i} < {offset + size} THEN {self.of(part, shifted)}")
            offset += size
        return f"CASE {' '.join(branches)} END"

    def list_of(self, node: ir.Node) -> str:
        """A fused node's whole value as a list."""
        if isinstance(node, ir.Concatenate) and all(part in self.refs for part in node.inputs):
            joined = self.refs[node.inputs[0]]
            for part in node.inputs[1:]:
                joined = f"list_concat({joined}, {self.refs[part]})"
            return joined
        if isinstance(node, ir.Reshape):
            return (
                self.refs[node.inputs[0]]
                if node.inputs[0] in self.refs
                else self.list_of(self.nodes[node.inputs[0]])
            )
        size = self.graph.size_of(node.name)
        zipped = None if self.by_index else self.zipped(node, size)
        if zipped is not None:
            return zipped
        return f"list_transform(range({size}), lambda _nn_k: {self.expand(node, '_nn_k')})"

    def zipped(self, node: ir.Node, size: int) -> str | None:
        """The value as a lambda over the zipped slices it reads, when every element reads its bound
        values at one fixed offset each (no Concatenate): a lambda over an index that reads bound lists
        would copy them at every element. None otherwise."""
        reads: dict[tuple[str, int], str] = {}
        element = self.offset_element(node, 0, reads)
        if element is None:
            return None
        slices = [
            self.refs[name]
            if (start, size) == (0, self.graph.size_of(name))
            else f"{self.refs[name]}[{start + 1}:{start + size}]"
            for name, start in reads
        ]
        if len(slices) == 1:
            return f"list_transform({slices[0]}, lambda _nn_z: {element.replace('_nn_z[1]', '_nn_z')})"
        return f"list_transform(list_zip({', '.join(slices)}), lambda _nn_z: {element})"

    def offset_element(
        self, node: ir.Node, start: int, reads: dict[tuple[str, int], str], field: str = "_nn_z[{}]"
    ) -> str | None:
        """The node's element read through zipped slices (`reads` maps each bound value and offset to
        its `field`, numbered from 1), or None where an element's reads depend on its index."""
        parts = []
        for source in node.inputs:
            offset = start + node.start if isinstance(node, ir.Slice) else start
            if source in self.refs:
                parts.append(reads.setdefault((source, offset), field.format(len(reads) + 1)))
                continue
            if isinstance(node, ir.Concatenate) or source not in self.nodes:
                return None
            part = self.offset_element(self.nodes[source], offset, reads, field)
            if part is None:
                return None
            parts.append(part)
        if isinstance(node, ir.Binary):
            return BINARY[node.op].format(a=parts[0], b=parts[1])
        if isinstance(node, ir.ActivationNode):
            return scalar_activation(node.activation, parts[0])
        if isinstance(node, ir.Concatenate):
            return None
        return parts[0]  # Slice, Reshape


def levels(graph: ir.Graph, bound: list[str], given: set[str]) -> list[list[str]]:
    """The bound values grouped so that each group reads only values of earlier groups or `given`."""
    nodes = {node.name: node for node in graph.nodes}
    level: dict[str, int] = {}

    def depth(name: str) -> int:  # the level at which `name` can be read
        if name in given or name not in nodes:
            return 0
        if name in level:
            return level[name]
        return max((depth(source) for source in nodes[name].inputs), default=0)

    for name in bound:
        level[name] = 1 + max((depth(source) for source in nodes[name].inputs), default=0)
    groups: list[list[str]] = [[] for _ in range(max(level.values(), default=0))]
    for name in bound:
        groups[level[name] - 1].append(name)
    return groups
