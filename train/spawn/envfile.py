"""`--env-file`: variables for every worker, read with python-dotenv's rules (quotes, `export`, comments
after a value, escapes in double quotes), as Docker Compose and most tools read a `.env` file. Values are
taken literally (no `${VAR}` expansion from this machine's environment).

A line dotenv cannot parse, a line without `=`, and a name spawn sets itself (NNSQL_OUTPUT_DIR,
TF_CONFIG, ...: manifests.RESERVED_ENV) are refused with one line naming the file and line, and the
variable when the line starts with a name: never its value, which may be a secret. A line without `=`
is not shown at all: dotenv reads it as a name, but it is as often a value on a line of its own.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

from .manifests import RESERVED_ENV


def read(path: Path) -> dict[str, str]:
    """The file's NAME=value pairs; ValueError naming the line of the first problem."""
    from dotenv.parser import parse_stream  # the [train] extra: `nnsql spawn --help` runs without it

    values: dict[str, str] = {}
    for binding in parse_stream(io.StringIO(path.read_text())):
        line = binding.original.line
        if binding.error:
            raise ValueError(f"{path}:{line}: expected NAME=value{unparsed(binding.original.string)}")
        if binding.key is None:  # a comment or a blank line
            continue
        if binding.value is None:  # the whole line, which may be a secret (a value on a line of its own)
            raise ValueError(
                f"{path}:{line}: expected NAME=value; the line has no '=' "
                "(it is not shown: it may hold a secret)"
            )
        if binding.key in RESERVED_ENV:
            hint = "; choose the Keras with --keras" if binding.key == "TF_USE_LEGACY_KERAS" else ""
            raise ValueError(f"{path}:{line}: {binding.key} is set by spawn and cannot be overridden{hint}")
        values[binding.key] = binding.value
    return values


def unparsed(text: str) -> str:
    """What a line dotenv cannot parse sets, by name only (an unterminated quote would otherwise show
    the secret that follows it)."""
    name = re.match(r"\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.-]*)\s*=", text)
    if name is None:
        return " (the line is not shown: it may hold a secret)"
    return f" in the line that sets {name[1]} (its value is not shown)"
