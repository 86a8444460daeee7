"""Text someone else chose (a bucket key, a path a log names) on one line of a terminal."""

from __future__ import annotations


def printable(text: str) -> str:
    """`text` with every line break, control character and terminal escape shown escaped (`\\x1b`), so
    it can neither start a line of its own nor drive the terminal that shows it."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
