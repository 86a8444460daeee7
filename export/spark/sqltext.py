"""Spark SQL text: string literals, calls and weights written as JSON."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import numpy as np


def literal(text: str) -> str:
    """A Spark SQL string literal: Spark reads backslash escapes in quotes, so both are escaped."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def identifier(name: str) -> str:
    """A back-quoted identifier (backquotes doubled)."""
    return "`" + name.replace("`", "``") + "`"


def call(function: str, arguments: Iterable[str]) -> str:
    return f"{function}({', '.join(arguments)})"


def plain(value: Any) -> Any:
    """Numpy arrays and numbers as JSON's lists and numbers; float64 `repr` round-trips exactly."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def weights_json(values: Any) -> str:
    """Weights as compact JSON for `from_json` (NaN and infinity are refused before: weights are finite)."""
    return json.dumps(plain(values), separators=(",", ":"), allow_nan=False)
