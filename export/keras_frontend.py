"""Keras front end: a trained Keras model → the target-neutral IR.

Layer classes map to IR nodes through `CONVERTERS`; a layer without a converter, or with an option the IR
cannot express, raises `UnsupportedLayer` naming the layer and the target being compiled for. This module
knows nothing about SQL or any target.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from export import ir
from export.errors import ExportError, UnsupportedLayer
from export.frontend_outputs import output_kinds
from export.kinds import check_classes
from export.lowering import grouped_softmax, lower
from export.model_code import LEGACY_TF_ACTIVATIONS, legacy_tf_activations, refuse_code
from export.model_file import ModelFile, first_line, read_model_file
from export.model_limits import DEFAULT_LIMITS, Limits, check_sizes, tf_keras_config
from export.names import SQL_KEYWORDS
from export.passes import fold_linear_chains

# A converter returns an IR node (or several, the last one being the layer's value), the name of an
# existing value when the layer is an identity, or `Outputs` for a layer with several outputs.
Converter = Callable[[Any, tuple[str, ...], "Context"], "ir.Node | tuple[ir.Node, ...] | str | Outputs"]
CONVERTERS: dict[str, Converter] = {}
# The IR node kind each Keras layer becomes ("identity" when it vanishes at inference).
PRODUCES: dict[str, str] = {}
# The options of a layer that its converter refuses, in words, for the support table.
REFUSES: dict[str, str] = {}


def converts(*class_names: str, produces: str, refuses: str = "") -> Callable[[Converter], Converter]:
    def register(function: Converter) -> Converter:
        for class_name in class_names:
            CONVERTERS[class_name] = function
            PRODUCES[class_name] = produces
            if refuses:
                REFUSES[class_name] = refuses
        return function

    return register


@dataclass(frozen=True)
class Outputs:
    """What a layer with several outputs (a list of tensors) converts to: its nodes, and the value of each
    output in Keras's order."""

    nodes: tuple[ir.Node, ...]
    values: tuple[str, ...]


@dataclass
class Context:
    target: str
    names: dict[str, str]
    masks: dict[str, str] = field(default_factory=dict)  # value name → the name of its step mask
    calls: dict[int, int] = field(default_factory=dict)  # id(layer) → times applied so far
    arguments: dict[str, Any] = field(default_factory=dict)  # the keyword arguments of the current call
    tensors: list[Any] = field(default_factory=list)  # the tensors the current call reads, in order

    def unsupported(self, layer: Any, detail: str = "") -> UnsupportedLayer:
        return UnsupportedLayer(describe(layer), self.target, detail)

    def name_for(self, keras_name: str) -> str:
        """A unique lower-case identifier for a Keras layer or input name."""
        if keras_name not in self.names:
            base = re.sub(r"[^a-z0-9_]", "_", keras_name.lower()).strip("_") or "value"
            if not base[0].isalpha():
                base = f"v_{base}"
            if base in SQL_KEYWORDS:  # a layer named 'from' or 'end' becomes 'from_layer'
                base = f"{base}_layer"
            candidate, n = base, 1
            while candidate in self.names.values():
                n += 1
                candidate = f"{base}_{n}"
            self.names[keras_name] = candidate
        return self.names[keras_name]

    def node_name(self, layer: Any) -> str:
        """The IR name of this application of `layer`: a layer applied twice (shared) gives two nodes."""
        call = self.calls.get(id(layer), 1)
        return self.name_for(layer.name if call == 1 else f"{layer.name}_call{call}")

    def applying(self, layer: Any) -> None:
        self.calls[id(layer)] = self.calls.get(id(layer), 0) + 1


def describe(layer: Any) -> str:
    return f"'{layer.name}' ({type(layer).__name__})"


