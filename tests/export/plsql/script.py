"""SQL*Plus scripts as units: a PL/SQL unit (CREATE PACKAGE [BODY], DECLARE, BEGIN) runs to a line
holding only `/`; a SQL statement to its `;`; SQL*Plus commands (WHENEVER, SET, VARIABLE, @@, PROMPT,
EXEC) are one line."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

PLSQL_START = re.compile(
    r"(DECLARE|BEGIN|CREATE\s+(OR\s+REPLACE\s+)?(PACKAGE|PROCEDURE|FUNCTION|TYPE))\b", re.I
)
COMMAND = re.compile(r"(WHENEVER|SET|VARIABLE|VAR|PROMPT|REM|SPOOL|EXIT|EXEC|EXECUTE|@@?)(\s|$|\w)", re.I)


@dataclass(frozen=True)
class Unit:
    kind: str  # plsql, sql or command
    text: str
    line: int


def units(script: str) -> Iterator[Unit]:
    lines = script.splitlines()
    index = 0
    while index < len(lines):
        stripped = lines[index].strip()
        if not stripped or stripped.startswith("--") or stripped == "/":
            index += 1
            continue
        start = index
        if PLSQL_START.match(stripped):
            while index < len(lines) and lines[index].strip() != "/":
                index += 1
            yield Unit("plsql", "\n".join(lines[start:index]), start + 1)
            index += 1
        elif COMMAND.match(stripped):
            yield Unit("command", stripped, start + 1)
            index += 1
        else:
            while not lines[index].rstrip().endswith(";"):
                index += 1
            yield Unit("sql", "\n".join(lines[start : index + 1]), start + 1)
            index += 1
