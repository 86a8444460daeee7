"""Keras's answers on numpy rows, computed as `model.predict` computes them but without tracing.

`model.predict` compiles the model into a graph (a tf.function) before it scores anything, and compiles again
for every new batch shape, every new model (the float64 rebuild) and a partial last batch: on the exporter's
few hundred rows that tracing costs several times the arithmetic. Calling the model eagerly,
`model(x, training=False)`, is the same inference (Dropout and noise off, masks made by the model's own
call), so its values are those of `model.predict` up to float32 rounding of a different summation order.
Rows go through in chunks sized by the input, so a large convolutional network on 1,000 rows holds only
a chunk's activations at a time.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# Input values per chunk: ~1 MB of float32 input; a convolution's activations are tens of times that.
CHUNK_VALUES = 2**18
# Called eagerly, a recurrent layer runs its steps as a Python loop: beyond this many steps that loop costs
# more than tracing the model once (CERN's Inclusive Classifier, 801 steps: minutes instead of seconds), so
# such a model goes through `model.predict` (one trace, the steps in a graph loop).
EAGER_STEPS = 64


def run(model: Any, feeds: list[np.ndarray]) -> list[np.ndarray]:
    """Each of the model's outputs on the rows of `feeds` (one array per input, in the model's order),
    as numpy arrays of the model's own dtypes; floating-point feeds are cast to their input's dtype."""
    feeds = [cast(feed, tensor) for feed, tensor in zip(feeds, model.inputs, strict=True)]
    rows = len(feeds[0])
    step = chunk_rows(feeds)
    if rows and long_recurrence(model, feeds):
        return outputs(
            model, model.predict(feeds if len(feeds) > 1 else feeds[0], batch_size=step, verbose=0)
        )
    chunks = [call(model, [feed[start : start + step] for feed in feeds]) for start in range(0, rows, step)]
    if not chunks:  # no rows: one empty call gives the outputs' shapes
        chunks = [call(model, feeds)]
    return [np.concatenate(parts, axis=0) for parts in zip(*chunks, strict=True)]


def run_joined(model: Any, feeds: list[np.ndarray], dtype: Any = None) -> np.ndarray:
    """The model's outputs on `feeds` joined row by row (several outputs side by side, each flattened per
    row), in `dtype` (default: the outputs' own); one output keeps its shape."""
    outputs = run(model, feeds)
    if len(outputs) == 1:
        return np.asarray(outputs[0], dtype)
    return np.concatenate([np.asarray(o, dtype).reshape(len(o), -1) for o in outputs], axis=1)


def chunk_rows(feeds: list[np.ndarray]) -> int:
    """Rows per eager call: as many as keep a chunk's input values within CHUNK_VALUES, at least one."""
    per_row = sum(int(np.prod(feed.shape[1:], dtype=np.int64)) for feed in feeds)
    return max(1, CHUNK_VALUES // max(1, per_row))


def long_recurrence(model: Any, feeds: list[np.ndarray]) -> bool:
    """Whether the model holds a recurrent layer and a sequence feed longer than EAGER_STEPS steps."""
    import keras

    steps = max((feed.shape[1] for feed in feeds if feed.ndim >= 3), default=0)
    if steps <= EAGER_STEPS:
        return False
    return any(
        isinstance(layer, keras.layers.RNN | keras.layers.Bidirectional) for layer in all_layers(model)
    )


def all_layers(model: Any) -> list[Any]:
    """The model's layers, those of nested models and wrappers (TimeDistributed, Bidirectional) included."""
    found = []
    for layer in getattr(model, "layers", []):
        found.append(layer)
        found.extend(all_layers(layer))
        inner = getattr(layer, "layer", None) or getattr(layer, "forward_layer", None)
        if inner is not None:
            found.append(inner)
    return found


def call(model: Any, feeds: list[np.ndarray]) -> list[np.ndarray]:
    """One eager inference call; outputs as a list of numpy arrays whatever structure the model returns."""
    return outputs(model, model(feeds if len(feeds) > 1 else feeds[0], training=False))


def outputs(model: Any, result: Any) -> list[np.ndarray]:
    """A model's result (a tensor, a list, a dict by output name) as a list of numpy arrays."""
    if isinstance(result, dict):
        result = [result[name] for name in model.output_names]
    if not isinstance(result, list | tuple):
        result = [result]
    return [to_numpy(value) for value in result]


def to_numpy(value: Any) -> np.ndarray:
    numpy = getattr(value, "numpy", None)
    return np.asarray(numpy() if callable(numpy) else value)


def cast(feed: np.ndarray, tensor: Any) -> np.ndarray:
    """A floating-point feed in its input's floating-point dtype (as `model.predict` casts it); others
    (token indices) as they are."""
    feed = np.asarray(feed)
    dtype = str(getattr(tensor, "dtype", "float32")).removeprefix("<dtype: '").removesuffix("'>")
    if feed.dtype.kind != "f" or "float" not in dtype:
        return feed
    try:
        return feed.astype(np.dtype(dtype), copy=False)
    except TypeError:  # a dtype numpy lacks (bfloat16): the model casts it itself
        return feed
