"""GlobalAveragePooling1D over a masked sequence, lowered to primitives (Keras 3 and tf.keras alike).

Keras averages the unmasked steps only: sum(x_t · m_t) / sum(m_t), m_t = 1 for a kept step. A row whose
every step is masked gives 0/0 = NaN in Keras (both versions), and NaN here: `count_reciprocal` of a
count of 0 is NaN. GlobalMaxPooling1D ignores the mask in both versions (Keras 3 warns that it "destroys
the mask information"): its max runs over every step, padding included, so it needs nothing of its own.

The step mask is a value of 1.0 per kept step and 0.0 per masked one on every target (ir.StepMask),
so the average reads it as it is.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..ir import graph as ir
from .base import Context, describe


def masked_average(layer: Any, x: str, ctx: Context, steps: int, channels: int) -> tuple[ir.Node, ...]:
    """The mean of the kept steps of a (steps, channels) sequence, per channel."""
    name, source, kept = ctx.node_name(layer), describe(layer), ctx.masks[x]

    def role(suffix: str) -> str:
        return ctx.name_for(f"{name}_{suffix}")

    each = np.repeat(np.arange(steps), channels)  # step t's flag for each of its channels
    by_channel = np.arange(steps * channels).reshape(steps, channels).T.ravel()  # channel-major
    nodes: list[ir.Node] = [
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
