"""Progress bars in a worker's output: Keras redraws its bar with `\\r` (and `\\b`) on one line, even into
a file, so an epoch of 469 steps is 469 updates. Read as lines, each update would be a line of its own;
here a line is what a terminal would finally show: its last redraw."""

from __future__ import annotations

import sys

BACKSPACE = "\b"


def final_state(line: str) -> str:
    """The last non-empty redraw of one line (the text after its last carriage return)."""
    redraws = [part.replace(BACKSPACE, "") for part in line.split("\r")]
    shown = [part for part in redraws if part.strip()]
    return shown[-1].rstrip() if shown else ""


def final_states(text: str) -> list[str]:
    """Every newline-ended line of `text` as a terminal would leave it; a redraw is not a new line."""
    return [final_state(line) for line in text.split("\n")]


def collapsed(text: str) -> str:
    """`text` with each line's redraws replaced by its last state (as `logs RUN` shows a log)."""
    return "\n".join(final_states(text))


def terminal_line(text: str) -> None:
    """Redraw the live line of a terminal with `text` (an empty `text` clears it)."""
    sys.stdout.write(f"\r\x1b[K{text}")
    sys.stdout.flush()
