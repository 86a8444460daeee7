"""Target-neutral intermediate representation (IR) of a classifier.

The Keras front end produces a `Graph`; every target generator consumes one. Nothing here imports
Keras or knows any SQL. Nodes are frozen dataclasses with value equality, listed in topological order;
each node reads named values (graph inputs or earlier nodes) and produces one value named after itself.

Tensor shapes never include the batch dimension. A sequence input has shape (steps, features);
a recurrent layer becomes a `Scan` whose body is itself a small graph of the same primitives.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field, fields

import numpy as np
import numpy.typing as npt

Activation = str  # one of ACTIVATIONS
# Elementwise activations beyond the first five are written once in export/ir/activations.py for every target.
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
    "gelu",
    "gelu_tanh",
    "log_sigmoid",
    "rsqrt",
    "ln",
    "step",
    "count_reciprocal",
)
ACTIVATIONS: tuple[str, ...] = ("linear", "relu", "sigmoid", "tanh", "softmax", *ELEMENTWISE)
# Made by lowerings (LayerNormalization, log_softmax, ReLU's threshold, masked average pooling), never
# read from a Keras layer.
INTERNAL_ACTIVATIONS = ("rsqrt", "ln", "step", "count_reciprocal")
# What an output means (export/ir/kinds.py says which functions each kind offers and how Keras users read it).
OUTPUT_KINDS: tuple[str, ...] = ("probabilities", "binary", "multilabel", "logits", "values")


@dataclass(frozen=True, eq=False)
class Weights:
    """A constant tensor: `array` in float32, what float32 targets (ONNX, Oracle's BINARY_FLOAT) compute
    with, and `float64`, what DuckDB, Spark and PostgreSQL (every kernel) compute with. A Keras weight is
    float32, so both are the same numbers; a value the front end or a fold derives in float64 (a
    Normalization's 1/sqrt(variance), W1·W2 of a folded chain) keeps its float64 digits in `wide`, as
    Keras run in float64 (the parity gate's reference at raw scale) computes it: rounded to float32 it is
    2^-24 of itself off, 1e-5 on a probability after inputs of 1e4 (docs/numerics.md). Compared by value;
    hashed by content."""

    array: np.ndarray
    wide: np.ndarray | None = None  # the float64 values where float32 rounds them; None: `array` is exact

    def __post_init__(self) -> None:
        given = np.asarray(self.array)
        frozen = np.ascontiguousarray(given, dtype=np.float32)
        frozen.setflags(write=False)
        object.__setattr__(self, "array", frozen)
        wide = self.wide
        if wide is None and given.dtype.kind == "f" and given.dtype.itemsize > 4:
            wide = given
        if wide is not None:
            wide = np.array(wide, dtype=np.float64, order="C").reshape(frozen.shape)  # a copy: frozen
            if np.array_equal(wide, frozen, equal_nan=True):
                wide = None
            else:
                wide.setflags(write=False)
        object.__setattr__(self, "wide", wide)

    @property
    def float64(self) -> npt.NDArray[np.float64]:
        """The values in float64: the derived float64 digits where there are some, else `array`'s."""
        return self.array.astype(np.float64) if self.wide is None else self.wide

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.array.shape)

    @property
    def size(self) -> int:
        return int(self.array.size)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Weights)
            and np.array_equal(self.array, other.array)
            and (self.wide is None) == (other.wide is None)
            and np.array_equal(self.float64, other.float64, equal_nan=True)
        )

    def __hash__(self) -> int:
        return hash(self.array.tobytes())


@dataclass(frozen=True)
class TensorSpec:
    """A named graph input or output; `shape` excludes the batch dimension."""

    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"  # or "int32": token indices, read by Lookup nodes only
    bound: int | None = None  # an int32 input's values are whole numbers in [0, bound)

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
class Slice(Node):
    """y = x[start:stop] of the flat value."""

    start: int
    stop: int


@dataclass(frozen=True, kw_only=True)
class Affine(Node):
    """y[i] = x[i]·scale[i] + shift[i]: constant vectors of the value's size (a normalisation, a slope)."""

    scale: Weights
    shift: Weights | None = None


@dataclass(frozen=True, kw_only=True)
class Lookup(Node):
    """y = table[x[0]] ++ table[x[1]] ++ ...: the rows an integer input selects (Keras's Embedding)."""

    table: Weights  # (rows, width)

    @property
    def width(self) -> int:
        return self.table.shape[1]


