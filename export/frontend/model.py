"""Keras front end: a trained Keras model → the target-neutral IR.

Layer classes map to IR nodes through `CONVERTERS`; a layer without a converter, or with an option the IR
cannot express, raises `UnsupportedLayer` naming the layer and the target being compiled for. This module
knows nothing about SQL or any target, and lowers nothing: `trace` reads the layers, `to_graph` builds the
IR once the outputs' kinds are known, and the compile pipeline (export/compile.py) lowers and optimises.

Converters live in one module per layer family (export/frontend/*.py), all registered by
export/frontend/layers.py, which this module imports.
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass, field, replace
from importlib import import_module
from pathlib import Path
from typing import Any

from nnsql.text import printable

from ..errors import ExportError, UnsupportedLayer
from ..ir import graph as ir
from ..ir.kinds import check_classes
from .base import Context, Outputs, positional_tensors
from .float64 import float32_model
from .layers import CONVERTERS
from .model_code import LEGACY_TF_ACTIVATIONS, legacy_tf_activations, refuse_code
from .model_file import ModelFile, first_line, read_model_file
from .model_limits import (
    DEFAULT_LIMITS,
    Limits,
    check_compute_precision,
    check_finite_weights,
    check_sizes,
    tf_keras_config,
)
from .model_snapshot import model_snapshot


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
    """Inputs as their readers take them. One read only by Embedding (its lookup, and its mask's test for
    0) holds token ids: whole numbers below the rows of the tables it indexes, whatever dtype it
    declares (a Keras 2 Sequential with `Embedding(input_length=n)` declares float32). An integer input
    read by anything else is refused: those layers expect real values."""
    specs = []
    for spec in inputs:
        readers = [node for node in nodes if spec.name in node.inputs]
        tables = [node.table.shape[0] for node in readers if isinstance(node, ir.Lookup)]
        tokens = bool(tables) and all(isinstance(node, ir.Lookup | ir.StepMask) for node in readers)
        if spec.dtype == "int32" and not tokens:
            reason = "an integer input not read by Embedding only"
            raise UnsupportedLayer(f"input '{spec.name}'", target, reason)
        if tokens:
            spec = replace(spec, dtype="int32", bound=min(tables))
        specs.append(spec)
    return tuple(specs)


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


@dataclass(frozen=True)
class Traced:
    """A Keras model's graph as the front end read it: the inputs, the nodes of every layer (composite ones
    not lowered yet), and the value of each output."""

    inputs: tuple[ir.TensorSpec, ...]
    nodes: tuple[ir.Node, ...]
    results: tuple[str, ...]
    target: str
    names: Context = field(repr=False)


def trace(model: Any, *, target: str) -> Traced:
    """Walk a built Keras model (Sequential or functional) from its outputs back to its inputs, converting
    each layer through `CONVERTERS`; the first layer without a converter, or with an option the IR cannot
    express, is named here, before anything else is read."""
    ctx = Context(target=target, names={})
    inputs = tuple(_input_spec(tensor, ctx) for tensor in model.inputs)
    for tensor in model.outputs:
        if len(tensor.shape) != 2:
            raise ExportError(f"output {tensor.name!r} has shape {tuple(tensor.shape)}; outputs must be flat")
    values: dict[int, str] = {id(t): spec.name for t, spec in zip(model.inputs, inputs, strict=True)}
    nodes: list[ir.Node] = []
    results = tuple(visit(tensor, values, nodes, ctx) for tensor in model.outputs)
    return Traced(inputs=inputs, nodes=tuple(nodes), results=results, target=target, names=ctx)


def visit(tensor: Any, values: dict[int, str], nodes: list[ir.Node], ctx: Context) -> str:
    """The value of `tensor`: its layer converted (after the layers it reads), its nodes appended."""
    if id(tensor) in values:
        return values[id(tensor)]
    layer, node_index, _ = tensor._keras_history
    inbound = layer._inbound_nodes[node_index]
    tensors = positional_tensors(inbound)
    input_names = tuple(visit(t, values, nodes, ctx) for t in tensors)
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
    return str(result)


def to_graph(traced: Traced, model: Any, kinds: tuple[str, ...], classes: tuple[str, ...] = ()) -> ir.Graph:
    """The IR of a traced model, each output given its kind (export/frontend/outputs.py) and several
    outputs joined into one flat value; composite nodes are still to be lowered (export/ir/lowering.py)."""
    nodes = list(traced.nodes)
    output, outputs = joined_outputs(list(traced.results), model, nodes, traced.names, kinds)
    units = int(model.outputs[0].shape[-1])
    return ir.Graph(
        inputs=bounded(traced.inputs, nodes, traced.target),
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


def read_metadata(model_path: Path, shown: Path | None = None) -> dict[str, Any]:
    """The `metadata.json` written beside the model by training, or {} when there is none; its class
    labels checked (check_labels). `shown`: the file named in messages (the user's, for a copy's)."""
    read = model_path.parent / "metadata.json"
    path = read if shown is None else shown
    if not read.exists():
        return {}
    try:
        metadata = json.loads(read.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ExportError(f"cannot read {path}: {first_line(error)}") from None
    if not isinstance(metadata, dict):
        raise ExportError(f"{path} must hold a JSON object")
    if "classes" in metadata:
        metadata["classes"] = list(check_labels(metadata["classes"]))
    lookalike = next((key for key in LABEL_KEY_LOOKALIKES if key in metadata), None)
    if lookalike and "classes" not in metadata:  # the labels would silently be 0, 1, 2, ...
        raise ExportError(
            f"{path} names its class labels {lookalike!r}; the exporter reads 'classes': rename it"
        )
    return metadata


# Keys users give class labels under, which the exporter would otherwise ignore.
LABEL_KEY_LOOKALIKES = ("class_names", "class_labels", "label_names", "labels", "categories")


@dataclass(frozen=True)
class OpenedModel:
    """A loaded Keras model, the loss its file was compiled with (as saved, or None) and the metadata.json
    beside it ({} when there is none), all read from the one private copy of the file and of its
    metadata, taken from the same directory (export/frontend/model_snapshot.py)."""

    model: Any
    loss: Any
    metadata: dict[str, Any]


def load_model(path: str | Path, *, trust_code: bool = False, limits: Limits = DEFAULT_LIMITS) -> Any:
    """Load a model as users save them: Keras 3's `.keras`, or, with TensorFlow's legacy Keras 2 package
    (tf-keras), an HDF5 `.h5` or a SavedModel directory written by `tf.keras` (see `open_model`)."""
    return open_model(path, trust_code=trust_code, limits=limits).model


def open_model(
    path: str | Path, *, trust_code: bool = False, limits: Limits = DEFAULT_LIMITS, as_float32: bool = False
) -> OpenedModel:
    """The model at `path` and its saved loss. The file is copied once into a private directory, and
    every check and Keras itself read only that copy: a file replaced meanwhile changes nothing that is
    checked or loaded. The configuration is read as data first: code in it (a Lambda, a custom object)
    is refused unless `trust_code`, and sizes beyond `limits` are refused before any weight is
    allocated, and a NaN or infinite weight once loaded. A model computing in float16 or bfloat16 is
    refused, or with `as_float32` rebuilt to compute in float32. One clear line for every refusal."""
    with model_snapshot(path, limits.max_parameters) as copy:
        model_file = read_model_file(copy, shown=printable(str(path)))
        if not trust_code:
            refuse_code(model_file)
        check_sizes(model_file, limits, trust_code=trust_code)
        if model_file.library == "keras":
            model = load_keras(model_file, safe_mode=not trust_code)
        elif model_file.format == "savedmodel" and not trust_code:
            model = saved_model_from_config(model_file)
        else:
            model = load_tf_keras(model_file)
        metadata = read_metadata(copy, shown=Path(printable(str(Path(path).parent / "metadata.json"))))
    check_finite_weights(model)
    if as_float32:
        model = float32_model(model)
    check_compute_precision(model, printable(str(path)))
    return OpenedModel(model, model_file.loss, metadata)


def load_keras(model_file: ModelFile, *, safe_mode: bool) -> Any:
    import keras  # deferred: importing TensorFlow takes seconds

    try:
        return keras.saving.load_model(model_file.path, compile=False, safe_mode=safe_mode)
    except Exception as error:  # Keras raises many types for a corrupt file
        raise ExportError(f"cannot load Keras model {model_file.shown}: {first_line(error)}") from error


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
                f"cannot load {model_file.kind} {model_file.shown} with tf.keras: {first_line(legacy_error)}"
            ) from None
        import keras

        try:
            return keras.saving.load_model(model_file.path, compile=False, custom_objects=keras_activations())
        except Exception as error:
            raise ExportError(
                f"cannot load {model_file.shown}: tf.keras said {first_line(legacy_error)!r}; "
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
        raise ExportError(f"cannot load {model_file.kind} {model_file.shown}: {first_line(error)}") from None
    return model


def variable_inputs(model: Any) -> list[Any]:
    """The inputs with a dimension of variable size (None), beside the batch."""
    return [tensor for tensor in model.inputs if any(d is None for d in tensor.shape[1:])]


def at_sequence_length(model: Any, steps: int | None) -> Any:
    """The model with its variable-length inputs ((None,) token ids, (None, features) sequences) fixed at
    `steps` steps, sharing its weights: what SQL compiles, where every array has one size. A model with
    none is returned as it is; one that has some needs `steps` (--sequence-length)."""
    variable = variable_inputs(model)
    if not variable:
        return model
    first = variable[0]
    if steps is None:
        raise ExportError(
            f"input {first.name!r} has a variable length (shape {tuple(first.shape)}): SQL compiles a fixed "
            "one; give --sequence-length N (the longest sequence you will score; pad shorter ones with 0 "
            "at the end), or --samples FILE whose rows have that length"
        )
    if steps < 1:
        raise ExportError("--sequence-length must be at least 1")
    for tensor in variable:
        if any(d is None for d in tensor.shape[2:]):
            raise ExportError(
                f"input {tensor.name!r} of shape {tuple(tensor.shape)}: only the steps may vary in SQL"
            )
    library = import_module("tf_keras" if is_legacy(model) else "keras")
    varying = {id(tensor) for tensor in variable}
    fixed = [
        library.Input(
            shape=(steps, *tensor.shape[2:]) if id(tensor) in varying else tuple(tensor.shape[1:]),
            dtype=tensor.dtype,
            name=tensor._keras_history[0].name,
        )
        for tensor in model.inputs
    ]
    try:
        clone = library.models.clone_model(model, input_tensors=fixed if len(fixed) > 1 else fixed[0])
        clone.set_weights(model.get_weights())
    except Exception as error:  # Keras raises many types for a layer it cannot rebuild
        raise ExportError(f"cannot fix the model's inputs at {steps} steps: {first_line(error)}") from None
    return clone


def is_legacy(model: Any) -> bool:
    """True for a model of TensorFlow's legacy Keras 2 package (tf-keras), False for Keras 3."""
    return type(model).__module__.startswith("tf_keras")
