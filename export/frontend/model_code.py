"""Refuse a model whose configuration holds code, before Keras reads it.

Loading runs code from a model file in three ways: a `Lambda` layer's function (tf.keras stores it as
marshalled bytecode; Keras 3 as `__lambda__`), a class or function named by a module that is not Keras's
own (a custom object: its module is imported), and a tf.keras `TFOpLambda` that names any TensorFlow
function (`io.write_file` as well as `math.add`). Every serialised object of the configuration, nested
models and wrappers included (Sequential inside Functional, Bidirectional, TimeDistributed), must be a
built-in Keras layer, initializer, regularizer, constraint, activation or dtype policy of the library
that will load it, or plain data (tuples, shapes, tensors' specs). Anything else is refused with one line
naming the layer, unless the user passes --trust-model-code.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
from collections.abc import Iterator
from typing import Any

from nnsql.text import printable

from ..errors import ExportError
from .model_file import ModelFile

TRUST_ADVICE = "pass --trust-model-code only if you trust the file's author"

# Namespaces whose public classes a configuration may name, per library.
NAMESPACES = {
    "keras": (
        "layers",
        "models",
        "initializers",
        "regularizers",
        "constraints",
        "dtype_policies",
        "random",
    ),
    "tf_keras": ("layers", "models", "initializers", "regularizers", "constraints", "mixed_precision"),
}
LIBRARIES = ("keras", "tf_keras")  # tf.keras names its own modules "keras.*" in configurations
MODEL_CLASSES = {"Functional", "Model", "Sequential"}
# Serialised data, not classes: Keras turns these into tuples, tensors, specs or slices.
DATA_MARKERS = {
    "__tuple__",
    "__keras_tensor__",
    "__tensor__",
    "__numpy__",
    "__bytes__",
    "__ellipsis__",
    "__slice__",
    "__typespec__",
    "TensorShape",
}
CODE_CLASSES = {"Lambda", "__lambda__"}
# Keras 3's dtype policies of a quantized layer (`model.quantize("int8")`, "float8", "int4", ...).
QUANTIZED_POLICIES = {"QuantizedDTypePolicy", "QuantizedFloat8DTypePolicy"}
# Built-in classes whose configuration names code kept elsewhere, which loading or scoring runs: Keras
# refuses them in safe mode only from 3.14 on (a TFSMLayer loaded even then), so they are refused here.
OUTSIDE_CODE = {
    "TFSMLayer": "another SavedModel's TensorFlow graph, named by its path, which scoring runs",
    "TorchModuleWrapper": "a pickled PyTorch module, which loading runs",
    "JaxLayer": "JAX functions, which scoring runs",
    "FlaxLayer": "a Flax module, which scoring runs",
}
# A tf.keras TFOpLambda calls the TensorFlow function its config names; these have no side effects.
PURE_TF_PREFIXES = ("math.", "nn.", "linalg.", "__operators__.")
PURE_TF_FUNCTIONS = {
    *("concat", "reshape", "stack", "unstack", "squeeze", "expand_dims", "transpose", "cast"),
    *("clip_by_value", "where", "gather", "split", "tile", "identity", "ones_like", "zeros_like"),
    *("shape", "broadcast_to", "pad", "slice", "strided_slice", "reverse", "einsum", "matmul"),
    *("maximum", "minimum", "abs", "sqrt", "exp", "square", "sigmoid", "tanh", "one_hot", "range"),
}
# The TensorFlow function names tf.keras writes for an activation given as `tf.nn.log_softmax` and the
# like (serialised as a 'builtins' function), which it cannot read back by itself: legacy_tf_activations
# (and keras_frontend.keras_activations for Keras 3) give the functions for the names.
LEGACY_TF_ACTIVATIONS = ("log_softmax_v2", "softmax_v2", "exp", "log_sigmoid")
KERAS_OPS_MODULE = re.compile(r"keras\.src\.ops\.[a-z_]+")


def legacy_tf_activations() -> dict[str, Any]:
    """TensorFlow's own functions for the names of LEGACY_TF_ACTIVATIONS, as tf.keras's custom objects
    when it reads a configuration: the names come from the file as data, the functions from TensorFlow."""
    import tensorflow as tf  # deferred: importing TensorFlow takes seconds

    functions = {
        "log_softmax_v2": tf.nn.log_softmax,
        "softmax_v2": tf.nn.softmax,
        "exp": tf.math.exp,
        "log_sigmoid": tf.math.log_sigmoid,
    }
    assert tuple(functions) == LEGACY_TF_ACTIVATIONS
    return functions


def refuse_code(model: ModelFile) -> None:
    """Raise ExportError, naming the layer, for the first object of the configuration that is code or
    not a built-in of the library that will load the file."""
    if model.config is None:
        raise ExportError(
            f"{model.shown} has no keras_metadata.pb (a SavedModel not written by tf.keras, or before "
            f"TensorFlow 2.5): its layers cannot be checked for code before loading; {TRUST_ADVICE}"
        )
    library = importlib.import_module(model.library)  # deferred: imports TensorFlow
    top = model.config
    objects = [(top, ()), *serialised_objects({k: v for k, v in top.items() if k != "class_name"}, ())]
    for obj, layers in objects:
        where = "layer " + " inside ".join(layers[::-1]) if layers else f"the model ({top['class_name']})"
        mode = quantization_mode(obj)
        if mode:
            raise ExportError(quantized_refusal(model.shown, where, mode))
        problem = what_is_wrong(obj, library, model.library)
        if problem:
            raise ExportError(f"refusing to load {model.shown}: {where}: {problem}; {TRUST_ADVICE}")


def quantization_mode(obj: dict[str, Any]) -> str:
    """The quantization a serialised object declares (Keras 3's `model.quantize`: a layer's
    `QuantizedDTypePolicy` or its `keras.quantizers` configuration), or ""."""
    class_name, config = obj["class_name"], obj.get("config")
    if class_name in QUANTIZED_POLICIES and isinstance(config, dict):
        return str(config.get("mode") or "quantized")
    module = obj.get("module")
    if isinstance(module, str) and module.startswith("keras") and class_name.endswith("QuantizationConfig"):
        return class_name.removesuffix("QuantizationConfig").lower() or "quantized"
    return ""


def quantized_refusal(shown: str, where: str, mode: str) -> str:
    """One line for a quantized layer: a built-in of Keras, and no target computes as it does."""
    return (
        f"{shown}: {where} is quantized ({printable(mode)}): model.predict computes with its quantized "
        "weights, which no target reproduces; export the model as it was before quantize()"
    )


def serialised_objects(
    value: Any, layers: tuple[str, ...], key: str = ""
) -> Iterator[tuple[dict[str, Any], tuple[str, ...]]]:
    """Every `{"class_name": ...}` object in the configuration, with the layers that hold it, outermost
    first. `compile_config` (optimizer, loss, metrics) is skipped: the exporter loads without compiling."""
    if isinstance(value, list):
        for item in value:
            yield from serialised_objects(item, layers)
    elif isinstance(value, dict):
        if isinstance(value.get("class_name"), str):
            config = value.get("config")
            name = config.get("name") if isinstance(config, dict) else None
            if isinstance(name, str) and key != "dtype":  # a layer or a nested model
                layers = (*layers, f"'{name}' ({value['class_name']})")
            yield value, layers
        for child_key, child in value.items():
            if child_key != "compile_config":
                yield from serialised_objects(child, layers, child_key)


def what_is_wrong(obj: dict[str, Any], library: Any, library_name: str) -> str:
    """Why this serialised object would run code from the file, or "" when it is a built-in."""
    class_name, module = obj["class_name"], obj.get("module")
    if class_name == "function" and obj.get("config") in LEGACY_TF_ACTIVATIONS:
        return ""  # a name, read as data: legacy_tf_activations gives TensorFlow's own function
    if class_name in CODE_CLASSES:
        return "Python code (a Lambda's marshalled bytecode) that loading would run"
    if class_name in OUTSIDE_CODE:
        return f"a {class_name} holds {OUTSIDE_CODE[class_name]}"
    if class_name in DATA_MARKERS:
        return ""
    # A lookup layer (StringLookup, IntegerLookup, TextVectorization) given its vocabulary as a path reads
    # that file when it is made: tf.keras always, Keras 3 outside safe mode. A model's vocabulary must be
    # in the model itself (a list, or Keras 3's archived asset), whatever the class.
    if isinstance(config := obj.get("config"), dict) and isinstance(config.get("vocabulary"), str):
        path = config["vocabulary"]
        return f"its vocabulary is the file {path!r}, outside the model, which loading would read"
    if module is not None and not (isinstance(module, str) and module.split(".")[0] in LIBRARIES):
        what = f"function {obj.get('config')!r}" if class_name == "function" else f"class {class_name!r}"
        return f"{what} comes from module {module!r}, not Keras: a custom object, which loading runs"
    registered = obj.get("registered_name")
    named_function = class_name == "function" and isinstance(registered, str)
    if registered not in (None, class_name) and not named_function:
        return f"{registered!r} is a custom object registered by its author, whose code loading runs"
    if class_name == "function":
        return builtin_function(obj.get("config"), library)
    if class_name in ("TFOpLambda", "SlicingOpLambda") and library_name == "tf_keras":
        return pure_tf_function(obj.get("config"))
    if library_name == "keras" and isinstance(module, str) and missing_ops_module(module):
        return (
            f"class {class_name!r} names module {module!r}, which Keras {library.__version__} does not "
            "have (the file was written by another Keras version, or not by Keras)"
        )
    if class_name in MODEL_CLASSES or builtin_class(class_name, module, library, library_name):
        return ""
    return f"{class_name!r} is not a built-in Keras class (a custom object, whose code loading runs)"


def missing_ops_module(module: str) -> bool:
    """A Keras 3 ops module that the configuration names and this Keras does not have: a file problem,
    which importing it would report as a missing installation of Keras."""
    if not KERAS_OPS_MODULE.fullmatch(module):
        return False
    try:
        return importlib.util.find_spec(module) is None
    except ImportError:
        return True


def builtin_class(class_name: str, module: Any, library: Any, library_name: str) -> bool:
    for namespace in NAMESPACES[library_name]:
        found = getattr(getattr(library, namespace, None), class_name, None)
        if inspect.isclass(found) and found.__module__.split(".")[0] == library_name:
            return True
    # Keras 3 saves operations applied in a functional model (keras.ops.gelu) as classes of its ops modules.
    if library_name == "keras" and isinstance(module, str) and KERAS_OPS_MODULE.fullmatch(module):
        found = getattr(importlib.import_module(module), class_name, None)
        return inspect.isclass(found) and issubclass(found, library.Operation)
    return False


def builtin_function(name: Any, library: Any) -> str:
    """A function serialised by name (an activation): it must be one of Keras's activations."""
    if isinstance(name, str) and callable(getattr(library.activations, name, None)):
        return ""
    return f"function {name!r} is not a built-in Keras activation"


def pure_tf_function(config: Any) -> str:
    name = config.get("function") if isinstance(config, dict) else None
    if isinstance(name, str) and (name.startswith(PURE_TF_PREFIXES) or name in PURE_TF_FUNCTIONS):
        return ""
    return f"a TFOpLambda calls TensorFlow function {name!r}, not known to be free of side effects"
