"""Tokens of the PL/SQL and SQL text nnsql generates: words, numbers (with Oracle's `f`/`d` suffixes for
BINARY_FLOAT/BINARY_DOUBLE literals), strings ('...' with '' and q'[...]'), bind variables and operators.
Comments (`--` and `/* */`) are dropped."""

from __future__ import annotations

import re
from typing import NamedTuple

TOKEN = re.compile(
    r"""
    (?P<space>\s+|--[^\n]*|/\*.*?\*/)
  | (?P<qstring>[qQ]'(?:\[.*?\]|\{.*?\}|\(.*?\)|<.*?>|!.*?!)')
  | (?P<string>'(?:[^']|'')*')
  | (?P<number>(?:\d+(?:\.(?!\.)\d*)?|\.\d+)(?:[eE][-+]?\d+)?[fFdD]?(?!\w))
  | (?P<bind>:[A-Za-z]\w*)
  | (?P<word>[A-Za-z][\w$#]*|"[^"]+"|\$\$[A-Za-z_]+)
  | (?P<op>:=|=>|\.\.|\|\||<>|!=|\^=|~=|<=|>=|[-+*/(),;.<>=%@])
  | (?P<bad>.)
    """,
    re.VERBOSE | re.DOTALL,
)


class Token(NamedTuple):
    kind: str  # word, number, string, bind, op, end
    text: str  # words upper-cased, strings unquoted
    line: int


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    append, line = tokens.append, 1
    for match in TOKEN.finditer(text):
        kind, value = match.lastgroup, match.group()
        if kind == "space":
            line += value.count("\n")
            continue
        if kind == "bad":
            raise SyntaxError(f"line {line}: unexpected character {value!r}")
        if kind == "word":
            append(Token("word", value.strip('"').upper(), line))
        elif kind == "string":
            append(Token("string", value[1:-1].replace("''", "'"), line))
            line += value.count("\n")
        elif kind == "qstring":
            append(Token("string", value[3:-2], line))
            line += value.count("\n")
        elif kind == "bind":
            append(Token("bind", value[1:].upper(), line))
        else:
            append(Token(str(kind), value, line))
    tokens.append(Token("end", "", line))
    return tokens
