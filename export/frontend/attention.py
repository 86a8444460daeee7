"""Keras's attention layers lowered to primitives: products of two values (export/ir/builder.py), a grouped
softmax and masks held as 0/1 values per step.

Attention (Luong), for query q (Tq, d), value v (Tv, dv) and key k (Tv, d), k = v when not given:
    dot:    scores[i, j] = scale · Σ_c q[i, c]·k[j, c]
    concat: scores[i, j] = w · Σ_c tanh(scale · (q[i, c] + k[j, c]))
scale is the trained `scale` with use_scale, else 1; w the trained concat_score_weight. Masked scores (a
value step whose mask is 0, or j > i with use_causal_mask) are replaced by −1e9, then
weights = softmax over j, output[i] = Σ_j weights[i, j]·v[j], zeroed where the query's mask is 0; the
query's mask flows on. (Keras subtracts 1e9 from masked scores; in float32 that is −1e9 for any score
below 32 in size, and a row with every score masked gets equal weights either way.)

MultiHeadAttention: per head n, Q = x_q·W_q[:, n] + b_q[n] (key_dim values per step), K and V likewise from
the key and value inputs, scores = Q·Kᵀ / sqrt(key_dim), masked as above by the attention mask (query mask
× value mask × key mask × causal; an attention_mask argument is refused), softmax over the value steps,
O_n = weights·V; the output is Σ_n O_n·W_o[n] + b_o. The query's mask flows on. Masked positions are
replaced by −1e9 there too (Keras's dot_product_attention does so), so a fully masked query step attends
to every value step equally and its output is not zero.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir import graph as ir
from ..ir.builder import Builder
from .base import Context, Outputs, converts, describe

MASKED = -1.0e9  # the score of a masked position, as Keras's attention writes it
FLOOR = -700.0  # softmax's exp arguments are kept above this (their weight is below 1e-304 anyway)


def shapes_of(layer: Any, ctx: Context, count: int) -> list[tuple[int, int]]:
    """The shapes of the first `count` tensors of this call, each (steps, features)."""
    shapes = [tuple(tensor.shape[1:]) for tensor in ctx.tensors[:count]]
    if any(len(shape) != 2 or None in shape for shape in shapes):
        raise ctx.unsupported(layer, f"inputs of shapes {shapes} (only fixed (steps, features) sequences)")
    return [(int(shape[0]), int(shape[1])) for shape in shapes]


def masked_scores(
    build: Builder,
    scores: str,
    steps: tuple[int, int],
    masks: tuple[str | None, ...],
    causal: bool,
    heads: int = 1,
) -> str:
    """Scores (heads, Tq, Tk) with the masked positions replaced by −1e9: kept[n, i, j] = the product of
    `masks` (the query's mask, read at i, then value and key masks, read at j; values 0 or 1), then
    scores·kept + (kept − 1)·1e9; causal positions j > i by an Affine of constants."""
    tq, tk = steps
    kept = None
    rows = np.tile(np.repeat(np.arange(tq), tk), heads)
    columns = np.tile(np.arange(tk), tq * heads)
    for index, mask in enumerate(masks):
        if mask is None:
            continue
        spread = build.gather(f"kept{index}", mask, rows if index == 0 else columns)
        kept = spread if kept is None else build.binary(f"kept_to{index}", "mul", kept, spread)
    size = heads * tq * tk
    if kept is not None:
        zeroed = build.binary("kept_scores", "mul", scores, kept)
        penalty = build.affine("penalty", kept, np.full(size, -MASKED), np.full(size, MASKED))
        scores = build.binary("masked_scores", "add", zeroed, penalty)
    if causal:
        allowed = np.tile(np.tril(np.ones((tq, tk))).ravel(), heads)  # j ≤ i, from the first step of each
        scores = build.affine("causal", scores, allowed, (allowed - 1.0) * -MASKED)
    return scores


def attended(
    build: Builder, scores: str, value: str, steps: tuple[int, int], width: int, role: str
) -> tuple[str, str]:
    """softmax over each row of the (Tq, Tv) scores, and the weights times the value (Tv, width):
    (weights, output of shape (Tq, width))."""
    tq, tv = steps
    weights = build.softmax("weights", scores, tq * tv, tv, floor=FLOOR)
    return weights, build.product(role, weights, (tq, tv), 1, value, (tv, width), 0)[0]


def query_masked(build: Builder, output: str, query_mask: str | None, steps: int, width: int) -> str:
    """The output with the steps the query's mask drops set to 0 (the layer's value)."""
    if query_mask is None:
        return output
    each = build.spread("query_kept", query_mask, steps, width)
    return build.binary("", "mul", output, each)


@converts(
    "Attention",
    produces="Gather+Binary+PatchDense+Affine+ActivationNode+GroupMax",
    refuses="inputs other than (steps, features) sequences",
)
def _attention(layer: Any, inputs: tuple[str, ...], ctx: Context) -> tuple[ir.Node, ...] | Outputs:
    config = layer.get_config()
    shapes = shapes_of(layer, ctx, len(inputs))
    (tq, dim), (tv, width) = shapes[0], shapes[1]
    query, value, key = inputs[0], inputs[1], inputs[2] if len(inputs) > 2 else inputs[1]
    if (shapes[2] if len(inputs) > 2 else shapes[1])[1] != dim and config.get("score_mode") == "dot":
        raise ctx.unsupported(layer, f"query and key of widths {dim} and {shapes[-1][1]}")
    build = Builder(ctx.name_for, ctx.node_name(layer), describe(layer))
    scale = float(np.asarray(layer.scale.numpy())) if config.get("use_scale") else 1.0
    if config.get("score_mode", "dot") == "dot":
        scores, _ = build.product("raw_scores", query, (tq, dim), 1, key, (tv, dim), 1)
        if scale != 1.0:
            scores = build.affine("scores", scores, np.full(tq * tv, scale))
    else:
        scores = concat_scores(build, query, key, (tq, tv), dim, scale, layer)
    causal = bool(ctx.arguments.get("use_causal_mask") or config.get("causal"))
    query_mask = ctx.masks.get(query)
    scores = masked_scores(build, scores, (tq, tv), (None, ctx.masks.get(value)), causal)
    weights, output = attended(build, scores, value, (tq, tv), width, "attended" if query_mask else "")
    output = query_masked(build, output, query_mask, tq, width)
    if query_mask is not None:
        ctx.masks[output] = query_mask
    if ctx.arguments.get("return_attention_scores"):
        return Outputs(nodes=tuple(build.nodes), values=(output, weights))
    return tuple(build.nodes)


def concat_scores(
    build: Builder, query: str, key: str, steps: tuple[int, int], dim: int, scale: float, layer: Any
) -> str:
    """w · Σ_c tanh(scale · (q[i, c] + k[j, c])) for every pair (i, j)."""
    tq, tk = steps
    queries = build.gather("query_pairs", query, np.repeat(np.arange(tq * dim).reshape(tq, 1, dim), tk, 1))
    keys = build.gather("key_pairs", key, np.tile(np.arange(tk * dim).reshape(1, tk, dim), (tq, 1, 1)))
    total = build.binary("pair_sums", "add", queries, keys)
    if scale != 1.0:
        total = build.affine("pair_scaled", total, np.full(tq * tk * dim, scale))
    bent = build.activate("pair_tanh", total, "tanh")
    weight = float(np.asarray(layer.concat_score_weight.numpy()))
    return build.patches("raw_scores", bent, np.full((dim, 1), weight), tq * tk)


@converts(
    "MultiHeadAttention",
    produces="PatchDense+Gather+Binary+Affine+ActivationNode+GroupMax",
    refuses="an attention_mask tensor, attention_axes, sliding_window, use_gate, a multi-axis output_shape",
)
def _multi_head_attention(layer: Any, inputs: tuple[str, ...], ctx: Context) -> tuple[ir.Node, ...] | Outputs:
    config = layer.get_config()
    refused = {
        "attention_axes": config.get("attention_axes") not in (None, [1], (1,), 1, [-2], (-2,)),
        "sliding_window": config.get("sliding_window") is not None,
        "use_gate": bool(config.get("use_gate")),
        "output_shape": isinstance(config.get("output_shape"), list | tuple)
        and len(config["output_shape"]) != 1,
        "attention_mask": ctx.arguments.get("attention_mask") is not None,
    }
    if any(refused.values()):
        raise ctx.unsupported(
            layer,
            ", ".join(
                f"{key}={config[key]!r}" if key in config else f"an {key} tensor"
                for key, bad in refused.items()
                if bad
            ),
        )
    query, value, key = inputs[0], inputs[1], inputs[2] if len(inputs) > 2 else inputs[1]
    heads, key_dim = int(config["num_heads"]), int(config["key_dim"])
    build = Builder(ctx.name_for, ctx.node_name(layer), describe(layer))
    (q_steps, _), (k_steps, _) = shapes_of(layer, ctx, 2)
    scale = 1.0 / np.sqrt(float(key_dim))
    q = projected(build, "query", query, layer._query_dense, q_steps, scale)
    k = projected(build, "key", key, layer._key_dense, k_steps)
    v = projected(build, "value", value, layer._value_dense, k_steps)
    value_dim = layer._value_dense.kernel.shape[-1]
    scores, _ = build.product(
        "raw_scores", q, (q_steps, heads, key_dim), 2, k, (k_steps, heads, key_dim), 2, batch=(1, 1)
    )
    query_mask = ctx.masks.get(query)
    masks = (query_mask, ctx.masks.get(value), ctx.masks.get(key) if key != value else None)
    causal = bool(ctx.arguments.get("use_causal_mask"))
    scores = masked_scores(build, scores, (q_steps, k_steps), masks, causal, heads)
    weights = build.softmax("weights", scores, heads * q_steps * k_steps, k_steps, floor=FLOOR)
    per_head, _ = build.product(
        "per_head", weights, (heads, q_steps, k_steps), 2, v, (k_steps, heads, value_dim), 0, batch=(0, 1)
    )
    by_step = build.gather("by_step", per_head, moved_to_steps(heads, q_steps, value_dim))
    dense = layer._output_dense
    kernel = np.asarray(dense.kernel.numpy(), dtype=np.float64)
    bias = np.asarray(dense.bias.numpy()) if dense.bias is not None else None
    build.patches("", by_step, kernel.reshape(heads * value_dim, -1), q_steps, bias)
    if query_mask is not None:
        ctx.masks[build.name] = query_mask
    if ctx.arguments.get("return_attention_scores"):
        return Outputs(nodes=tuple(build.nodes), values=(build.name, weights))
    return tuple(build.nodes)


def projected(build: Builder, role: str, x: str, dense: Any, steps: int, scale: float = 1.0) -> str:
    """An EinsumDense of MultiHeadAttention over each step: x·W + b with W (features, heads, dim), giving
    (steps, heads, dim), times `scale` (the query's 1/sqrt(key_dim), folded into W and b)."""
    kernel = np.asarray(dense.kernel.numpy(), dtype=np.float64)
    bias = None if dense.bias is None else np.asarray(dense.bias.numpy(), dtype=np.float64).ravel() * scale
    return build.patches(role, x, kernel.reshape(kernel.shape[0], -1) * scale, steps, bias)


def moved_to_steps(heads: int, steps: int, width: int) -> np.ndarray:
    """Gather indices from (heads, steps, width) to (steps, heads, width)."""
    return np.arange(heads * steps * width).reshape(heads, steps, width).transpose(1, 0, 2).ravel()
