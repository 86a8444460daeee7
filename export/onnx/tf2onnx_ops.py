"""TensorFlow ops tf2onnx does not convert, taught to it before Keras's ONNX exporter runs.

Erfc: Keras's exact gelu computes x·erfc(−x/√2)/2, and tf2onnx (1.17) has no Erfc handler. ONNX has Erf,
so erfc(x) is written 1 − erf(x): the node becomes an Erf followed by a Sub from 1.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def register() -> None:
    """Add the handlers to tf2onnx's registry (idempotent: a second registration replaces the first)."""
    from tf2onnx import utils
    from tf2onnx.handler import tf_op

    @tf_op("Erfc")
    class Erfc:
        @classmethod
        def version_9(cls, ctx: Any, node: Any, **kwargs: Any) -> None:
            node.type = "Erf"
            dtype = utils.map_onnx_to_numpy_type(ctx.get_dtype(node.output[0]))
            one = ctx.make_const(utils.make_name(f"{node.name}_one"), np.array(1, dtype=dtype))
            ctx.insert_new_node_on_output(
                "Sub",
                node.output[0],
                name=utils.make_name(f"{node.name}_erfc"),
                inputs=[one.output[0], node.output[0]],
            )


def fix_transposed_padding(graph: Any) -> None:
    """tf2onnx writes a ConvTranspose whose TensorFlow output is longer than the full transposed
    convolution (Conv2DTranspose with strides above the kernel size, or with output_padding) with negative
    end pads, which onnxruntime refuses. ONNX says the same with output_padding: extra positions at the end
    of each axis, computed from the bias alone. Negative end pads become that output_padding (an ONNX
    output_padding below the stride), in place."""
    for node in graph.graph.node:
        if node.op_type != "ConvTranspose":
            continue
        attributes = {attribute.name: attribute for attribute in node.attribute}
        pads = attributes.get("pads")
        if pads is None or min(pads.ints, default=0) >= 0:
            continue
        axes = len(pads.ints) // 2
        begin, end = list(pads.ints[:axes]), list(pads.ints[axes:])
        if min(begin) < 0:
            continue  # not a case this rewrite knows; onnxruntime's refusal stands
        extra = [max(-pad, 0) for pad in end]
        pads.ints[:] = begin + [max(pad, 0) for pad in end]
        from onnx import helper

        existing = attributes.get("output_padding")
        if existing is not None:
            extra = [a + b for a, b in zip(existing.ints, extra, strict=True)]
            node.attribute.remove(existing)
        node.attribute.append(helper.make_attribute("output_padding", extra))
