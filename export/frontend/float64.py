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


def float_config(config: Any, dtype: str = "float64") -> Any:
    """The configuration with every floating-point dtype (a layer's policy, Keras 3's `DTypePolicy` or
    tf.keras's `Policy`, an input's dtype) `dtype`."""
    if isinstance(config, list):
        return [float_config(item, dtype) for item in config]
    if not isinstance(config, dict):
        return config
    result = {}
    for key, value in config.items():
        if key == "dtype" and isinstance(value, str) and value in FLOAT_DTYPES:
            result[key] = dtype
        elif key == "dtype" and isinstance(value, dict) and str(value.get("class_name")).endswith("Policy"):
            name = value.get("config", {}).get("name")
            result[key] = dtype if name in FLOAT_DTYPES else float_config(value, dtype)
        else:
            result[key] = float_config(value, dtype)
    return result


def float64_model(model: Any) -> Any:
    """The same architecture and weights, computing in float64; one line when Keras cannot rebuild it."""
    try:
        return rebuilt_in(model, "float64")
    except Exception as error:  # Keras raises many types for a configuration it cannot rebuild
        raise ExportError(
            f"cannot rebuild the model in float64 for the parity check: {first_line(error)}"
        ) from None


def float32_model(model: Any) -> Any:
    """The same architecture and weights computing in float32, for `--as-float32`: a model trained in
    mixed precision, whose layers compute in float16 or bfloat16, as a float32 one."""
    try:
        return rebuilt_in(model, "float32")
    except Exception as error:  # Keras raises many types for a configuration it cannot rebuild
        raise ExportError(
            f"cannot rebuild the model in float32 (--as-float32): {first_line(error)}"
        ) from None


def rebuilt_in(model: Any, dtype: str) -> Any:
    """The model rebuilt from its configuration with every floating-point dtype `dtype`, its weights
    copied (exactly, from float32 or narrower into float32 or float64)."""
    if type(model).__module__.startswith("tf_keras"):
        import tf_keras

        from .model_code import legacy_tf_activations

        rebuilt = tf_keras.models.model_from_config(
            {"class_name": type(model).__name__, "config": float_config(model.get_config(), dtype)},
            custom_objects=legacy_tf_activations(),
        )
    else:
        rebuilt = type(model).from_config(float_config(model.get_config(), dtype))
        if not rebuilt.built:
            rebuilt.build(model.inputs[0].shape if len(model.inputs) == 1 else None)
    rebuilt.set_weights([np.asarray(w, dtype) for w in model.get_weights()])
    for layer in rebuilt._flatten_layers(include_self=False):
        if hasattr(layer, "finalize_state"):  # state derived from weights (Normalization's statistics)
            layer.finalize_state()
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
