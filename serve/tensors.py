"""Tensors in and out of HTTP: KServe V2 / Open Inference Protocol (JSON and the binary tensor data
extension) and TF Serving REST (row and columnar formats). Validation errors name the tensor and say
expected versus received."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson

from serve.errors import bad_request
from serve.repository import LoadedModel
from serve.validation import MAX_VARIABLE_LENGTH, V2_DATATYPES

HEADER_LENGTH = "Inference-Header-Content-Length"


def _reject_constant(name: str) -> float:
    raise bad_request(f"{name} is not a number: NaN and Infinity are rejected")


def check_structure(raw: bytes, max_lists: int) -> None:
    """Refuse, before parsing, a body with more lists than a tensor of the allowed size can need: a few MB
    of `[],[],...` would otherwise become hundreds of MB of Python objects."""
    if raw.count(b"[") > max_lists:
        raise bad_request(f"the body holds more than {max_lists} lists: that is no tensor this model takes")


def load_json(raw: bytes, max_lists: int | None = None) -> Any:
    """orjson on the hot path; on its refusal the standard parser says precisely what is wrong
    (NaN and Infinity, which orjson refuses as invalid JSON, are named as such). With `max_lists`, the
    structure is checked first (check_structure)."""
    if max_lists is not None:
        check_structure(raw, max_lists)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(raw, parse_constant=_reject_constant)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise bad_request(
            f"the body is not valid JSON: {error.msg if hasattr(error, 'msg') else error}"
        ) from None
    except RecursionError:
        raise bad_request("the body is nested too deeply to be a tensor") from None


def parameters(item: dict, where: str) -> dict:
    """The optional 'parameters' object of a request, input or output; anything else is a 400."""
    value = item.get("parameters")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise bad_request(f"'parameters' of {where} must be an object")
    return value


def check_numbers(name: str, data: Any) -> None:
    """Nested lists of JSON numbers only: strings ("0.5") and booleans are refused, as Triton does."""
    pending = [data]
    while pending:
        item = pending.pop()
        if type(item) is list:
            pending.extend(item)
        elif type(item) not in (int, float):
            raise bad_request(f"input {name!r}: data must be numbers, received {type(item).__name__} values")


def check_finite(name: str, values: np.ndarray) -> np.ndarray:
    if values.dtype.kind == "f" and not np.all(np.isfinite(values)):
        raise bad_request(f"input {name!r} holds NaN or infinite values")
    return values


def expected_shape(spec: dict, rows: int) -> list[int]:
    return [rows, *spec["shape"][1:]]


def matches(actual: Sequence[int], declared: Sequence[int]) -> bool:
    """Dimensions agree; a declared -1 matches any length from 1 to MAX_VARIABLE_LENGTH."""
    return len(actual) == len(declared) and all(
        a == d or (d == -1 and 0 < a <= MAX_VARIABLE_LENGTH) for a, d in zip(actual, declared, strict=True)
    )


def to_array(name: str, data: Any, dtype: np.dtype, shape: list[int]) -> np.ndarray:
    if not isinstance(data, np.ndarray):
        check_numbers(name, data)
    try:
        values = np.asarray(data, dtype=dtype)
    except (TypeError, ValueError, OverflowError):
        raise bad_request(f"input {name!r}: data must be numbers of the declared datatype") from None
    if -1 in shape:  # rows of a variable length: their own shape, checked against the declared one
        if not matches(values.shape, shape):
            raise bad_request(
                f"input {name!r}: expected shape {shape} (-1: any length), received {list(values.shape)}"
            )
        return values
    needed = math.prod(shape)  # Python integers: a huge declared shape cannot overflow
    if values.size != needed:
        raise bad_request(f"input {name!r}: shape {shape} needs {needed} values, received {values.size}")
    return values.reshape(shape)


def check_v2_shape(name: str, spec: dict, shape: Any) -> list[int]:
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        raise bad_request(f"input {name!r}: shape must be a list of non-negative integers")
    if not matches(shape[1:], spec["shape"][1:]) or shape[0] < 1:
        raise bad_request(f"input {name!r}: expected shape {['N', *spec['shape'][1:]]}, received {shape}")
    return shape


def decode_v2_inputs(request: dict, binary: bytes, model: LoadedModel) -> dict[str, np.ndarray]:
    tensors = request.get("inputs")
    if not isinstance(tensors, list) or not tensors:
        raise bad_request("'inputs' must be a non-empty list of tensors")
    parameters(request, "the request")
    feeds: dict[str, np.ndarray] = {}
    offset = 0
    for tensor in tensors:
        if not isinstance(tensor, dict) or not {"name", "shape", "datatype"} <= tensor.keys():
            raise bad_request("every input needs 'name', 'shape' and 'datatype'")
        name = tensor["name"]
        if not isinstance(name, str):
            raise bad_request("an input's 'name' must be a string")
        spec = next((s for s in model.inputs if s["name"] == name), None)
        if spec is None:
            raise bad_request(
                f"model {model.name} has no input {name!r}; inputs: {[s['name'] for s in model.inputs]}"
            )
        if tensor["datatype"] != spec["datatype"]:
            raise bad_request(
                f"input {name!r}: expected datatype {spec['datatype']}, received {tensor['datatype']}"
            )
        shape = check_v2_shape(name, spec, tensor["shape"])
        dtype = V2_DATATYPES[spec["datatype"]]
        size = parameters(tensor, f"input {name!r}").get("binary_data_size")
        if size is not None:
            check_binary_size(name, size, dtype, len(binary) - offset)
            values = to_array(name, np.frombuffer(binary[offset : offset + size], dtype=dtype), dtype, shape)
            offset += size
        elif "data" in tensor:
            values = to_array(name, tensor["data"], dtype, shape)
        else:
            raise bad_request(f"input {name!r}: give 'data' or parameters.binary_data_size")
        feeds[name] = check_finite(name, values)
    if offset != len(binary):
        raise bad_request(f"{len(binary) - offset} bytes of binary data follow the last input's tensor")
    missing = [s["name"] for s in model.inputs if s["name"] not in feeds]
    if missing:
        raise bad_request(f"missing input(s) {missing}")
    rows = {len(v) for v in feeds.values()}
    if len(rows) > 1:
        raise bad_request(f"inputs disagree on the batch size: {sorted(rows)}")
    return feeds


def check_binary_size(name: str, size: Any, dtype: np.dtype, available: int) -> None:
    if type(size) is not int or size < 0:
        raise bad_request(f"input {name!r}: binary_data_size must be a non-negative integer")
    if size % dtype.itemsize:
        raise bad_request(
            f"input {name!r}: binary_data_size {size} is not a multiple of {dtype.itemsize} bytes"
        )
    if size > available:
        raise bad_request(f"input {name!r}: binary_data_size {size} exceeds the binary data sent")


def split_v2_request(body: bytes, header_length: str | None, max_lists: int) -> tuple[dict, bytes]:
    """The JSON part and the binary part of a V2 request body."""
    if header_length is None:
        request = load_json(body, max_lists)
        binary = b""
    else:
        if not (header_length.isascii() and header_length.isdigit()) or int(header_length) > len(body):
            raise bad_request(
                f"{HEADER_LENGTH} must be the byte length of the JSON part, received {header_length!r}"
            )
        request = load_json(body[: int(header_length)], max_lists)
        binary = body[int(header_length) :]
    if not isinstance(request, dict):
        raise bad_request("the request must be a JSON object")
    return request, binary


def requested_outputs(request: dict, model: LoadedModel) -> list[tuple[str, bool]]:
    """(output name, as binary) pairs, in the order the client asked (all outputs by default)."""
    everything_binary = bool(parameters(request, "the request").get("binary_data_output", False))
    asked = request.get("outputs")
    names = [spec["name"] for spec in model.outputs]
    if not asked:
        return [(name, everything_binary) for name in names]
    result: list[tuple[str, bool]] = []
    for output in asked:
        name = output.get("name") if isinstance(output, dict) else None
        if name not in names:
            raise bad_request(f"model {model.name} has no output {name!r}; outputs: {names}")
        binary = parameters(output, f"output {name!r}").get("binary_data", everything_binary)
        result.append((str(name), bool(binary)))
    return result


def encode_v2_response(
    model: LoadedModel, request: dict, outputs: dict[str, np.ndarray]
) -> tuple[dict, bytes]:
    tensors, chunks = [], []
    for name, as_binary in requested_outputs(request, model):
        values = np.ascontiguousarray(outputs[name], dtype=np.float32)
        tensor: dict[str, Any] = {"name": name, "datatype": "FP32", "shape": list(values.shape)}
        if as_binary:
            raw = values.astype("<f4").tobytes()
            tensor["parameters"] = {"binary_data_size": len(raw)}
            chunks.append(raw)
        else:
            tensor["data"] = values.ravel().tolist()
        tensors.append(tensor)
    response = {"model_name": model.name, "model_version": str(model.version), "outputs": tensors}
    if "id" in request:
        response["id"] = request["id"]
    return response, b"".join(chunks)


def decode_tfserving(request: dict, model: LoadedModel) -> tuple[dict[str, np.ndarray], str]:
    """Feeds and the format ('row' for instances, 'columnar' for inputs)."""
    names = [s["name"] for s in model.inputs]
    if "instances" in request:
        instances = request["instances"]
        if not isinstance(instances, list) or not instances:
            raise bad_request("'instances' must be a non-empty list")
        if all(isinstance(i, dict) for i in instances):
            columns = {n: [i.get(n) for i in instances] for n in names}
        elif len(names) == 1:
            columns = {names[0]: instances}
        else:
            raise bad_request(f"this model has inputs {names}: send each instance as an object")
        form = "row"
    elif "inputs" in request:
        given = request["inputs"]
        if isinstance(given, dict):
            columns = given
        elif len(names) == 1:
            columns = {names[0]: given}
        else:
            raise bad_request(f"this model has inputs {names}: send 'inputs' as an object")
        form = "columnar"
    else:
        raise bad_request("send 'instances' (row format) or 'inputs' (columnar format)")
    feeds = {}
    for name in names:
        if columns.get(name) is None:
            raise bad_request(f"missing input {name!r}")
        spec = model.input_spec(name)
        rows = len(columns[name]) if isinstance(columns[name], list) else 0
        if rows < 1:
            raise bad_request(f"input {name!r}: expected a list of rows")
        dtype = V2_DATATYPES[spec["datatype"]]
        feeds[name] = check_finite(name, to_array(name, columns[name], dtype, expected_shape(spec, rows)))
    return feeds, form
