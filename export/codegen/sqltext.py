"""Small helpers for writing SQL text safely: literals are quoted here, never by hand."""

from __future__ import annotations


def literal(text: str) -> str:
    """A SQL string literal (single quotes doubled)."""
    return "'" + text.replace("'", "''") + "'"