# Keras names that are aliases of an IR activation, with the names a layer built with a TensorFlow
# function (activation=tf.nn.log_softmax, tf.math.exp, ...) is saved under: the function's own name.
# tf.keras's hard_sigmoid is another function.
ALIASES = {
    "swish": "silu",
    "hard_swish": "hard_silu",
    "log_softmax_v2": "log_softmax",  # tf.nn.log_softmax
    "softmax_v2": "softmax",  # tf.nn.softmax
    "exp": "exponential",  # tf.math.exp, tf.exp
}
LEGACY_ALIASES = {**ALIASES, "hard_sigmoid": "hard_sigmoid_keras2"}


# Activations over a vector that the front end builds from primitives (lowering.grouped_softmax).
LOWERED_ACTIVATIONS = ("log_softmax",)


def activation_name(
    layer: Any, ctx: Context, key: str = "activation", *, lowered: tuple[str, ...] = ()
) -> ir.Activation:
    """The IR activation of a layer's `activation` (or other `key`), read as the Keras that wrote the layer
    means it; names in `lowered` are returned for the caller to build from primitives."""
    name = layer.get_config().get(key, "linear")
    if isinstance(name, dict):  # tf.keras may serialise {'class_name': 'function', 'config': 'elu'}
        name = name.get("config", name)
    legacy = type(layer).__module__.startswith("tf_keras")
    if isinstance(name, str):
        name = (LEGACY_ALIASES if legacy else ALIASES).get(name, name)
    if name in lowered:
        return str(name)
    if not isinstance(name, str) or name not in ir.ACTIVATIONS or name in ir.INTERNAL_ACTIVATIONS:
        raise ctx.unsupported(layer, f"activation {name!r}")
    return name


@converts("Dense", produces="Dense+PatchDense")
def _dense(layer: Any, inputs: tuple[str, ...], ctx: Context) -> ir.Node | tuple[ir.Node, ...]:
    """A Dense; over a sequence (steps, features), one Dense per step: a PatchDense over the steps, which
    passes the sequence's mask on as Keras does."""
    rank = len(layer.input.shape)
    if rank == 3:
        return per_step_dense(layer, layer, inputs, ctx)
    kernel = ir.Weights(np.asarray(layer.kernel.numpy()))
    bias = ir.Weights(np.asarray(layer.bias.numpy())) if uses_bias(layer) else None
    if rank != 2:
        raise ctx.unsupported(layer, f"Dense over a rank-{rank} input")
    name, activation = ctx.node_name(layer), activation_name(layer, ctx, lowered=LOWERED_ACTIVATIONS)
    if activation == "log_softmax":  # the logits, then log_softmax from primitives
        logits = ir.Dense(
            name=ctx.name_for(f"{name}_logits"),
            inputs=inputs,
            kernel=kernel,
            bias=bias,
            source=describe(layer),
        )
        return (logits, *softmax_nodes(ctx, name, logits.name, (kernel.shape[1],), "log_softmax", layer))
    return ir.Dense(
        name=name, inputs=inputs, kernel=kernel, bias=bias, activation=activation, source=describe(layer)
    )


def uses_bias(layer: Any) -> bool:
    """A layer's use_bias; a Dense that tf.keras revived from a SavedModel without its class (its
    activation a TensorFlow function, such as 'log_softmax_v2') keeps it in its config only."""
    return bool(getattr(layer, "use_bias", layer.get_config().get("use_bias", True)))


def softmax_nodes(
    ctx: Context, name: str, z: str, shape: tuple[int, ...], activation: str, layer: Any
) -> tuple[ir.Node, ...]:
    """softmax or log_softmax over the last axis of a value of `shape`, named `name`."""
    size = int(np.prod(shape))
    log = activation == "log_softmax"
    return tuple(grouped_softmax(ctx.name_for, name, z, size, shape[-1], log=log, source=describe(layer)))


def input_tensor(layer: Any) -> Any:
    """The tensor a single-input layer reads (Keras 3 lists [input, mask] for a masked call)."""
    return layer.input[0] if isinstance(layer.input, list) else layer.input


