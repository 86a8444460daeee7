"""The classification extension of KServe V2 / Triton: an output asked for with the parameter
`classification: k` (tritonclient's `class_count=k`) is answered as a BYTES tensor of rows × k strings
`score:index:label`, the k largest values of each row first, formatted as Triton formats them (the
value with six decimals, C's `%f`, or as an integer for integer outputs; `:label` only when the output
has labels: its config.pbtxt label_filename, or the classes of the model's metadata for the first
output).
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from .errors import bad_request

MAX_CLASS_COUNT = 1 << 16


def class_count(options: dict, name: str) -> int:
    """The k an output's parameters ask for: 0 when they ask none, a 400 for anything but a whole
    number from 0 to MAX_CLASS_COUNT."""
    value = options.get("classification", 0)
    if type(value) is not int or not 0 <= value <= MAX_CLASS_COUNT:
        raise bad_request(
            f"output {name!r}: classification must be a whole number of classes from 0 to {MAX_CLASS_COUNT}"
        )
    return value


def labels_of(metadata: dict, output: str) -> list[str]:
    return list(metadata.get("output_labels", {}).get(output, [])) or (
        list(metadata.get("classes", [])) if output == metadata["outputs"][0]["name"] else []
    )


def top_k(values: np.ndarray, k: int, labels: list[str]) -> list[list[str]]:
    """Each row's k largest values as `score:index[:label]` strings, largest first (equal values in
    index order)."""
    rows = values.reshape(len(values), -1)
    integral = rows.dtype.kind in "iub"
    chosen = np.argsort(-rows.astype(np.float64), axis=1, kind="stable")[:, :k]
    answer = []
    for row, indexes in zip(rows, chosen, strict=True):
        strings = []
        for index in indexes.tolist():
            score = f"{int(row[index])}" if integral else f"{float(row[index]):f}"
            label = f":{labels[index]}" if index < len(labels) else ""
            strings.append(f"{score}:{index}{label}")
        answer.append(strings)
    return answer


def encode_bytes(strings: list[list[str]]) -> bytes:
    """A BYTES tensor in the binary form (each element: its length as 4 bytes little-endian, then its
    bytes), as the binary tensor extension and gRPC's raw_output_contents carry it."""
    parts = []
    for row in strings:
        for text in row:
            data = text.encode()
            parts.append(struct.pack("<I", len(data)) + data)
    return b"".join(parts)


def tensor(
    name: str, values: np.ndarray, k: int, labels: list[str], as_binary: bool
) -> tuple[dict[str, Any], bytes]:
    """The output tensor's document and its binary bytes (empty when sent as JSON data)."""
    strings = top_k(values, k, labels)
    shape = [len(strings), min(k, values[0].size if len(values) else 0)]
    document: dict[str, Any] = {"name": name, "datatype": "BYTES", "shape": shape}
    if not as_binary:
        document["data"] = [text for row in strings for text in row]
        return document, b""
    raw = encode_bytes(strings)
    document["parameters"] = {"binary_data_size": len(raw)}
    return document, raw
