"""Tensors in and out of HTTP: KServe V2 / Open Inference Protocol (JSON and the binary tensor data
extension) and TF Serving REST (row and columnar formats). Validation errors name the tensor and say
expected versus received."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import simdjson

from . import classification
from .errors import ScoringError, bad_request, capped, echoed
from .jsonbody import check_values, document, loads
from .repository import LoadedModel
from .validation import MAX_VARIABLE_LENGTH, V2_DATATYPES

HEADER_LENGTH = "Inference-Header-Content-Length"
MAX_ID_CHARS = 256  # the request's "id", echoed in the answer
MAX_TEXT_CHARS = 4096  # a string among a request's parameters
MAX_NAME_BYTES = 256  # a tensor name a client sends that the model does not declare (UTF-8 bytes)
JsonList = (list, simdjson.Array)
JsonObject = (dict, simdjson.Object)


def has(item: Any, key: str) -> bool:
    """Whether the JSON object holds `key`. A simdjson object looks a key up by raising a C++ exception
    when it is missing (about 3 µs, against 0.1 µs for its list of keys): a V2 request misses several
    ("id", "parameters", "outputs") on every call."""
    return key in (item.keys() if isinstance(item, simdjson.Object) else item)


def load_json(raw: bytes, max_values: int | None = None) -> Any:
    """The body parsed by orjson, after the count of its values (serve.jsonbody) when a bound is given."""
    if max_values is not None:
        check_values(raw, max_values, "this model")
    return loads(raw)


def parameters(item: Any, where: str) -> dict:
    """The optional 'parameters' object of a request, input or output; anything else is a 400. Its
    strings are short (serve.jsonbody bounds the count of values, not their length)."""
    if not has(item, "parameters"):
        return {}
    value = item.get("parameters")
    if value is None:
        return {}
    if not isinstance(value, JsonObject):
        raise bad_request(f"'parameters' of {where} must be an object")
    found = value if isinstance(value, dict) else value.as_dict()
    refuse_shared_memory(found, where)
    for key, entry in found.items():
        if isinstance(entry, str) and len(entry) > MAX_TEXT_CHARS:
            raise too_long(f"parameter {capped(str(key), 40)!r} of {where}", len(entry), MAX_TEXT_CHARS)
    return found


def refuse_shared_memory(keys: Any, where: str) -> None:
    """A 400 for the shared-memory extension's parameters (`shared_memory_region` and its size and
    offset), which this server does not offer: the values would otherwise be read from `data`, or
    silently not be where the client put them."""
    named = sorted(str(key) for key in keys if str(key).startswith("shared_memory"))
    if named:
        raise bad_request(
            f"{where}: parameter {capped(named[0], 40)!r} asks for shared memory, which this server does"
            " not offer; send the values in the request (data, or binary data)"
        )


def too_long(what: str, length: int, limit: int) -> ScoringError:
    return ScoringError(f"{what} holds {length} characters; at most {limit} are accepted", 413)


def tensor_name(value: Any, what: str, declared: Sequence[str]) -> str:
    """The name a client gave an input or an output (`what`): a string. A name the model declares is
    taken whatever its length; any other is refused as unknown, in a message that shows its first
    characters escaped (serve.errors.echoed), and, beyond MAX_NAME_BYTES, as too long first."""
    if not isinstance(value, str):
        raise bad_request(f"{what}'s 'name' must be a string")
    if value in declared:
        return value
    size = len(value) if len(value) > MAX_NAME_BYTES else len(value.encode("utf-8", "surrogatepass"))
    if size > MAX_NAME_BYTES:
        raise bad_request(
            f"{what}'s name {echoed(value)} is over {MAX_NAME_BYTES} bytes: no tensor of this model has it"
        )
    return value


def request_id(request: Any) -> str | None:
    """The request's 'id', echoed in the answer: a short string (a long one would be kept and written
    back whole, beyond what the request's tensors may cost)."""
    if not has(request, "id"):
        return None
    value = request.get("id")
    if not isinstance(value, str):
        raise bad_request("'id' must be a string")
    if len(value) > MAX_ID_CHARS:
        raise too_long("'id'", len(value), MAX_ID_CHARS)
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


