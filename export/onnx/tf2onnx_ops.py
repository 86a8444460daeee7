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
