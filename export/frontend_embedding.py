"""Keras's Embedding: a Lookup of the rows its integer input selects; with `mask_zero`, a step mask that
marks the steps whose index is not 0, flowing with the embedded sequence (Keras's semantics)."""

from __future__ import annotations

from typing import Any

import numpy as np

from export import ir
from export.keras_frontend import Context, converts, describe, input_tensor


@converts("Embedding", produces="Lookup+StepMask")
def _embedding(layer: Any, inputs: tuple[str, ...], ctx: Context) -> ir.Node | tuple[ir.Node, ...]:
    shape = tuple(input_tensor(layer).shape[1:])
    if len(shape) != 1 or shape[0] is None:
        raise ctx.unsupported(layer, f"input of shape {shape} (only a fixed number of indices)")
    table = np.asarray(layer.embeddings.numpy())
    name = ctx.node_name(layer)
    lookup = ir.Lookup(name=name, inputs=inputs, table=ir.Weights(table), source=describe(layer))
    if not layer.get_config().get("mask_zero", False):
        return lookup
    mask = ir.StepMask(
        name=ctx.name_for(f"{name}_steps"), inputs=inputs, steps=int(shape[0]), source=describe(layer)
    )
    ctx.masks[lookup.name] = mask.name
    return mask, lookup
