"""The ONNX target's emitter: a Keras model → model.onnx, with Keras's own exporter (tf2onnx underneath; a
tf.keras model through tf2onnx directly), its first output named for the HTTP clients."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ExportError
from ..frontend.model import is_legacy

TARGET = "onnx"
# The first output's name, by its kind: what HTTP clients ask for.
OUTPUT_NAMES = {"logits": "logits", "values": "values"}
OUTPUT_NAME = "probabilities"


def convert(model: Any, path: Path, opset: int | None = None, kind: str = "probabilities") -> None:
    """Keras's ONNX export, then the first output renamed for the HTTP clients ('probabilities', or
    'logits' or 'values' by its kind). `opset` pins the ONNX opset (a runtime older than ours needs one
    it implements); None: the converter's."""
    import onnx

    from .tf2onnx_ops import fix_transposed_padding, register

    register()
    try:
        if is_legacy(model):
            unguarded_first(lambda: legacy_to_onnx(model, path, opset))
        else:
            embed_statistics(model)
            options = {"format": "onnx", "verbose": False, "opset_version": opset}
            unguarded_first(lambda: model.export(str(path), **options))
    except Exception as error:  # the converter raises many types
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ExportError(f"the ONNX converter failed for target '{TARGET}': {first}") from error
    graph_model = onnx.load(str(path))
    fix_transposed_padding(graph_model)
    names = output_names(model, kind)
    renamed = dict(zip((o.name for o in graph_model.graph.output), names, strict=True))
    for node in graph_model.graph.node:
        node.output[:] = [renamed.get(name, name) for name in node.output]
    for output in graph_model.graph.output:
        output.name = renamed[output.name]
    onnx.checker.check_model(graph_model)
    onnx.save(graph_model, str(path))


# tf2onnx's switch for its optimisers' guard (tf2onnx/constants.py). It reads only whether the variable is
# set (tf2onnx 1.17 compares the variable's name, not its value, with "TRUE"), so "false" turns the guard off
# in that version and in one that reads the value.
GUARD_VARIABLE = "TF2ONNX_CATCH_ERRORS"


def unguarded_first(conversion: Callable[[], None]) -> None:
    """Run a tf2onnx conversion without its optimisers' guard, and again with it if that fails.

    Guarded, tf2onnx deep-copies the whole graph, weights included, before each of its optimisers on every
    pass, so that it can undo one that raises: about a third of a conversion's CPU (a masked recurrent
    model: 6.8 → 4.8 s). Unguarded, the optimisers do the same work on the graph itself; when none raises,
    the model is the same, and when one does, the guarded conversion gives what it always gave."""
    try:
        with environment(GUARD_VARIABLE, "false"):
            conversion()
    except Exception:  # an optimiser that raised, unguarded: convert again, guarded
        conversion()


@contextmanager
def environment(name: str, value: str) -> Iterator[None]:
    """`name` set to `value` in this process's environment for the block, then as it was."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def output_names(model: Any, kind: str = "probabilities") -> list[str]:
    """The first output is named by its kind (what HTTP clients ask for); others keep their Keras
    names, made unique (they reach clients as data, in responses and the repository document)."""
    names = [OUTPUT_NAMES.get(kind, OUTPUT_NAME)]
    for index, keras_name in enumerate(getattr(model, "output_names", [])[1:], start=1):
        name = str(keras_name) if str(keras_name) and str(keras_name) not in names else f"output_{index}"
        names.append(name)
    return names


def embed_statistics(model: Any) -> None:
    """Keras's ONNX export turns a Normalization layer's adapted statistics (eager tensors) into graph
    inputs without values; given as numpy arrays, they are traced as constants."""
    import keras

    for layer in model._flatten_layers(include_self=False):
        if isinstance(layer, keras.layers.Normalization) and getattr(layer, "mean", None) is not None:
            layer.mean, layer.variance = np.asarray(layer.mean), np.asarray(layer.variance)


def legacy_to_onnx(model: Any, path: Path, opset: int | None = None) -> None:
    """A tf.keras (Keras 2) model through tf2onnx directly, inputs named as in the Keras model."""
    import tensorflow as tf
    import tf2onnx

    signature = [
        tf.TensorSpec((None, *tensor.shape[1:]), tf.float32, name=tensor.name.split(":")[0])
        for tensor in model.inputs
    ]
    tf2onnx.convert.from_keras(model, input_signature=signature, opset=opset, output_path=str(path))
