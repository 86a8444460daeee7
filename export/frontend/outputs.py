"""What each output of a Keras model means (its kind, export/ir/kinds.py), read from the model as a user
wrote it: the last activation, the number of units, and the loss it was compiled with when the file
keeps it (a `.keras` file's compile_config, a legacy `.h5` file's training_config; read as JSON data).

    loss mse, mae, huber, ...            → values (whatever the activation)
    loss with from_logits=True           → logits (several binary_crossentropy logits: refused)
    softmax over 2 or more units         → probabilities
    sigmoid, one unit                    → binary
    sigmoid, several units               → multilabel (probabilities with a categorical loss)
    linear, or log_softmax               → logits
    no activation (Concatenate, pooling) → values
    another activation (relu, tanh, ...) → refused in one line naming --output

`--output KIND` overrides the reading; an override the model contradicts is said in one line, one that
cannot apply (binary over 3 units) is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..errors import ExportError
from ..ir import graph as ir
from ..ir import kinds

REGRESSION_LOSSES = frozenset(
    {
        "mse",
        "mae",
        "mape",
        "msle",
        "mean_squared_error",
        "mean_absolute_error",
        "mean_absolute_percentage_error",
        "mean_squared_logarithmic_error",
        "huber",
        "huber_loss",
        "log_cosh",
        "logcosh",
        "cosine_similarity",
        "poisson",
        "squared_hinge",
    }
)
CATEGORICAL_LOSSES = frozenset(
    {"categorical_crossentropy", "sparse_categorical_crossentropy", "categorical_focal_crossentropy"}
)
# Layers that pass their input through at inference: the activation is further up.
PASS_THROUGH = frozenset({"Dropout", "GaussianDropout", "GaussianNoise", "AlphaDropout", "Flatten"})
ACTIVATION_LAYERS = {
    "Softmax": "softmax",
    "Sigmoid": "sigmoid",
    "ReLU": "relu",
    "LeakyReLU": "leaky_relu",
    "ELU": "elu",
    "PReLU": "prelu",
    "Gelu": "gelu",
}


@dataclass(frozen=True)
class Loss:
    name: str  # snake case: binary_crossentropy, mean_squared_error, ...
    from_logits: bool = False


@dataclass(frozen=True)
class Reading:
    """One output as read: its name, units, last activation (None: not found) and loss (None: unknown)."""

    name: str
    units: int
    activation: str | None
    loss: Loss | None

    def evidence(self) -> str:
        """What the kind was read from, for the export report: '1 unit, sigmoid, loss binary_crossentropy'."""
        text = f"{self.units} unit{'s' if self.units != 1 else ''}, {self.activation or 'no activation'}"
        if self.loss is not None:
            text += f", loss {self.loss.name}" + (" (from_logits)" if self.loss.from_logits else "")
        return text


@dataclass(frozen=True)
class OutputKinds:
    """The kind of every output, what the first was read from, and a note when --output overrode it."""

    kinds: tuple[str, ...]
    evidence: str
    note: str = ""


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def parse_loss(value: Any) -> Loss | None:
    """One output's loss from its saved form: a name, a {'class_name', 'config'} object, or a serialised
    function ({'class_name': 'function', 'config': 'mean_squared_error'})."""
    if isinstance(value, str):
        return Loss(snake(value))
    if not isinstance(value, dict):
        return None
    config = value.get("config")
    if value.get("class_name") == "function" and isinstance(config, str):
        return Loss(snake(config))
    if not isinstance(value.get("class_name"), str):
        return None
    logits = isinstance(config, dict) and config.get("from_logits") is True
    return Loss(snake(value["class_name"]), from_logits=logits)


def per_output(loss: Any, names: list[str]) -> list[Loss | None]:
    """The loss of each output: one for all, a list in output order, or a dict keyed by output name."""
    if isinstance(loss, list) and len(loss) == len(names):
        return [parse_loss(item) for item in loss]
    if isinstance(loss, dict) and "class_name" not in loss:
        return [parse_loss(loss.get(name)) for name in names]
    return [parse_loss(loss)] * len(names)


def activation_of(layer: Any) -> str | None:
    """The activation a layer ends with, normalised (tf.keras's 'softmax_v2' is softmax); None when the
    layer has no activation this reader knows."""
    class_name = type(layer).__name__
    if class_name in ACTIVATION_LAYERS:
        return ACTIVATION_LAYERS[class_name]
    config = layer.get_config() if hasattr(layer, "get_config") else {}
    if class_name == "Activation" or "activation" in config:
        name = config.get("activation", "linear")
        if isinstance(name, dict):  # tf.keras may serialise {'class_name': 'function', 'config': 'elu'}
            name = name.get("config", name)
        return str(name).removesuffix("_v2") if isinstance(name, str) else None
    return None


def last_activation(tensor: Any) -> str | None:
    """The activation that produces an output tensor, looking through layers that pass values on."""
    for _ in range(100):
        history = getattr(tensor, "_keras_history", None)
        if history is None:
            return None
        layer = history[0]
        if type(layer).__name__ not in PASS_THROUGH:
            return activation_of(layer)
        from .base import positional_tensors

        tensors = positional_tensors(layer._inbound_nodes[history[1]])
        if len(tensors) != 1:
            return None
        tensor = tensors[0]
    return None


def output_name(model: Any, index: int, tensor: Any) -> str:
    """What Keras calls the output (its layer's name), as the compiled loss dict is keyed."""
    names = getattr(model, "output_names", None) or []
    if index < len(names):
        return str(names[index])
    history = getattr(tensor, "_keras_history", None)
    return str(history[0].name) if history is not None else str(tensor.name)


def read_outputs(model: Any, loss: Any) -> list[Reading]:
    """Each output's name, units, activation and loss; `loss` as its file saved it (None: not known)."""
    names = [output_name(model, index, tensor) for index, tensor in enumerate(model.outputs)]
    losses = per_output(loss, names)
    return [
        Reading(name, int(tensor.shape[-1]), last_activation(tensor), loss)
        for name, tensor, loss in zip(names, model.outputs, losses, strict=True)
    ]


def kind_of(reading: Reading) -> str | None:
    """The kind the reading implies, or None when it fits none (see the module's table)."""
    loss, activation, units = reading.loss, reading.activation, reading.units
    if loss is not None and loss.name in REGRESSION_LOSSES:
        return "values"
    if loss is not None and loss.from_logits:
        independent = loss.name.startswith("binary") and units > 1  # sigmoid per unit, not a softmax
        return "logits" if activation in ("linear", "log_softmax", None) and not independent else None
    if activation == "softmax":
        return "probabilities" if units >= 2 else None
    if activation == "sigmoid":
        if units == 1:
            return "binary"
        return "probabilities" if loss is not None and loss.name in CATEGORICAL_LOSSES else "multilabel"
    if activation in ("linear", "log_softmax"):
        return "logits"
    if activation is None:  # features joined, pooled or reshaped: no activation says what they mean
        return "values"
    return None


def unfit(reading: Reading) -> str:
    loss = reading.loss
    if loss is not None and loss.from_logits and reading.units > 1 and loss.name == "binary_crossentropy":
        why = "independent logits (binary_crossentropy, from_logits): add a sigmoid to the last layer"
    else:
        why = "it fits no output kind"
    return (
        f"output '{reading.name}' ({reading.evidence()}): {why}; choose one with "
        f"--output {{{','.join(ir.OUTPUT_KINDS)}}}"
    )


def check_override(reading: Reading, requested: str, read: str | None) -> str:
    """Refuse a kind that cannot apply to the output; return a one-line note when the model says
    otherwise ('' when it agrees)."""
    if requested not in kinds.KINDS:
        raise ExportError(f"--output {requested!r}: choose one of {', '.join(ir.OUTPUT_KINDS)}")
    if requested == "binary" and reading.units != 1:
        raise ExportError(
            f"--output binary needs one output unit; '{reading.name}' has {reading.units} "
            "(--output multilabel for independent probabilities)"
        )
    if requested == "probabilities" and reading.units < 2:
        raise ExportError(
            f"--output probabilities needs two or more output units; '{reading.name}' has one, whose "
            "argmax is always 0 (--output binary reads it as p > 0.5)"
        )
    if read is None or read == requested:
        return ""
    return (
        f"--output {requested} overrides what the model says ({read}: {reading.evidence()}); "
        f"its functions follow {requested}"
    )


def output_kinds(
    model: Any, loss: Any = None, requested: str | None = None, *, strict: bool = True
) -> OutputKinds:
    """Every output's kind, from the layers and the `loss` the file was compiled with, as saved (read
    with the model: export/frontend/model.py's `open_model`; None when not known). The first output
    (whose kind score and label follow) must fit one, or be given by --output (not `strict`: it is
    values); a later output that fits none is values."""
    readings = read_outputs(model, loss)
    first = readings[0]
    read = kind_of(first)
    note = ""
    if requested is not None:
        note = check_override(first, requested, read)
    elif read is None and strict:
        raise ExportError(unfit(first))
    chosen = requested or read or "values"
    rest = [kind_of(reading) or "values" for reading in readings[1:]]
    return OutputKinds((chosen, *rest), first.evidence(), note)
