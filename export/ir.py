"""Target-neutral intermediate representation (IR) of a classifier.

The Keras front end produces a `Graph`; every target generator consumes one. Nothing here imports
Keras or knows any SQL. Nodes are frozen dataclasses with value equality, listed in topological order;
each node reads named values (graph inputs or earlier nodes) and produces one value named after itself.

Tensor shapes never include the batch dimension. A sequence input has shape (steps, features);
recurrent nodes and masks are planned to fit as further node kinds reading such values.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field, fields

import numpy as np

Activation = str  # one of ACTIVATIONS
# Elementwise activations beyond the first five are written once in export/activations.py for every target.
ELEMENTWISE: tuple[str, ...] = (
    "elu",
    "selu",
    "softplus",
    "softsign",
    "silu",
    "hard_sigmoid",
    "hard_sigmoid_keras2",
    "hard_silu",
    "exponential",
    "relu6",
    "leaky_relu",
    "mish",
)
ACTIVATIONS: tuple[str, ...] = ("linear", "relu", "sigmoid", "tanh", "softmax", *ELEMENTWISE)


@dataclass(frozen=True, eq=False)
class Weights:
    """A constant tensor (float32). Compared by value; hashed by content."""

    array: np.ndarray

    def __post_init__(self) -> None:
        frozen = np.ascontiguousarray(self.array, dtype=np.float32)
        frozen.setflags(write=False)
        object.__setattr__(self, "array", frozen)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.array.shape)

    @property
    def size(self) -> int:
        return int(self.array.size)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Weights) and np.array_equal(self.array, other.array)

    def __hash__(self) -> int:
        return hash(self.array.tobytes())


@dataclass(frozen=True)
class TensorSpec:
    """A named graph input or output; `shape` excludes the batch dimension."""

    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"

    @property
    def size(self) -> int:
        return int(np.prod(self.shape)) if self.shape else 1


@dataclass(frozen=True, kw_only=True)
class Node:
    """Base of all IR nodes. `source` names the Keras layer for error messages."""

    name: str
    inputs: tuple[str, ...]
    source: str = field(default="", compare=False)

    @property
    def kind(self) -> str:
        return type(self).__name__

    def weights(self) -> Iterator[tuple[str, Weights]]:
        """The node's constant tensors as (role, weights) pairs, in declaration order."""
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Weights):
                yield f.name, value


@dataclass(frozen=True, kw_only=True)
class Dense(Node):
    """y = activation(x · kernel + bias); kernel has shape (in, out) as in Keras."""

    kernel: Weights
    bias: Weights | None = None
    activation: Activation = "linear"

    @property
    def in_features(self) -> int:
        return self.kernel.shape[0]

    @property
    def units(self) -> int:
        return self.kernel.shape[1]


@dataclass(frozen=True, kw_only=True)
class ActivationNode(Node):
    """Elementwise activation, or softmax over the last axis."""

    activation: Activation


@dataclass(frozen=True, kw_only=True)
class Reshape(Node):
    """Reinterpret the value in row-major order with a new shape (Flatten is Reshape to (n,))."""

    shape: tuple[int, ...]


@dataclass(frozen=True, kw_only=True)
class Gather(Node):
    """y[k] = x[indices[k]] over the flat row, 0 where an index is -1 (padding): the windows of a
    convolution (im2col) or of a pooling, laid out one after the other."""

    indices: Weights  # whole numbers, stored like any constant


@dataclass(frozen=True, kw_only=True)
class PatchDense(Node):
    """One Dense applied to each of `patches` consecutive slices of the flat row (a convolution after
    Gather): y[p·units + u] = activation(x[p·size : (p+1)·size] · kernel[:, u] + bias[u])."""

    kernel: Weights  # (patch size, units)
    bias: Weights | None = None
    activation: Activation = "linear"
    patches: int

    @property
    def size(self) -> int:
        return self.kernel.shape[0]

    @property
    def in_features(self) -> int:  # a Dense's name for the same thing: what one window holds
        return self.size

    @property
    def units(self) -> int:
        return self.kernel.shape[1]


