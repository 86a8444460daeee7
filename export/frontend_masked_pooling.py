"""GlobalAveragePooling1D over a masked sequence, lowered to primitives (Keras 3 and tf.keras alike).

Keras averages the unmasked steps only: sum(x_t · m_t) / sum(m_t), m_t = 1 for a kept step. A row whose
every step is masked gives 0/0 = NaN in Keras (both versions), and NaN here: `count_reciprocal` of a
count of 0 is NaN. GlobalMaxPooling1D ignores the mask in both versions (Keras 3 warns that it "destroys
the mask information"): its max runs over every step, padding included, so it needs nothing of its own.

The mask is recomputed as 0/1 values from what the step mask tests (a StepMask's own representation is
the target's business: DuckDB keeps the kept steps' indices): m_t = step(Σ_f |s_tf|), s the Masking
layer's input or Embedding's token indices.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from export import ir
from export.keras_frontend import Context, describe


def kept_steps(mask: ir.StepMask, ctx: Context, role: Callable[[str], str]) -> tuple[list[ir.Node], str]:
    """Nodes giving 1 for each kept step of `mask`'s sequence and 0 for a masked one; and their name."""
    source, steps = mask.inputs[0], mask.steps
    width = ctx.size_of(source) // steps
    nodes: list[ir.Node] = []
    total = source
    if width > 1:  # a step is kept when some feature is not 0: Σ|s| > 0
        magnitude = ir.ActivationNode(name=role("magnitude"), inputs=(source,), activation="abs")
        total = role("total")
        ones = ir.Weights(np.ones((width, 1)))
        nodes += [magnitude, ir.PatchDense(name=total, inputs=(magnitude.name,), kernel=ones, patches=steps)]
    elif any(spec.name == source and spec.dtype == "int32" for spec in ctx.specs):
        pass  # token indices are never negative: kept where the token is above 0
    else:
        total = role("magnitude")
        nodes.append(ir.ActivationNode(name=total, inputs=(source,), activation="abs"))
    nodes.append(ir.ActivationNode(name=role("kept"), inputs=(total,), activation="step"))
    return nodes, role("kept")


def masked_average(layer: Any, x: str, ctx: Context, steps: int, channels: int) -> tuple[ir.Node, ...]:
    """The mean of the kept steps of a (steps, channels) sequence, per channel."""
    name, source = ctx.node_name(layer), describe(layer)
    mask = ctx.built_node(ctx.masks[x])
    assert isinstance(mask, ir.StepMask), f"{ctx.masks[x]} is not a step mask"

    def role(suffix: str) -> str:
        return ctx.name_for(f"{name}_{suffix}")

    nodes, kept = kept_steps(mask, ctx, role)
    each = np.repeat(np.arange(steps), channels)  # step t's flag for each of its channels
    by_channel = np.arange(steps * channels).reshape(steps, channels).T.ravel()  # channel-major
    nodes += [
        ir.Gather(name=role("kept_each"), inputs=(kept,), indices=ir.Weights(each)),
        ir.Binary(name=role("masked"), inputs=(x, role("kept_each")), op="mul"),
        ir.Gather(name=role("by_channel"), inputs=(role("masked"),), indices=ir.Weights(by_channel)),
        ir.PatchDense(
            name=role("sum"),
            inputs=(role("by_channel"),),
            kernel=ir.Weights(np.ones((steps, 1))),
            patches=channels,
        ),
        # the count of kept steps for every channel, and its reciprocal (NaN for none)
        ir.Dense(
            name=role("per_count"),
            inputs=(kept,),
            kernel=ir.Weights(np.ones((steps, channels))),
            activation="count_reciprocal",
        ),
        ir.Binary(name=name, inputs=(role("sum"), role("per_count")), op="mul"),
    ]
    return tuple(replace(node, source=source) for node in nodes)