def per_step_dense(
    owner: Any, dense: Any, inputs: tuple[str, ...], ctx: Context
) -> ir.Node | tuple[ir.Node, ...]:
    """`dense` applied to each step of the sequence `owner` (the Dense itself, or a TimeDistributed
    around it) reads; the sequence's mask flows on, as in Keras."""
    activation = activation_name(dense, ctx, lowered=LOWERED_ACTIVATIONS)
    steps = input_tensor(owner).shape[1]
    if steps is None:
        raise ctx.unsupported(owner, "a sequence of variable length")
    name = ctx.node_name(owner)
    grouped = activation in ("softmax", "log_softmax")  # over each step's features: from primitives
    node = ir.PatchDense(
        name=ctx.name_for(f"{name}_logits") if grouped else name,
        inputs=inputs,
        kernel=ir.Weights(np.asarray(dense.kernel.numpy())),
        bias=ir.Weights(np.asarray(dense.bias.numpy())) if uses_bias(dense) else None,
        activation="linear" if grouped else activation,
        patches=int(steps),
        source=describe(owner),
    )
    if inputs[0] in ctx.masks:
        ctx.masks[name] = ctx.masks[inputs[0]]
    if not grouped:
        return node
    shape = (int(steps), int(dense.kernel.shape[1]))
    return (node, *softmax_nodes(ctx, name, node.name, shape, activation, owner))


@converts("TimeDistributed", produces="PatchDense")
def _time_distributed(layer: Any, inputs: tuple[str, ...], ctx: Context) -> ir.Node | tuple[ir.Node, ...]:
    if type(layer.layer).__name__ != "Dense" or len(input_tensor(layer).shape) != 3:
        raise ctx.unsupported(
            layer, f"TimeDistributed({type(layer.layer).__name__}) (only Dense over sequences)"
        )
    return per_step_dense(layer, layer.layer, inputs, ctx)


@converts("Activation", produces="ActivationNode+GroupMax+Gather+Binary+PatchDense")
def _activation(layer: Any, inputs: tuple[str, ...], ctx: Context) -> ir.Node | tuple[ir.Node, ...] | str:
    name = activation_name(layer, ctx, lowered=LOWERED_ACTIVATIONS)
    if name == "linear":
        return inputs[0]
    return activation_nodes(layer, inputs, ctx, name)


def activation_nodes(
    layer: Any, inputs: tuple[str, ...], ctx: Context, activation: str
) -> ir.Node | tuple[ir.Node, ...]:
    """An activation over the layer's input; softmax over the last axis of a sequence or an image, and
    log_softmax, are built from primitives (a flat softmax is every target's own)."""
    shape = tuple(int(d) for d in input_tensor(layer).shape[1:])
    if activation == "log_softmax" or (activation == "softmax" and len(shape) > 1):
        return softmax_nodes(ctx, ctx.node_name(layer), inputs[0], shape, activation, layer)
    return ir.ActivationNode(
        name=ctx.node_name(layer), inputs=inputs, activation=activation, source=describe(layer)
    )


@converts("Gelu", produces="ActivationNode")
def _gelu_op(layer: Any, inputs: tuple[str, ...], ctx: Context) -> ir.Node:
    """`keras.ops.gelu(x, approximate=...)` applied in a functional model: an operation in the graph,
    saved with the model, not a layer."""
    activation = "gelu_tanh" if getattr(layer, "approximate", False) else "gelu"
    return ir.ActivationNode(
        name=ctx.node_name(layer), inputs=inputs, activation=activation, source=describe(layer)
    )


