"""Validation of user-supplied identifiers (model names) before any database is touched."""

from __future__ import annotations

import re

from export.errors import InvalidName

_PLAIN_IDENTIFIER = re.compile(r"[a-z][a-z0-9_]*")
# Schemas the tool itself owns or that databases reserve; a model may not take them.
RESERVED = frozenset({"nnsql", "main", "public", "information_schema", "pg_catalog", "temp", "sys"})


def check_model_name(name: str, *, max_length: int = 63, what: str = "model name") -> str:
    """Return `name` if it is a lower-case plain identifier, else raise `InvalidName`."""
    if not _PLAIN_IDENTIFIER.fullmatch(name or ""):
        raise InvalidName(
            f"invalid {what} {name!r}: use a plain identifier "
            "(lower-case letter first, then letters, digits or _), e.g. mnist"
        )
    if len(name) > max_length:
        raise InvalidName(f"invalid {what} {name!r}: at most {max_length} characters")
    if name in RESERVED or name.startswith("pg_"):
        raise InvalidName(f"invalid {what} {name!r}: reserved, choose another")
    return name