@dataclass(frozen=True, kw_only=True)
class GroupMax(Node):
    """y[k] = max(x[k·size : (k+1)·size]): max pooling over windows laid out by Gather."""

    size: int


@dataclass(frozen=True, kw_only=True)
class Concatenate(Node):
    """Flat vectors joined end to end (Keras Concatenate over the last axis of rank-2 inputs)."""


@dataclass(frozen=True, kw_only=True)
class GRU(Node):
    """A GRU over a (steps, features) sequence returning its last state (Keras, reset_after=True).

    kernel (features, 3·units) and recurrent_kernel (units, 3·units) hold the gates in Keras's order
    [update z, reset r, candidate h]; bias (2, 3·units) is the input bias row then the recurrent bias row.
    With `mask_value` set, a time step whose features all equal it is skipped (the state carries over).
    """

    kernel: Weights
    recurrent_kernel: Weights
    bias: Weights | None = None
    steps: int
    mask_value: float | None = None

    @property
    def units(self) -> int:
        return self.recurrent_kernel.shape[0]

    @property
    def features(self) -> int:
        return self.kernel.shape[0]


@dataclass(frozen=True)
class Graph:
    """A classifier: inputs, nodes in topological order, one probability output, class labels."""

    inputs: tuple[TensorSpec, ...]
    nodes: tuple[Node, ...]
    output: str
    classes: tuple[str, ...] = ()

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def size_of(self, name: str) -> int:
        """How many values the flat value `name` holds (an input, or a node's result)."""
        for spec in self.inputs:
            if spec.name == name:
                return spec.size
        node = self.node(name)
        if isinstance(node, Dense | GRU):
            return node.units
        if isinstance(node, Reshape):
            return int(np.prod(node.shape))
        if isinstance(node, Concatenate):
            return sum(self.size_of(part) for part in node.inputs)
        if isinstance(node, Gather):
            return node.indices.size
        if isinstance(node, PatchDense):
            return node.patches * node.units
        if isinstance(node, GroupMax):
            return self.size_of(node.inputs[0]) // node.size
        return self.size_of(node.inputs[0])  # elementwise: an activation keeps the size

    def named_weights(self) -> Iterator[tuple[str, Weights]]:
        """Every constant tensor as ('<node>.<role>', weights), in graph order."""
        for node in self.nodes:
            for role, value in node.weights():
                yield f"{node.name}.{role}", value

    def sha256(self) -> str:
        """Digest of the structure and all weights: identifies a model version."""
        digest = hashlib.sha256()
        for spec in self.inputs:
            digest.update(repr(spec).encode())
        for node in self.nodes:
            digest.update(repr((node.kind, node.name, node.inputs)).encode())
            for f in fields(node):
                value = getattr(node, f.name)
                if isinstance(value, Weights):
                    digest.update(repr(value.shape).encode())
                    digest.update(value.array.tobytes())
                elif f.name not in ("name", "inputs", "source"):
                    digest.update(repr(value).encode())
        return digest.hexdigest()

    @property
    def n_classes(self) -> int:
        return len(self.classes)


@dataclass(frozen=True)
class InputErrors:
    """The messages every target raises for a bad input row, worded once so that all targets agree."""

    length: str  # followed by the received length
    nulls: str
    nonfinite: str  # followed by the 0-based index of the first NaN or infinite value
    dimensions: str  # an array of arrays where a flat array is needed

    @classmethod
    def of(cls, model: str, spec: TensorSpec) -> InputErrors:
        where = f"{model}.predict_proba: {spec.name}"
        return cls(
            length=f"{where} must have {spec.size} values, got ",
            nulls=f"{where} contains NULL values",
            nonfinite=f"{where} holds NaN or infinity at 0-based index ",
            dimensions=f"{where} must be a one-dimensional array",
        )