def check_tokens(model: LoadedModel, feeds: dict[str, np.ndarray]) -> None:
    """Inputs that hold token ids (the repository document's `token_inputs`: name → vocabulary size) take
    whole numbers below the vocabulary only, as the SQL targets' input checks do; anything else is a
    400 naming the input, the row, the position and the allowed range."""
    for name, size in model.metadata.get("token_inputs", {}).items():
        values = feeds.get(name)
        if values is None:
            continue
        wrong = (values < 0) | (values >= size) | (values != np.round(values))
        if wrong.any():
            row, *position = (int(i) for i in np.argwhere(wrong)[0])
            at = position[0] if len(position) == 1 else tuple(position)
            raise bad_request(
                f"input {name!r} holds token ids: row {row} position {at} holds "
                f"{values[row][tuple(position)]:g}, not a whole number from 0 to {size - 1}"
            )


def expected_shape(spec: dict, rows: int) -> list[int]:
    return [rows, *spec["shape"][1:]]


def matches(actual: Sequence[int], declared: Sequence[int]) -> bool:
    """Dimensions agree; a declared -1 matches any length from 1 to MAX_VARIABLE_LENGTH."""
    return len(actual) == len(declared) and all(
        a == d or (d == -1 and 0 < a <= MAX_VARIABLE_LENGTH) for a, d in zip(actual, declared, strict=True)
    )


# how simdjson exports a JSON list of numbers for each kind of V2 datatype (its buffer type, numpy's)
BUFFER_TYPES: dict[str, tuple[Literal["d", "i", "u"], str]] = {
    "f": ("d", "<f8"),
    "i": ("i", "<i8"),
    "u": ("u", "<u8"),
}


def numbers(name: str, data: Any, dtype: np.dtype, booleans: bool) -> np.ndarray:
    """A JSON list of numbers (nested or flat) as an array of `dtype`, without a Python loop over values:
    numpy converts Python lists in C, simdjson lists go straight from the parsed text. Strings, booleans
    and null are refused, as Triton does; `booleans` says whether a list may hold a boolean among numbers
    (numpy would read it as 1), which is then looked for value by value."""
    if isinstance(data, simdjson.Array):
        if dtype.kind not in BUFFER_TYPES:  # BOOL tensors: a small Python list
            return numbers(name, data.as_list(), dtype, booleans)
        exported, read_as = BUFFER_TYPES[dtype.kind]
        try:
            buffer = np.frombuffer(data.as_buffer(of_type=exported), read_as)
        except (TypeError, ValueError):  # other values than numbers; integers beyond 64 bits
            raise bad_request(
                f"input {name!r}: data must be {dtype_words(dtype)}, received other values"
            ) from None
        return fit(name, buffer, dtype)
    if booleans and dtype.kind != "b":
        check_numbers(name, data)
    try:
        values = np.asarray(data)
    except (TypeError, ValueError, OverflowError):
        raise bad_request(f"input {name!r}: data must be a regular nesting of numbers") from None
    if dtype.kind == "b" and values.dtype.kind != "b":
        raise bad_request(f"input {name!r}: data must be true or false")
    if dtype.kind != "b" and values.dtype.kind not in "iuf":
        raise bad_request(f"input {name!r}: data must be numbers, received {values.dtype.name} values")
    return fit(name, values, dtype)


def dtype_words(dtype: np.dtype) -> str:
    return "numbers" if dtype.kind == "f" else "integers"


