"""Finding tensors whose values an ONNX model keeps outside its own bytes ("external data"), without
parsing the model: its protobuf wire format is walked where tensors can be, every other field skipped.

A tensor stored as external data names a file (`location`) that onnxruntime reads when it builds the
session, and for a model given as bytes it resolves that name against the process's working directory.
Such a file is neither in the private copy the scorer verified nor inside the version's directory: a
model naming `pyproject.toml` handed that file's bytes to any client as an output. So a served model's
tensors are all inside it, and a model with any tensor outside is refused (serve.snapshot, and
`nnsql models activate --repo`, which scores the version's check with the bytes it verified).

The walk needs no `onnx` package: ONNX's field numbers (onnx/onnx.proto) are stable by protobuf's rules.
"""

from __future__ import annotations

from collections.abc import Iterator

# message kinds, and the fields of each that hold messages where a tensor can be (onnx/onnx.proto)
MODEL, GRAPH, NODE, ATTRIBUTE, TENSOR, SPARSE, FUNCTION, TRAINING = range(8)
CHILDREN: dict[int, dict[int, int]] = {
    MODEL: {7: GRAPH, 20: TRAINING, 25: FUNCTION},  # graph, training_info, functions
    TRAINING: {1: GRAPH, 2: GRAPH},  # initialization, algorithm
    GRAPH: {1: NODE, 5: TENSOR, 15: SPARSE},  # node, initializer, sparse_initializer
    FUNCTION: {7: NODE, 11: ATTRIBUTE},  # node, attribute_proto (default values)
    NODE: {5: ATTRIBUTE},
    ATTRIBUTE: {5: TENSOR, 6: GRAPH, 10: TENSOR, 11: GRAPH, 22: SPARSE, 23: SPARSE},  # t g tensors graphs ...
    SPARSE: {1: TENSOR, 2: TENSOR},  # values, indices
    TENSOR: {},
}
EXTERNAL_DATA, DATA_LOCATION, EXTERNAL = 13, 14, 1  # TensorProto.external_data, .data_location, EXTERNAL
VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5


class Malformed(ValueError):
    """Bytes that are not a protobuf message."""


def external_data_problem(model: bytes, file_name: str) -> str | None:
    """Why the model cannot be used as the bytes it is, in one line: a tensor of it (an initializer, a
    constant, a subgraph's or a function's) keeps its values in another file, or the bytes are not a
    protobuf message. None: every tensor is inside."""
    try:
        external = holds_external_data(memoryview(model))
    except Malformed as error:
        return f"{file_name}: not an ONNX model ({error})"
    if external:
        return (
            f"{file_name} keeps tensor values in another file (external data); a served model must hold "
            "all its tensors (save it with onnx.save(model, path) in one file)"
        )
    return None


def holds_external_data(data: memoryview) -> bool:
    pending = [(MODEL, 0, len(data))]  # a stack, not recursion: a graph may nest graphs without end
    while pending:
        kind, start, end = pending.pop()
        for number, wire, value_start, value in fields(data, start, end):
            if kind == TENSOR and (
                number == EXTERNAL_DATA or (number == DATA_LOCATION and value == EXTERNAL)
            ):
                return True
            child = CHILDREN[kind].get(number)
            if child is not None and wire == LENGTH:
                pending.append((child, value_start, value_start + value))
    return False


def fields(data: memoryview, position: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """(field number, wire type, where a length-delimited value starts, the varint value or length)."""
    while position < end:
        key, position = varint(data, position, end)
        number, wire = key >> 3, key & 7
        value = 0
        if wire == VARINT:
            value, position = varint(data, position, end)
            start = position
        elif wire == LENGTH:
            value, position = varint(data, position, end)
            start = position
            position += value
        elif wire in (FIXED64, FIXED32):
            start = position
            position += 8 if wire == FIXED64 else 4
        else:
            raise Malformed(f"wire type {wire} at byte {position}")
        if position > end or number == 0:
            raise Malformed(f"a field runs past its message at byte {start}")
        yield number, wire, start, value


def varint(data: memoryview, position: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while position < end and shift < 64:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7
    raise Malformed(f"a number cut off at byte {position}")
