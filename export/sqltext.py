"""Small helpers for writing SQL text safely: literals are quoted here, never by hand."""

from __future__ import annotations

from collections.abc import Iterable


def literal(text: str) -> str:
    """A SQL string literal (single quotes doubled)."""
    return "'" + text.replace("'", "''") + "'"


def string_list(items: Iterable[str]) -> str:
    """A bracketed list of string literals, e.g. ['0', '1'] (DuckDB list syntax)."""
    return "[" + ", ".join(literal(item) for item in items) + "]"