@converts("Softmax", produces="ActivationNode+GroupMax+Gather+Binary+PatchDense")
def _softmax(layer: Any, inputs: tuple[str, ...], ctx: Context) -> ir.Node | tuple[ir.Node, ...]:
    axis = layer.get_config().get("axis", -1)
    shape = tuple(int(d) for d in input_tensor(layer).shape[1:])
    if isinstance(axis, list) and len(axis) == 1:
        axis = axis[0]
    if not isinstance(axis, int) or not -len(shape) <= axis <= len(shape) or axis == 0:
        raise ctx.unsupported(layer, f"softmax over axis {axis} (one axis of the row)")
    moved = (axis if axis > 0 else len(shape) + 1 + axis) - 1  # the axis among the row's own
    if moved == len(shape) - 1:
        return activation_nodes(layer, inputs, ctx, "softmax")
    return softmax_over_axis(layer, inputs[0], ctx, shape, moved)


def softmax_over_axis(
    layer: Any, x: str, ctx: Context, shape: tuple[int, ...], axis: int
) -> tuple[ir.Node, ...]:
    """Softmax over a middle axis: a Gather moves that axis last, the grouped softmax runs, and a second
    Gather puts every value back in its place."""
    name, source = ctx.node_name(layer), describe(layer)
    order = [*(a for a in range(len(shape)) if a != axis), axis]
    moved = np.arange(int(np.prod(shape))).reshape(shape).transpose(order).ravel()
    forward = ir.Gather(
        name=ctx.name_for(f"{name}_moved"),
        inputs=(x,),
        indices=ir.Weights(moved.astype(np.float32)),
        source=source,
    )
    inner = ctx.name_for(f"{name}_grouped")
    grouped = softmax_nodes(ctx, inner, forward.name, tuple(shape[a] for a in order), "softmax", layer)
    back = np.argsort(moved).astype(np.float32)
    restored = ir.Gather(name=name, inputs=(inner,), indices=ir.Weights(back), source=source)
    return (forward, *grouped, restored)


@converts("Dropout", "GaussianDropout", "GaussianNoise", "AlphaDropout", produces="identity")
def _identity(layer: Any, inputs: tuple[str, ...], ctx: Context) -> str:
    return inputs[0]  # inference-time identity


@converts("Flatten", produces="Reshape")
def _flatten(layer: Any, inputs: tuple[str, ...], ctx: Context) -> ir.Node | str:
    if len(layer.input.shape) == 2:
        return inputs[0]
    size = int(np.prod(layer.input.shape[1:]))
    return ir.Reshape(name=ctx.node_name(layer), inputs=inputs, shape=(size,), source=describe(layer))


def _input_spec(tensor: Any, ctx: Context) -> ir.TensorSpec:
    shape = tuple(tensor.shape[1:])
    if any(dim is None for dim in shape):
        raise UnsupportedLayer(f"input '{tensor.name}'", ctx.target, f"variable dimension in shape {shape}")
    dtype = getattr(tensor.dtype, "name", str(tensor.dtype))  # a string in Keras 3, a DType in tf.keras
    if dtype not in ("float32", *INTEGER_DTYPES):
        raise UnsupportedLayer(f"input '{tensor.name}'", ctx.target, f"dtype {tensor.dtype}")
    kind = "float32" if dtype == "float32" else "int32"
    return ir.TensorSpec(name=ctx.name_for(tensor.name), shape=tuple(int(d) for d in shape), dtype=kind)


INTEGER_DTYPES = ("int32", "int64")


def bounded(
    inputs: tuple[ir.TensorSpec, ...], nodes: list[ir.Node], target: str
) -> tuple[ir.TensorSpec, ...]:
    """Integer inputs with the number of rows of the tables they index. One read by anything but
    Embedding (its lookup, and its mask's test for 0) is refused: those layers expect real values."""
    specs = []
    for spec in inputs:
        if spec.dtype == "int32":
            readers = [node for node in nodes if spec.name in node.inputs]
            tables = [node.table.shape[0] for node in readers if isinstance(node, ir.Lookup)]
            if not tables or not all(isinstance(node, ir.Lookup | ir.StepMask) for node in readers):
                raise UnsupportedLayer(
                    f"input '{spec.name}'", target, "an integer input not read by Embedding only"
                )
            spec = replace(spec, bound=min(tables))
        specs.append(spec)
    return tuple(specs)


