"""PL/SQL literals of the generated scripts: BINARY_FLOAT and BINARY_DOUBLE values, arrays built by `append`
calls of a few hundred values each (far below any parser limit), and long text as a CLOB of bounded
literals."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from nnsql.text import printable

from ..codegen.sqltext import literal
from ..errors import ExportError

LITERAL_CHARACTERS = 8_000  # per literal of a long text: within PL/SQL's 32,767 bytes in any charset
VALUES_PER_CALL = 400  # constructor arguments per append call: far below any parser limit


def script_literal(text: str) -> str:
    """A string literal that stays on its line of a script SQL*Plus runs. SQL*Plus reads a script line by
    line whatever the quotes: inside a block, a line of "." alone ends it unrun and the next line is
    one of its own commands (`HOST rm ...` runs a shell command), a line of "/" alone runs what came
    before. So a text holding a line break or another control character is refused in one line; texts
    only shown (a path) are written escaped (nnsql.text.printable) before they come here."""
    found = next((character for character in text if not character.isprintable()), None)
    if found is not None:
        raise ExportError(
            f"refusing to write {printable(text[:80])!r} into an Oracle script: it holds {found!r}, which "
            "would end its line there (SQL*Plus reads scripts line by line)"
        )
    return literal(text)


def script_lines(text: str) -> str:
    """`text`, generated code that one literal carries over several lines of a script (entry_literal), if
    SQL*Plus reads none of its lines as its own: "." or "/" alone (ends the block unrun, or runs it), or
    a line opening with "#" (SQLPREFIX: run at once as a SQL*Plus command, inside a block too); a line
    holding another control character is refused as script_literal refuses it."""
    for line in text.split("\n"):
        stripped = line.strip()
        found = next(
            (character for character in line if not (character.isprintable() or character == "\t")), None
        )
        if stripped in (".", "/") or stripped.startswith("#") or found is not None:
            raise ExportError(
                f"refusing to write the line {printable(line[:80])!r} into an Oracle script: SQL*Plus "
                "would read it as a command of its own"
            )
    return text


def float_literal(value: float) -> str:
    """A BINARY_FLOAT literal that round-trips float32 exactly (9 significant digits)."""
    return "0f" if value == 0 else f"{float(value):.9g}f"


def array_calls(values: np.ndarray, target: str) -> Iterator[str]:
    for start in range(0, len(values), VALUES_PER_CALL):
        items = ", ".join(float_literal(v) for v in values[start : start + VALUES_PER_CALL])
        yield f"    append({target}, UTL_NLA_ARRAY_FLT({items}));"


APPEND = """    PROCEDURE append(p_target IN OUT NOCOPY UTL_NLA_ARRAY_FLT, p_values IN UTL_NLA_ARRAY_FLT) IS
    BEGIN
        FOR i IN 1 .. p_values.COUNT LOOP p_target.EXTEND; p_target(p_target.COUNT) := p_values(i); END LOOP;
    END append;"""


def double_literal(value: float) -> str:
    """A BINARY_DOUBLE literal; NaN (a fully masked average's) as PL/SQL's constant."""
    return "BINARY_DOUBLE_NAN" if np.isnan(value) else f"{float(value)!r}d"


def doubles(values: Iterable[float]) -> str:
    return f"UTL_NLA_ARRAY_DBL({', '.join(double_literal(v) for v in values)})"


def entry_literal(script: str) -> str:
    """One statement of the entry package (its script's text without the comment lines that lead it and
    the SQL*Plus terminator) as a PL/SQL CLOB expression, which EXECUTE IMMEDIATE runs: string literals of
    at most LITERAL_CHARACTERS joined, so that a model of many outputs fits too."""
    lines = script.strip().splitlines()
    while lines and lines[0].startswith("--"):
        lines.pop(0)
    if lines and lines[-1].strip() == "/":
        lines.pop()
    text = script_lines("\n".join(lines))
    pieces = [
        literal(text[start : start + LITERAL_CHARACTERS]) for start in range(0, len(text), LITERAL_CHARACTERS)
    ]
    return " ||\n            ".join([f"TO_CLOB({pieces[0]})", *pieces[1:]])