BINARY_OPS = ("add", "sub", "mul", "max", "min")


@dataclass(frozen=True, kw_only=True)
class Binary(Node):
    """y[i] = a[i] op b[i] for two values of one size; op is one of BINARY_OPS."""

    op: str


@dataclass(frozen=True, kw_only=True)
class StepMask(Node):
    """y[t] = 1 when some feature of step t of a (steps, features) sequence differs from 0, else 0:
    Keras's Masking(mask_value=0), as a value of its own that flows to the layers that consume it."""

    steps: int


@dataclass(frozen=True, kw_only=True)
class Recurrent(Node):
    """A Keras recurrent layer as the front end reads it; export/ir/lowering.py rewrites it into a Scan.

    cell: "gru" (reset_after=True), "gru_v1" (reset_after=False), "lstm" or "simple". Kernels and bias
    keep Keras's shapes and gate order. inputs: (sequence,) or (sequence, step mask).
    """

    cell: str
    kernel: Weights
    recurrent_kernel: Weights
    bias: Weights | None = None
    activation: Activation = "tanh"
    recurrent_activation: Activation = "sigmoid"
    steps: int
    go_backwards: bool = False
    return_sequences: bool = False
    zero_masked: bool = False  # a masked step outputs zeros (Keras's zero_output_for_mask), else the carry

    @property
    def units(self) -> int:
        return self.recurrent_kernel.shape[0]

    @property
    def features(self) -> int:
        return self.kernel.shape[0]


@dataclass(frozen=True, kw_only=True)
class Scan(Node):
    """A loop over the time steps of inputs[0], a (steps, features) sequence stored flat.

    `body` is a graph of primitives with two inputs, the step's features and the state (zeros before the
    first step), whose output is the next state. With a step mask (inputs[1]), a masked step leaves the
    state unchanged. The scan's value is the first `output_size` values of the last state or, with
    `sequences`, of every step's state one after the other (in the order the steps ran; a masked step
    gives the carried values, or zeros with `zero_masked`). `reverse` runs the steps last to first.
    """

    body: Graph
    steps: int
    output_size: int
    reverse: bool = False
    sequences: bool = False
    zero_masked: bool = False

    @property
    def step_input(self) -> str:
        return self.body.inputs[0].name

    @property
    def state_input(self) -> str:
        return self.body.inputs[1].name

    @property
    def features(self) -> int:
        return self.body.inputs[0].size

    @property
    def state_size(self) -> int:
        return self.body.inputs[1].size

    @property
    def masked(self) -> bool:
        return len(self.inputs) > 1


@dataclass(frozen=True)
class OutputSpec:
    """One output of a model with several: its name (an identifier), its values in the joined output and
    what they mean (one of OUTPUT_KINDS)."""

    name: str
    start: int
    stop: int
    kind: str = "probabilities"


