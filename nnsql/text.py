"""Text someone else chose (a layer's or a class's name, a bucket key, a model directory, a path a log
names) on one line of a terminal or a log: the exporter, the trainer and the scorer all show it this way."""

from __future__ import annotations


def printable(text: str) -> str:
    """`text` with every line break, control character and terminal escape shown escaped (`\\x1b`), so
    it can neither start a line of its own (forge a log line) nor drive the terminal that shows it."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
