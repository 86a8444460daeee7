"""Lays out generated SQL so that a reviewer can read its diff: lines longer than a width are broken at
their brackets, one comma-separated item per line, nested by four spaces (the layout of a Lisp pretty
printer). Only white space changes: string literals and quoted names are never split, and no blank line
or lone `/` line is produced, so the text means the same to every SQL client.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

WIDTH = 110
PAIRS = {"(": ")", "[": "]", "{": "}"}
TOKEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|[()\[\]{},]|[^'\"()\[\]{},]+")


@dataclass
class Group:
    """A bracketed run of a line: its opening bracket, its parts and its closing bracket."""

    opener: str
    parts: list[Group | str] = field(default_factory=list)
    closer: str = ""

    def flat(self) -> str:
        return self.opener + "".join(flat(part) for part in self.parts) + self.closer


def flat(part: Group | str) -> str:
    return part.flat() if isinstance(part, Group) else part


def parse(line: str) -> list[Group | str]:
    """The line as atoms and groups; a bracket left open at the end of the line stays a plain atom."""
    root = Group("")
    stack = [root]
    for token in TOKEN.findall(line):
        if token in PAIRS:
            stack.append(Group(token))
        elif token in PAIRS.values() and len(stack) > 1 and PAIRS[stack[-1].opener] == token:
            group = stack.pop()
            group.closer = token
            stack[-1].parts.append(group)
        else:
            stack[-1].parts.append(token)
    while len(stack) > 1:  # unclosed: splice the opener and its parts back into the parent
        group = stack.pop()
        stack[-1].parts.extend([group.opener, *group.parts])
    return root.parts


def items(parts: list[Group | str]) -> list[list[Group | str]]:
    """Split a group's parts at its own commas (not nested ones)."""
    result: list[list[Group | str]] = [[]]
    for part in parts:
        if part == ",":
            result.append([])
        else:
            result[-1].append(part)
    return result


def lay_out(parts: list[Group | str], indent: int, column: int, width: int) -> str:
    """Render parts that start at `column` on a line indented by `indent`."""
    out: list[str] = []
    for part in parts:
        text = flat(part)
        if isinstance(part, str) and column + len(text) > width and not text.startswith(("'", '"')):
            text, column = word_wrap(text, indent + 4, column, width)
            out.append(text)
            continue
        if isinstance(part, str) and column + len(text) > width and column > indent + 4:
            out[-1:] = [out[-1].rstrip(" ")] if out else []  # a quoted literal starts the next line
            out.append("\n" + " " * (indent + 4) + text)
            column = indent + 4 + len(text)
            continue
        if isinstance(part, str) or column + len(text) <= width:
            out.append(text)
            column += len(text)
            continue
        inner = indent + 4
        rows = []
        for item in items(part.parts):
            if item and isinstance(item[0], str):
                item = [item[0].lstrip(), *item[1:]]
            rows.append(" " * inner + lay_out(item, inner, inner, width))
        out.append(part.opener + "\n" + ",\n".join(rows) + "\n" + " " * indent + part.closer)
        column = indent + len(part.closer)
    return "".join(out)


def word_wrap(text: str, indent: int, column: int, width: int) -> tuple[str, int]:
    """Break a run without brackets or quotes at its spaces; returns the text and the column it ends at."""
    out = []
    for index, word in enumerate(text.split(" ")):
        if index and column + 1 + len(word) > width and column > indent:
            out.append("\n" + " " * indent)
            column = indent
        elif index:
            out.append(" ")
            column += 1
        out.append(word)
        column += len(word)
    return "".join(out), column


def wrap_line(line: str, width: int = WIDTH) -> str:
    if len(line) <= width or line.lstrip().startswith("--"):
        return line
    indent = len(line) - len(line.lstrip(" "))
    return " " * indent + lay_out(parse(line.lstrip(" ")), indent, indent, width)


def wrap(text: str, width: int = WIDTH) -> str:
    """Every line of `text` no longer than `width` where brackets allow it."""
    return "\n".join(wrap_line(line, width) for line in text.split("\n"))