@dataclass(frozen=True)
class Graph:
    """A model: inputs, nodes in topological order, one output value and what it means (`kind`, one of
    OUTPUT_KINDS), class labels. A model with several outputs has them joined into `output` (flat, one
    after the other) and described by `outputs`; `kind` and `classes` are the first output's."""

    inputs: tuple[TensorSpec, ...]
    nodes: tuple[Node, ...]
    output: str
    classes: tuple[str, ...] = ()
    outputs: tuple[OutputSpec, ...] = ()  # empty: one output, all of `output`
    kind: str = "probabilities"

    def __post_init__(self) -> None:
        if self.kind not in OUTPUT_KINDS:
            raise ValueError(f"unknown output kind {self.kind!r}; one of {', '.join(OUTPUT_KINDS)}")
        if self.outputs and self.outputs[0].kind != self.kind:
            first = self.outputs[0].kind
            raise ValueError(f"the graph's kind {self.kind!r} is not its first output's {first!r}")

    def all_nodes(self) -> Iterator[Node]:
        """Every node, the nodes of each Scan's body right after the Scan."""
        for node in self.nodes:
            yield node
            if isinstance(node, Scan):
                yield from node.body.all_nodes()

    def all_inputs(self) -> Iterator[TensorSpec]:
        """The graph's inputs and those of every Scan body (a step's features, the state)."""
        yield from self.inputs
        for node in self.nodes:
            if isinstance(node, Scan):
                yield from node.body.all_inputs()

    def node(self, name: str) -> Node:
        for node in self.all_nodes():
            if node.name == name:
                return node
        raise KeyError(name)

    def size_of(self, name: str) -> int:
        """How many values the flat value `name` holds (an input, or a node's result), in scan bodies too."""
        for spec in self.all_inputs():
            if spec.name == name:
                return spec.size
        node = self.node(name)
        if isinstance(node, Recurrent):
            return node.units * (node.steps if node.return_sequences else 1)
        if isinstance(node, Dense):
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
        if isinstance(node, Slice):
            return node.stop - node.start
        if isinstance(node, Lookup):
            return self.size_of(node.inputs[0]) * node.width
        if isinstance(node, StepMask):
            return node.steps
        if isinstance(node, Scan):
            return node.output_size * (node.steps if node.sequences else 1)
        return self.size_of(node.inputs[0])  # elementwise: an activation keeps the size

    def named_weights(self) -> Iterator[tuple[str, Weights]]:
        """Every constant tensor as ('<node>.<role>', weights), in graph order."""
        for node in self.all_nodes():
            for role, value in node.weights():
                yield f"{node.name}.{role}", value

    def sha256(self) -> str:
        """Digest of the structure and all weights: identifies a model version."""
        digest = hashlib.sha256()
        for spec in self.inputs:
            digest.update(repr(spec).encode())
        for node in self.all_nodes():  # a Scan's body is hashed node by node, right after it
            digest.update(repr((node.kind, node.name, node.inputs)).encode())
            for f in fields(node):
                value = getattr(node, f.name)
                if isinstance(value, Graph):
                    digest.update(repr((value.inputs, value.output)).encode())
                elif isinstance(value, Weights):
                    digest.update(repr(value.shape).encode())
                    digest.update(value.array.tobytes())
                    if value.wide is not None:  # float64 targets store these digits
                        digest.update(value.wide.tobytes())
                elif f.name not in ("name", "inputs", "source"):
                    digest.update(repr(value).encode())
        if self.outputs:
            digest.update(repr(self.outputs).encode())
        if self.kind != "probabilities":  # the kind changes the generated functions; digests of before stay
            digest.update(self.kind.encode())
        return digest.hexdigest()

    @property
    def first_size(self) -> int:
        """How many values the first output holds (all of `output` for a model with one)."""
        return self.outputs[0].stop if self.outputs else self.size_of(self.output)

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    def text(self, indent: str = "") -> str:
        """A readable listing (one line per value; weights as shapes), for golden files and debugging."""
        lines = [f"{indent}input {spec.name} {spec.shape}" for spec in self.inputs]
        for node in self.nodes:
            lines.append(
                f"{indent}{node.name} = {node.kind}({', '.join(node.inputs)}){describe_fields(node)}"
            )
            if isinstance(node, Scan):
                lines.append(node.body.text(indent + "    "))
        lines.append(f"{indent}output {self.output}")
        return "\n".join(lines)


def describe_fields(node: Node) -> str:
    parts = []
    for f in fields(node):
        value = getattr(node, f.name)
        if f.name in ("name", "inputs", "source", "body") or value is None:
            continue
        parts.append(f"{f.name} {value.shape}" if isinstance(value, Weights) else f"{f.name}={value!r}")
    return " " + " ".join(parts) if parts else ""


# The largest float32. Inputs are float32 in Keras and ONNX: every target refuses a value beyond it (as it
# refuses NaN and infinity) instead of computing with a number the model's input type cannot hold.
FLOAT32_MAX = 3.4028234663852886e38


@dataclass(frozen=True)
class InputErrors:
    """The messages every target raises for a bad input row, worded once so that all targets agree."""

    length: str  # followed by the received length
    nulls: str
    nonfinite: str  # followed by the 0-based index of the first NaN, infinite or beyond-float32 value
    dimensions: str  # an array of arrays where a flat array is needed
    index: str  # an int32 input: followed by the 0-based position of a value outside [0, bound)
    type: str  # where arguments are untyped (DuckDB macros): followed by the type received

    @classmethod
    def of(cls, model: str, spec: TensorSpec) -> InputErrors:
        where = f"{model}: {spec.name}"
        return cls(
            length=f"{where} must have {spec.size} values, got ",
            nulls=f"{where} contains NULL values",
            nonfinite=f"{where} holds NaN, infinity or a value beyond the float32 range at 0-based index ",
            dimensions=f"{where} must be a one-dimensional array",
            index=f"{where} must hold whole numbers from 0 to {(spec.bound or 1) - 1}; not at 0-based index ",
            type=f"{where} must be a list of numbers, got ",
        )
