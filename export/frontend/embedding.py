"""Keras's Embedding: a Lookup of the rows its integer input selects; with `mask_zero`, a step mask that
marks the steps whose index is not 0, flowing with the embedded sequence (Keras's semantics)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir import graph as ir
from .base import Context, converts, describe, input_tensor


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


@converts(
    "CategoryEncoding",
    produces="Lookup+Gather+PatchDense",
    refuses="output_mode='int' or 'tf_idf', sparse, count_weights, inputs that are not integer (n,) columns",
)
def _category_encoding(layer: Any, inputs: tuple[str, ...], ctx: Context) -> ir.Node | tuple[ir.Node, ...]:
    """Integer categories below num_tokens, as a Lookup of the identity table's rows: one_hot gives each
    value's row (one row for a single value, else one per value); count sums the rows of a bag of values
    (a Gather that lays them out token by token, a PatchDense of ones) and multi_hot is that count's step
    (1 where above 0)."""
    config = layer.get_config()
    tensor = input_tensor(layer)
    shape = tuple(tensor.shape[1:])
    mode, tokens = config["output_mode"], int(config["num_tokens"])
    if "int" not in str(tensor.dtype) or len(shape) != 1 or shape[0] is None:
        raise ctx.unsupported(layer, f"a {tensor.dtype} input of shape {shape} (only integer (n,) inputs)")
    if mode not in ("one_hot", "multi_hot", "count") or config.get("sparse"):
        raise ctx.unsupported(layer, f"output_mode={mode!r}, sparse={config.get('sparse')}")
    if ctx.arguments.get("count_weights") is not None:
        raise ctx.unsupported(layer, "count_weights")
    name, source, values = ctx.node_name(layer), describe(layer), int(shape[0])
    bag = mode != "one_hot"
    rows = ir.Lookup(
        name=ctx.name_for(f"{name}_rows") if bag else name,
        inputs=inputs,
        table=ir.Weights(np.eye(tokens)),
        source=source,
    )
    if not bag:
        return rows
    by_token = np.arange(values * tokens).reshape(values, tokens).T.ravel()
    spread = ir.Gather(
        name=ctx.name_for(f"{name}_by_token"),
        inputs=(rows.name,),
        indices=ir.Weights(by_token),
        source=source,
    )
    total = ir.PatchDense(
        name=name,
        inputs=(spread.name,),
        kernel=ir.Weights(np.ones((values, 1))),
        activation="step" if mode == "multi_hot" else "linear",
        patches=tokens,
        source=source,
    )
    return rows, spread, total
