"""Keras itself in float64: the reference the parity gate compares a target with where float32 is not enough.

A float32 Keras model's answer on a row of raw magnitudes (physics features of 1e4) is off from the exact
answer by its own rounding, more than 1e-5 on some rows; comparing a target with it there would judge the
target by Keras's rounding. So the gate rebuilds the same architecture from the model's configuration with
every floating-point layer in float64, copies the float32 weights into it exactly (float32 → float64 loses
nothing), and runs that. It shares nothing with the exporter's IR: a front-end bug that shows only at large
magnitudes shows here as a disagreement.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import ExportError
from . import keras_run
from .model_file import first_line

# The rebuilt model's predictions, several outputs joined row by row, for inputs in the model's order.
Predictor = Callable[[list[np.ndarray]], np.ndarray]
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "mixed_float16", "mixed_bfloat16")


def float64_config(config: Any) -> Any:
    """The configuration with every floating-point dtype (a layer's policy, an input's dtype) float64."""
    if isinstance(config, list):
        return [float64_config(item) for item in config]
    if not isinstance(config, dict):
        return config
    result = {}
    for key, value in config.items():
        if key == "dtype" and isinstance(value, str) and value in FLOAT_DTYPES:
            result[key] = "float64"
        elif key == "dtype" and isinstance(value, dict) and "DTypePolicy" in str(value.get("class_name")):
            name = value.get("config", {}).get("name")
            result[key] = "float64" if name in FLOAT_DTYPES else float64_config(value)
        else:
            result[key] = float64_config(value)
    return result


def float64_model(model: Any) -> Any:
    """The same architecture and weights, computing in float64; one line when Keras cannot rebuild it."""
    try:
        if type(model).__module__.startswith("tf_keras"):
            import tf_keras

            from .model_code import legacy_tf_activations

            rebuilt = tf_keras.models.model_from_config(
                {"class_name": type(model).__name__, "config": float64_config(model.get_config())},
                custom_objects=legacy_tf_activations(),
            )
        else:
            rebuilt = type(model).from_config(float64_config(model.get_config()))
            if not rebuilt.built:
                rebuilt.build(model.inputs[0].shape if len(model.inputs) == 1 else None)
        rebuilt.set_weights([np.asarray(w, np.float64) for w in model.get_weights()])
        for layer in rebuilt._flatten_layers(include_self=False):
            if hasattr(layer, "finalize_state"):  # state derived from weights (Normalization's statistics)
                layer.finalize_state()
    except Exception as error:  # Keras raises many types for a configuration it cannot rebuild
        raise ExportError(
            f"cannot rebuild the model in float64 for the parity check: {first_line(error)}"
        ) from None
    return rebuilt


def predictor(model: Any) -> Predictor:
    """A function from input rows to the float64 model's joined predictions (built on first use); it
    raises ExportError, in one line, when Keras cannot rebuild or run the model in float64."""
    built: list[Any] = []

    def predict(feeds: list[np.ndarray]) -> np.ndarray:
        if not built:
            built.append(float64_model(model))
        rebuilt = built[0]
        try:
            predicted = keras_run.run(rebuilt, feeds)  # float feeds cast to the rebuilt float64 inputs
        except Exception as error:  # TensorFlow lacks a float64 kernel for a few ops
            raise ExportError(f"Keras cannot run the model in float64 ({type(error).__name__})") from None
        return np.concatenate([np.asarray(p, np.float64).reshape(len(p), -1) for p in predicted], axis=1)

    return predict
