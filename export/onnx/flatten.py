"""Wrapper graphs that put an ONNX model into the form a stricter runtime takes, written in ONNX ahead of
(or after) the converted model, never by converting it a second way.

Oracle's in-database ONNX Runtime scores non-image models with one 2-D input `[batch, n]`. `flatten_inputs`
gives any model with fixed input shapes that form: one float input `features` whose row is every original
input flattened row-major, one after the other; per original input a Slice takes its columns and a Reshape
(and, for integer inputs such as token indices, a Cast) restores its shape under its original name, which
the model's nodes still read. `two_class_output` turns a single sigmoid probability p into the two columns
[1 − p, p] that a classification scorer expects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ExportError

FEATURES = "features"
PREFIX = "nnsql_wrapper_"


@dataclass(frozen=True)
class Segment:
    """Where one original input sits in the flat row: columns [offset, offset + size)."""

    name: str  # the input's name in the model
    shape: tuple[int, ...]  # without the batch dimension
    offset: int
    elem_type: int  # onnx.TensorProto data type

    @property
    def size(self) -> int:
        return int(np.prod(self.shape)) if self.shape else 1


def fixed_shape(value_info, target: str) -> tuple[int, ...]:
    """The input's shape without the batch dimension; a variable dimension cannot be flattened."""
    dims = value_info.type.tensor_type.shape.dim[1:]
    if not all(d.HasField("dim_value") for d in dims):
        raise ExportError(
            f"input '{value_info.name}' has a variable dimension: {target} needs fixed shapes "
            "(declare them in keras.Input, e.g. shape=(801, 19))"
        )
    return tuple(int(d.dim_value) for d in dims)


def segments(model, target: str) -> list[Segment]:
    result, offset = [], 0
    for value_info in model.graph.input:
        shape = fixed_shape(value_info, target)
        segment = Segment(value_info.name, shape, offset, value_info.type.tensor_type.elem_type)
        result.append(segment)
        offset += segment.size
    return result


def is_flat_float(model) -> bool:
    """One float input of shape [batch, n] already, under the name the scorers feed."""
    import onnx

    inputs = model.graph.input
    if len(inputs) != 1 or inputs[0].name != FEATURES:
        return False
    tensor = inputs[0].type.tensor_type
    return tensor.elem_type == onnx.TensorProto.FLOAT and len(tensor.shape.dim) == 2


def flatten_inputs(model: Any, target: str) -> tuple[Any, list[Segment]]:
    """The model with one input [batch, n] (unchanged if it has that form already), and the layout."""
    import onnx
    from onnx import helper, numpy_helper

    layout = segments(model, target)
    if is_flat_float(model):
        return model, layout
    graph = model.graph
    total = sum(segment.size for segment in layout)
    nodes, constants = [], []

    def constant(name: str, values: list[int]) -> str:
        constants.append(numpy_helper.from_array(np.array(values, dtype=np.int64), PREFIX + name))
        return PREFIX + name

    axes = constant("axes", [1])
    for index, segment in enumerate(layout):
        start = constant(f"start_{index}", [segment.offset])
        stop = constant(f"stop_{index}", [segment.offset + segment.size])
        shape = constant(f"shape_{index}", [-1, *segment.shape])
        flat, shaped = f"{PREFIX}flat_{index}", f"{PREFIX}shaped_{index}"
        is_float = segment.elem_type == onnx.TensorProto.FLOAT
        nodes.append(helper.make_node("Slice", [FEATURES, start, stop, axes], [flat], name=flat))
        nodes.append(
            helper.make_node("Reshape", [flat, shape], [segment.name if is_float else shaped], name=shaped)
        )
        if not is_float:  # integer inputs (token indices) arrive as whole float values
            cast = f"{PREFIX}cast_{index}"
            nodes.append(helper.make_node("Cast", [shaped], [segment.name], to=segment.elem_type, name=cast))
    if any(node.name == FEATURES or FEATURES in node.output for node in graph.node):
        raise ExportError(f"the model already has a value named '{FEATURES}'; rename that layer")
    new_input = helper.make_tensor_value_info(FEATURES, onnx.TensorProto.FLOAT, ["batch", total])
    wrapped = helper.make_graph(
        [*nodes, *graph.node],
        graph.name,
        [new_input],
        list(graph.output),
        [*constants, *graph.initializer],
        value_info=list(graph.value_info),
    )
    result = helper.make_model(wrapped, opset_imports=list(model.opset_import), producer_name="nnsql")
    result.ir_version = model.ir_version
    onnx.checker.check_model(result)
    return result, layout


def flat_rows(inputs: dict[str, np.ndarray], layout: list[Segment]) -> np.ndarray:
    """Rows in the flat form: each input flattened row-major, one after the other (float32)."""
    rows = len(inputs[layout[0].name])
    return np.concatenate(
        [np.asarray(inputs[s.name], dtype=np.float32).reshape(rows, s.size) for s in layout], axis=1
    )


def producer(model, value: str):
    """The node computing `value`, looking through Identity nodes; None for an input or initializer."""
    by_output = {output: node for node in model.graph.node for output in node.output}
    node = by_output.get(value)
    while node is not None and node.op_type == "Identity":
        node = by_output.get(node.input[0])
    return node


def two_class_output(model: Any, output: str) -> Any:
    """`output` (one sigmoid probability p per row) replaced by [1 − p, p], under the same name."""
    import onnx
    from onnx import helper, numpy_helper

    graph = model.graph
    inner = PREFIX + "positive"
    for node in graph.node:
        node.output[:] = [inner if name == output else name for name in node.output]
    one = numpy_helper.from_array(np.array(1.0, dtype=np.float32), PREFIX + "one")
    negative = PREFIX + "negative"
    graph.initializer.append(one)
    graph.node.append(helper.make_node("Sub", [one.name, inner], [negative], name=negative))
    graph.node.append(helper.make_node("Concat", [negative, inner], [output], axis=1, name=PREFIX + "two"))
    for value_info in graph.output:
        if value_info.name == output:
            value_info.type.tensor_type.shape.dim[-1].dim_value = 2
    onnx.checker.check_model(model)
    return model
