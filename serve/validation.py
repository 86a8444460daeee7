"""What makes a version directory servable: a metadata.json of the right form that agrees with its ONNX
graph. A version that fails is never served; the one before it keeps serving."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import Any

import numpy as np

from nnsql.export.onnx.fileformat import KINDS

# KServe V2 datatypes and their little-endian numpy forms: what a version may declare and a request send.
V2_DATATYPES: dict[str, np.dtype] = {
    "BOOL": np.dtype("bool"),
    "UINT8": np.dtype("<u1"),
    "UINT16": np.dtype("<u2"),
    "UINT32": np.dtype("<u4"),
    "UINT64": np.dtype("<u8"),
    "INT8": np.dtype("<i1"),
    "INT16": np.dtype("<i2"),
    "INT32": np.dtype("<i4"),
    "INT64": np.dtype("<i8"),
    "FP16": np.dtype("<f2"),
    "FP32": np.dtype("<f4"),
    "FP64": np.dtype("<f8"),
}


# Labels are echoed in every classification answer (top-k of each row): a label of a megabyte, or
# millions of them, would make small requests cost large answers. nnsql export writes at most 200
# characters; Triton's own label files hold short names.
MAX_LABEL_CHARS = 256
MAX_LABELS = 100_000
# Unicode categories no label may hold: control characters (NUL, line breaks, terminal escapes), format
# characters (bidirectional overrides) and line or paragraph separators. The exporter refuses the same.
UNPRINTABLE = ("Cc", "Cf", "Zl", "Zp")


class InvalidVersion(ValueError):
    """The version's files are there but cannot be served; the message says why, in one line."""


class NotSettled(InvalidVersion):
    """A file without a recorded sha256 changed since it was found settled: tried again once it settles."""


def check_labels(labels: Any, where: str) -> list[str]:
    """Class labels as a version may declare them: strings, at most MAX_LABELS of at most
    MAX_LABEL_CHARS characters each, with no control character; InvalidVersion naming the first bad one."""
    if not isinstance(labels, list) or not all(isinstance(label, str) for label in labels):
        raise InvalidVersion(f"{where} must be a list of strings")
    if len(labels) > MAX_LABELS:
        raise InvalidVersion(f"{where} holds {len(labels)} labels, more than {MAX_LABELS}")
    for index, label in enumerate(labels):
        if len(label) > MAX_LABEL_CHARS:
            raise InvalidVersion(f"{where}: label {index} is longer than {MAX_LABEL_CHARS} characters")
        if any(unicodedata.category(character) in UNPRINTABLE for character in label):
            raise InvalidVersion(f"{where}: label {index} holds a control character")
    return labels


def check_tensor_specs(specs: Any, role: str) -> list[dict]:
    if not isinstance(specs, list) or not specs:
        raise InvalidVersion(f"metadata '{role}' must be a non-empty list")
    seen: set[str] = set()
    for spec in specs:
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            raise InvalidVersion(f"every metadata '{role}' entry needs a string 'name'")
        if spec["name"] in seen:  # a request's tensor would match either: never the last one silently
            raise InvalidVersion(f"{role.removesuffix('s')} {capped_name(spec['name'])} is declared twice")
        seen.add(spec["name"])
        shape = spec.get("shape")
        if not isinstance(shape, list) or not all(type(d) is int and d >= -1 for d in shape):
            raise InvalidVersion(f"{role} {spec['name']!r}: 'shape' must be a list of integers (-1 for any)")
        if spec.get("datatype") not in V2_DATATYPES:
            raise InvalidVersion(f"{role} {spec['name']!r}: unknown datatype {spec.get('datatype')!r}")
    return specs


def capped_name(name: str) -> str:
    """A tensor name quoted in a reason: escaped, and at most 60 characters of it."""
    return repr(name[:60] + ("..." if len(name) > 60 else ""))


def onnx_shape(argument: Any) -> list[int]:
    """An onnxruntime NodeArg's shape, symbolic dimensions as -1."""
    return [d if isinstance(d, int) else -1 for d in argument.shape]


def agree(specs: list[dict], arguments: list[Any], role: str) -> None:
    graph = {argument.name: onnx_shape(argument) for argument in arguments}
    for spec in specs:
        if spec["name"] not in graph:
            raise InvalidVersion(f"{role} {spec['name']!r} is not in the ONNX graph ({sorted(graph)})")
        declared, actual = spec["shape"][1:], graph[spec["name"]][1:]
        fits = len(declared) == len(actual) and all(
            a in (-1, d) for d, a in zip(declared, actual, strict=True)
        )
        if not fits:
            raise InvalidVersion(
                f"{role} {spec['name']!r}: metadata shape {spec['shape']} disagrees with ONNX"
            )


def check_version(metadata: Any, session: Any) -> dict:
    """The metadata, checked in form and against the session's graph; InvalidVersion otherwise."""
    if not isinstance(metadata, dict):
        raise InvalidVersion("metadata.json must hold an object")
    inputs = check_tensor_specs(metadata.get("inputs"), "inputs")
    outputs = check_tensor_specs(metadata.get("outputs"), "outputs")
    output_labels = metadata.get("output_labels", {})  # a Triton model's label files
    if not isinstance(output_labels, dict):
        raise InvalidVersion("metadata 'output_labels' must map output names to their labels")
    for output, labels in output_labels.items():
        check_labels(labels, f"the labels of output {capped_name(output)}")
    check_labels(metadata.get("classes", []), "metadata 'classes'")
    kinds = metadata.get("output_kinds", ["probabilities"] * len(outputs))
    if not isinstance(kinds, list) or len(kinds) != len(outputs) or any(k not in KINDS for k in kinds):
        raise InvalidVersion(f"metadata 'output_kinds' must list one of {', '.join(KINDS)} per output")
    if metadata.get("kind", KINDS[0]) not in KINDS:
        raise InvalidVersion(f"metadata 'kind' must be one of {', '.join(KINDS)}")
    threshold = metadata.get("threshold", 0.5)
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0 <= threshold <= 1:
        raise InvalidVersion("metadata 'threshold' must be a number from 0 to 1")
    agree(inputs, session.get_inputs(), "input")
    agree(outputs, session.get_outputs(), "output")
    return metadata


# A declared -1 (a variable length, e.g. time steps) accepts 1 to this many; the request size limits
# count it at this length.
MAX_VARIABLE_LENGTH = 1024


def bounded(shape: Sequence[int]) -> list[int]:
    """The shape with every variable dimension at its largest accepted length."""
    return [MAX_VARIABLE_LENGTH if d == -1 else int(d) for d in shape]
