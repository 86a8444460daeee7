"""Tokens of the PL/SQL and SQL text nnsql generates: words, numbers (with Oracle's `f`/`d` suffixes for
BINARY_FLOAT/BINARY_DOUBLE literals), strings ('...' with '' and q'[...]'), bind variables and operators.
Comments (`--` and `/* */`) are dropped."""

from __future__ import annotations

import re
from dataclasses import dataclass

TOKEN = re.compile(
    r"""
    (?P<space>\s+|--[^\n]*|/\*.*?\*/)
  | (?P<string>'(?:[^']|'')*')
  | (?P<number>(?:\d+(?:\.(?!\.)\d*)?|\.\d+)(?:[eE][-+]?\d+)?[fFdD]?(?!\w))
  | (?P<bind>:[A-Za-z]\w*)
  | (?P<word>[A-Za-z][\w$#]*|"[^"]+")
  | (?P<op>:=|=>|\.\.|\|\||<>|!=|\^=|~=|<=|>=|[-+*/(),;.<>=%@])
    """,
    re.VERBOSE | re.DOTALL,
)
CLOSERS = {"[": "]", "{": "}", "(": ")", "<": ">", "!": "!"}


@dataclass(frozen=True)
class Token:
    kind: str  # word, number, string, bind, op, end
    text: str  # words upper-cased, strings unquoted
    line: int


def quoted(text: str, start: int) -> tuple[str, int] | None:
    """A q'[...]' string at start: its body and where it ends."""
    if text[start] not in "qQ" or text[start + 1 : start + 2] != "'" or start + 2 >= len(text):
        return None
    opener = text[start + 2]
    if opener not in CLOSERS:
        return None
    end = text.find(CLOSERS[opener] + "'", start + 3)
    if end < 0:
        raise SyntaxError(f"unterminated q-quoted string at offset {start}")
    return text[start + 3 : end], end + 2


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    position, line = 0, 1
    while position < len(text):
        found = quoted(text, position)
        if found is not None:
            body, end = found
            tokens.append(Token("string", body, line))
        else:
            match = TOKEN.match(text, position)
            if match is None:
                raise SyntaxError(f"line {line}: unexpected character {text[position]!r}")
            end = match.end()
            kind = match.lastgroup
            value = match.group()
            if kind == "string":
                tokens.append(Token("string", value[1:-1].replace("''", "'"), line))
            elif kind == "word":
                tokens.append(Token("word", value.strip('"').upper(), line))
            elif kind == "bind":
                tokens.append(Token("bind", value[1:].upper(), line))
            elif kind in ("number", "op"):
                tokens.append(Token(kind, value, line))
        line += text.count("\n", position, end)
        position = end
    tokens.append(Token("end", "", line))
    return tokens