def positional_tensors(inbound: Any) -> list[Any]:
    """The tensors a layer was called on, without keyword arguments such as a propagated `mask`
    (the mask's own ops are not part of the network: a step mask flows as a value of its own instead).
    Keras 3 keeps them in `node.arguments.args`, legacy tf.keras in `node.call_args`."""
    import keras

    args = inbound.arguments.args if hasattr(inbound, "arguments") else inbound.call_args
    kwargs = (inbound.arguments.kwargs if hasattr(inbound, "arguments") else inbound.call_kwargs) or {}
    named = [kwargs[key] for key in INPUT_KEYWORDS if key in kwargs]  # mha(query=q, value=v)
    return [item for item in keras.tree.flatten([*args, *named]) if hasattr(item, "_keras_history")]


# Keyword arguments that are a layer's inputs (MultiHeadAttention's), after its positional ones.
INPUT_KEYWORDS = ("query", "value", "key")


def keyword_arguments(inbound: Any) -> dict[str, Any]:
    """The keyword arguments a layer was called with (use_causal_mask=True, an attention_mask tensor, ...)."""
    kwargs = (
        inbound.arguments.kwargs if hasattr(inbound, "arguments") else getattr(inbound, "call_kwargs", {})
    )
    return dict(kwargs or {})


def output_tensors(inbound: Any) -> list[Any]:
    """The tensors one call of a layer returned, in order."""
    import keras

    return list(keras.tree.flatten(inbound.outputs))


def carry_mask(tensor: Any, inputs: tuple[str, ...], result: str, ctx: Context) -> None:
    """A layer that keeps its input's mask (Keras's default compute_mask for the layers that support
    masking: LayerNormalization, Activation, ...) passes it on with its value, when Keras says the output is
    masked, the converter set no mask itself, and the inputs carry exactly one mask."""
    if result in ctx.masks or getattr(tensor, "_keras_mask", None) is None:
        return
    masks = {ctx.masks[name] for name in inputs if name in ctx.masks}
    if len(masks) == 1:
        ctx.masks[result] = masks.pop()


def to_ir(
    model: Any,
    *,
    target: str,
    classes: tuple[str, ...] = (),
    kinds: tuple[str, ...] | None = None,
    path: Path | None = None,
    requested: str | None = None,
    strict: bool = False,
) -> ir.Graph:
    """Convert a built Keras model (Sequential or functional) into an IR graph. `kinds` says what each
    output means; when not given it is read once every layer has converted (an unsupported layer is
    named first): from the model's layers and the loss saved in the file at `path`, or --output's
    `requested` kind (export/frontend_outputs.py). An export is `strict`: an output that fits no kind
    is refused in one line; otherwise (a graph for tests and tools) it is values."""
    ctx = Context(target=target, names={})
    inputs = tuple(_input_spec(tensor, ctx) for tensor in model.inputs)
    for tensor in model.outputs:
        if len(tensor.shape) != 2:
            raise ExportError(f"output {tensor.name!r} has shape {tuple(tensor.shape)}; outputs must be flat")
    values: dict[int, str] = {id(t): spec.name for t, spec in zip(model.inputs, inputs, strict=True)}
    nodes: list[ir.Node] = []

    def visit(tensor: Any) -> str:
        if id(tensor) in values:
            return values[id(tensor)]
        layer, node_index, _ = tensor._keras_history
        inbound = layer._inbound_nodes[node_index]
        tensors = positional_tensors(inbound)
        input_names = tuple(visit(t) for t in tensors)
        converter = CONVERTERS.get(type(layer).__name__)
        if converter is None:
            raise ctx.unsupported(layer)
        ctx.applying(layer)
        ctx.arguments, ctx.tensors = keyword_arguments(inbound), tensors
        result = converter(layer, input_names, ctx)
        if isinstance(result, Outputs):  # several outputs: each tensor of this call gets its value
            nodes.extend(result.nodes)
            for output, value in zip(output_tensors(inbound), result.values, strict=True):
                values[id(output)] = value
            return values[id(tensor)]
        if isinstance(result, tuple):  # a layer lowered to several nodes: the last one is its value
            nodes.extend(result)
            result = result[-1].name
        elif isinstance(result, ir.Node):
            nodes.append(result)
            result = result.name
        values[id(tensor)] = result
        carry_mask(tensor, input_names, result, ctx)
        return result

    results = [visit(tensor) for tensor in model.outputs]
    if kinds is None:
        kinds = output_kinds(model, path, requested, strict=strict).kinds
    output, outputs = joined_outputs(results, model, nodes, ctx, kinds)
    nodes = fold_linear_chains(lower(nodes), output)
    units = int(model.outputs[0].shape[-1])
    return ir.Graph(
        inputs=bounded(inputs, nodes, target),
        nodes=tuple(nodes),
        output=output,
        classes=check_classes(kinds[0], units, tuple(classes)),
        outputs=outputs,
        kind=kinds[0],
    )