def fit(name: str, values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """`values` as `dtype`: integers out of its range and floats for an integer type are refused, floats
    beyond the range of a narrower float type are named as such."""
    if values.dtype == dtype:
        return values
    if dtype.kind in "iu":
        if values.dtype.kind == "f":
            raise bad_request(f"input {name!r}: data must be integers for datatype {dtype.name}")
        limits = np.iinfo(dtype)
        if values.size and (values.min() < limits.min or values.max() > limits.max):
            raise bad_request(f"input {name!r}: a value is out of the range of {dtype.name}")
    if dtype.kind == "f" and values.dtype.kind == "f" and values.size:
        narrowed = values.astype(dtype)
        if not np.isfinite(narrowed).all() and np.isfinite(values).all():  # JSON holds no NaN: overflow
            raise bad_request(f"input {name!r}: a value is beyond the range of {dtype.name}")
        return narrowed
    return values.astype(dtype)


def to_array(
    name: str, data: Any, dtype: np.dtype, shape: list[int], exact: bool = False, booleans: bool = True
) -> np.ndarray:
    """The tensor of `shape` (-1: any length) from JSON data. V2 data may be nested or flat (the
    request's 'shape' says the shape, as in Triton); with `exact` (TF Serving) the nesting is the shape."""
    values = data if isinstance(data, np.ndarray) else numbers(name, data, dtype, booleans)
    if exact or -1 in shape:  # the nesting is the shape: checked against the declared one
        if not matches(values.shape, shape):
            needed = math.prod(shape)
            if -1 not in shape and values.size != needed:
                raise bad_request(
                    f"input {name!r}: shape {shape} needs {needed} values, received {values.size}"
                )
            raise bad_request(
                f"input {name!r}: expected shape {shape} (rows, then the input's own shape; -1: any "
                f"length), received {list(values.shape)}"
            )
        return values
    needed = math.prod(shape)  # Python integers: a huge declared shape cannot overflow
    if values.size != needed:
        raise bad_request(f"input {name!r}: shape {shape} needs {needed} values, received {values.size}")
    return values.reshape(shape)


def check_v2_shape(name: str, spec: dict, shape: Any) -> list[int]:
    if isinstance(shape, simdjson.Array):
        shape = shape.as_list() if len(shape) <= 32 else None  # no rank is that large
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        raise bad_request(f"input {name!r}: shape must be a list of non-negative integers")
    if not matches(shape[1:], spec["shape"][1:]) or shape[0] < 1:
        raise bad_request(f"input {name!r}: expected shape {['N', *spec['shape'][1:]]}, received {shape}")
    return shape


def decode_v2_inputs(request: Any, binary: bytes, model: LoadedModel) -> dict[str, np.ndarray]:
    """The feeds of a V2 request (a dict, or the simdjson document serve.jsonbody parsed)."""
    tensors = request.get("inputs")
    if not isinstance(tensors, JsonList) or not tensors:
        raise bad_request("'inputs' must be a non-empty list of tensors")
    request_id(request)
    parameters(request, "the request")
    feeds: dict[str, np.ndarray] = {}
    offset = 0
    for tensor in tensors:
        name, values, size = decode_v2_input(tensor, binary, offset, model)
        if name in feeds:
            raise bad_request(f"input {name!r} is given twice: send each input once")
        offset += size
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


def decode_v2_input(
    tensor: Any, binary: bytes, offset: int, model: LoadedModel
) -> tuple[str, np.ndarray, int]:
    """One input tensor: its name, its values, and the bytes of binary data it took."""
    if not isinstance(tensor, JsonObject) or not all(key in tensor for key in ("name", "shape", "datatype")):
        raise bad_request("every input needs 'name', 'shape' and 'datatype'")
    name = tensor_name(tensor.get("name"), "an input", [s["name"] for s in model.inputs])
    spec = next((s for s in model.inputs if s["name"] == name), None)
    if spec is None:
        raise bad_request(
            f"model {model.name} has no input {echoed(name)}; inputs: {[s['name'] for s in model.inputs]}"
        )
    datatype = tensor.get("datatype")
    if datatype != spec["datatype"]:
        raise bad_request(f"input {name!r}: expected datatype {spec['datatype']}, received {datatype}")
    shape = check_v2_shape(name, spec, tensor.get("shape"))
    dtype = V2_DATATYPES[spec["datatype"]]
    size = parameters(tensor, f"input {name!r}").get("binary_data_size")
    if size is not None and "data" in tensor:  # as Triton: which of the two is the tensor is not guessed
        raise bad_request(f"input {name!r}: give 'data' or parameters.binary_data_size, not both")
    if size is not None:
        check_binary_size(name, size, dtype, len(binary) - offset)
        return (
            name,
            to_array(name, np.frombuffer(binary[offset : offset + size], dtype=dtype), dtype, shape),
            size,
        )
    if "data" in tensor:
        return name, to_array(name, tensor.get("data"), dtype, shape), 0
    raise bad_request(f"input {name!r}: give 'data' or parameters.binary_data_size")


def check_binary_size(name: str, size: Any, dtype: np.dtype, available: int) -> None:
    if type(size) is not int or size < 0:
        raise bad_request(f"input {name!r}: binary_data_size must be a non-negative integer")
    if size % dtype.itemsize:
        raise bad_request(
            f"input {name!r}: binary_data_size {size} is not a multiple of {dtype.itemsize} bytes"
        )
    if size > available:
        raise bad_request(f"input {name!r}: binary_data_size {size} exceeds the binary data sent")


def split_v2_request(body: bytes, header_length: str | None, max_values: int) -> tuple[Any, bytes]:
    """The JSON part (a simdjson document, see serve.jsonbody) and the binary part of a V2 request."""
    if header_length is None:
        json_part, binary = body, b""
    else:
        if not (header_length.isascii() and header_length.isdigit() and len(header_length) <= 18) or int(
            header_length
        ) > len(body):
            raise bad_request(
                f"{HEADER_LENGTH} must be the byte length of the JSON part, received {header_length[:40]!r}"
            )
        json_part, binary = body[: int(header_length)], body[int(header_length) :]
    check_values(json_part, max_values, "this model")
    request = document(json_part)
    if not isinstance(request, simdjson.Object):
        raise bad_request("the request must be a JSON object")
    return request, binary


def requested_outputs(request: Any, model: LoadedModel) -> list[tuple[str, bool, int]]:
    """(output name, as binary, classes asked) triples, in the order the client asked (all outputs by
    default); classes asked is the top k of the classification extension, 0 for the values. An output
    asked for twice is refused, as Triton refuses it: each copy would repeat the whole tensor, so a
    140 KB request naming one output 5,000 times was answered with 300 MB (1.1 GB in the worker)."""
    everything_binary = bool(parameters(request, "the request").get("binary_data_output", False))
    asked = request.get("outputs") if has(request, "outputs") else None
    names = [spec["name"] for spec in model.outputs]
    if not asked:
        return [(name, everything_binary, 0) for name in names]
    result: list[tuple[str, bool, int]] = []
    for output in asked:
        name = tensor_name(output.get("name") if isinstance(output, JsonObject) else None, "an output", names)
        if name not in names:
            raise bad_request(f"model {model.name} has no output {echoed(name)}; outputs: {names}")
        if any(name == given for given, _, _ in result):
            raise bad_request(f"output {name!r} is asked for twice: ask for each output once")
        options = parameters(output, f"output {name!r}")
        binary = bool(options.get("binary_data", everything_binary))
        result.append((str(name), binary, classification.class_count(options, str(name))))
    return result


def encode_v2_response(
    model: LoadedModel, request: Any, outputs: dict[str, np.ndarray], requested: list[tuple[str, bool, int]]
) -> tuple[dict, bytes]:
    """The response document and its binary outputs; `requested`: what requested_outputs read."""
    tensors, chunks = [], []
    for name, as_binary, classes in requested:
        if classes:
            labels = classification.labels_of(model.metadata, name)
            tensor, raw = classification.tensor(name, outputs[name], classes, labels, as_binary)
            tensors.append(tensor)
            chunks.append(raw)
            continue
        values = np.ascontiguousarray(outputs[name], dtype=np.float32)
        tensor = {"name": name, "datatype": "FP32", "shape": list(values.shape)}
        if as_binary:
            raw = values.astype("<f4").tobytes()
            tensor["parameters"] = {"binary_data_size": len(raw)}
            chunks.append(raw)
        else:
            tensor["data"] = values.ravel().tolist()
        tensors.append(tensor)
    response = {"model_name": model.name, "model_version": str(model.version), "outputs": tensors}
    identifier = request_id(request)
    if identifier is not None:
        response["id"] = identifier
    return response, b"".join(chunks)


def decode_tfserving(
    request: dict, model: LoadedModel, booleans: bool = True
) -> tuple[dict[str, np.ndarray], str]:
    """Feeds and the format ('row' for instances, 'columnar' for inputs). As in TF Serving, the nesting
    of each input's values is its shape: [rows, *the input's shape] (no silent reshape). `booleans`: the
    body may hold true or false (serve.jsonbody.holds_booleans)."""
    names = [s["name"] for s in model.inputs]
    if "instances" in request and "inputs" in request:  # which one the client meant is anyone's guess
        raise bad_request("send either 'instances' (row format) or 'inputs' (columnar format), not both")
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
        shape = expected_shape(spec, rows)
        feeds[name] = check_finite(name, to_array(name, columns[name], dtype, shape, True, booleans))
    return feeds, form
