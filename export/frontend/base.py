"""The front end's registry and what every converter shares: `@converts` maps Keras layer classes to a
converter (`CONVERTERS`) and records the IR node kinds each produces (`PRODUCES`); `Context` names values
and masks; activation names are read as the Keras that wrote the layer means them. Converter modules
import this module, never the reverse."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import UnsupportedLayer
from ..ir import graph as ir
from ..names import SQL_KEYWORDS

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


def input_tensor(layer: Any) -> Any:
    """The tensor a single-input layer reads (Keras 3 lists [input, mask] for a masked call)."""
    return layer.input[0] if isinstance(layer.input, list) else layer.input


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