def joined_outputs(
    values: list[str], model: Any, nodes: list[ir.Node], ctx: Context, kinds: tuple[str, ...]
) -> tuple[str, tuple[ir.OutputSpec, ...]]:
    """One output as it is; several joined into one flat value (a Concatenate), each named by its value
    and given its range and kind."""
    if len(values) == 1:
        return values[0], ()
    if len(set(values)) != len(values):
        raise ExportError("the model returns one value as two outputs; return it once")
    specs, start = [], 0
    for value, tensor, kind in zip(values, model.outputs, kinds, strict=True):
        stop = start + int(tensor.shape[-1])
        specs.append(ir.OutputSpec(name=value, start=start, stop=stop, kind=kind))
        start = stop
    joined = ir.Concatenate(name=ctx.name_for("outputs"), inputs=tuple(values), source="the model's outputs")
    nodes.append(joined)
    return joined.name, tuple(specs)


MAX_LABEL = 200


def check_labels(labels: Any) -> tuple[str, ...]:
    """Class labels from metadata: a list of single-line strings. They reach databases only as data, but
    a line break could still end a statement in a script client (SQL*Plus), so none is allowed."""
    if not isinstance(labels, list) or not all(isinstance(label, str) for label in labels):
        raise ExportError("metadata 'classes' must be a list of strings, one label per class")
    for index, label in enumerate(labels):
        if not label or len(label) > MAX_LABEL:
            raise ExportError(f"class label {index} must hold 1 to {MAX_LABEL} characters")
        if any(unicodedata.category(character) in ("Cc", "Cf", "Zl", "Zp") for character in label):
            raise ExportError(f"class label {index} holds a line break or control character: {label[:40]!r}")
    return tuple(labels)


def read_metadata(model_path: Path) -> dict[str, Any]:
    """The `metadata.json` written beside the model by training, or {} when there is none; its class
    labels checked (check_labels)."""
    path = model_path.parent / "metadata.json"
    if not path.exists():
        return {}
    try:
        metadata = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ExportError(f"cannot read {path}: {first_line(error)}") from None
    if not isinstance(metadata, dict):
        raise ExportError(f"{path} must hold a JSON object")
    if "classes" in metadata:
        metadata["classes"] = list(check_labels(metadata["classes"]))
    return metadata


def load_model(path: str | Path, *, trust_code: bool = False, limits: Limits = DEFAULT_LIMITS) -> Any:
    """Load a model as users save them: Keras 3's `.keras`, or, with TensorFlow's legacy Keras 2 package
    (tf-keras), an HDF5 `.h5` or a SavedModel directory written by `tf.keras`. The configuration is read
    as data first: code in it (a Lambda, a custom object) is refused unless `trust_code`, and sizes
    beyond `limits` are refused before any weight is allocated. One clear line for every refusal."""
    model_file = read_model_file(path)
    if not trust_code:
        refuse_code(model_file)
    check_sizes(model_file, limits, trust_code=trust_code)
    if model_file.library == "keras":
        return load_keras(model_file, safe_mode=not trust_code)
    if model_file.format == "savedmodel" and not trust_code:
        return saved_model_from_config(model_file)
    return load_tf_keras(model_file)


def load_keras(model_file: ModelFile, *, safe_mode: bool) -> Any:
    import keras  # deferred: importing TensorFlow takes seconds

    try:
        return keras.saving.load_model(model_file.path, compile=False, safe_mode=safe_mode)
    except Exception as error:  # Keras raises many types for a corrupt file
        raise ExportError(f"cannot load Keras model {model_file.path}: {first_line(error)}") from error


def load_tf_keras(model_file: ModelFile) -> Any:
    """tf.keras (Keras 2), the format's own reader; for an HDF5 file that tf.keras wrote with a TensorFlow
    function as an activation (which its HDF5 reader cannot read back), then Keras 3, given Keras's own
    functions under those names (LEGACY_TF_ACTIVATIONS): nothing from the file runs either way."""
    import tf_keras

    try:
        return tf_keras.models.load_model(
            model_file.path, compile=False, custom_objects=legacy_tf_activations()
        )
    except Exception as legacy_error:
        if model_file.format != "h5":
            raise ExportError(
                f"cannot load {model_file.kind} {model_file.path} with tf.keras: {first_line(legacy_error)}"
            ) from None
        import keras

        try:
            return keras.saving.load_model(model_file.path, compile=False, custom_objects=keras_activations())
        except Exception as error:
            raise ExportError(
                f"cannot load {model_file.path}: tf.keras said {first_line(legacy_error)!r}; "
                f"Keras 3 said {first_line(error)!r}"
            ) from None


def keras_activations() -> dict[str, Any]:
    """Keras 3's own activations under the TensorFlow function names of LEGACY_TF_ACTIVATIONS."""
    import keras

    functions = {
        "log_softmax_v2": keras.activations.log_softmax,
        "softmax_v2": keras.activations.softmax,
        "exp": keras.activations.exponential,
        "log_sigmoid": keras.activations.log_sigmoid,
    }
    assert tuple(functions) == LEGACY_TF_ACTIVATIONS
    return functions


def saved_model_from_config(model_file: ModelFile) -> Any:
    """A tf.keras SavedModel rebuilt from its checked configuration, its weights read from its checkpoint:
    none of the TensorFlow functions the SavedModel also holds is loaded or run."""
    import tensorflow as tf
    import tf_keras

    try:
        model = tf_keras.models.model_from_config(
            tf_keras_config(model_file), custom_objects=legacy_tf_activations()
        )
        status = model.load_weights(str(model_file.path / "variables" / "variables"))
        status.assert_existing_objects_matched()
    except (tf.errors.OpError, AssertionError, ValueError, TypeError) as error:
        raise ExportError(f"cannot load {model_file.kind} {model_file.path}: {first_line(error)}") from None
    return model


def is_legacy(model: Any) -> bool:
    """True for a model of TensorFlow's legacy Keras 2 package (tf-keras), False for Keras 3."""
    return type(model).__module__.startswith("tf_keras")


# Converters kept in modules of their own register on import.
from export import (  # noqa: E402, F401
    frontend_activations,
    frontend_attention,
    frontend_convolution,
    frontend_convolution_variants,
    frontend_embedding,
    frontend_merge,
    frontend_normalization,
    frontend_recurrent,
    frontend_reshaping,
    frontend_spatial,
)
