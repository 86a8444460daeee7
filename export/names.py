"""Validation of user-supplied identifiers (model names) before any database is touched."""

from __future__ import annotations

import re

from .errors import InvalidName

_PLAIN_IDENTIFIER = re.compile(r"[a-z][a-z0-9_]*")
# Schemas the tool itself owns or that databases reserve; a model may not take them.
RESERVED = frozenset(
    {"nnsql", "main", "public", "information_schema", "pg_catalog", "temp", "sys", "system", "memory"}
)
# Words reserved by PostgreSQL and DuckDB (one parser family) or by Oracle: a schema, macro, struct field
# or variable of that name needs quoting everywhere, so models may not take them and layers are renamed.
SQL_KEYWORDS = frozenset(
    """
    access add all alter analyse analyze and any array as asc asymmetric audit authorization between
    binary both by case cast char check cluster collate column comment compress concurrently connect
    constraint create cross current current_catalog current_date current_role current_schema
    current_time current_timestamp current_user date decimal default deferrable delete desc describe
    distinct do drop else end except exclusive exists false fetch file float for foreign freeze from
    full grant group having identified ilike immediate in increment index initial initially inner insert
    integer intersect into is isnull join lambda lateral leading left level like limit localtime
    localtimestamp lock long maxextents minus mlslabel mode modify natural noaudit nocompress not
    notfound notnull nowait null number of offline offset on online only option or order outer overlaps
    pctfree pivot pivot_longer pivot_wider placing primary prior privileges public qualify raw
    references rename resource returning revoke right row rowid rownum rows select session session_user
    set share show similar size smallint some start successful summarize symmetric synonym sysdate
    system_user table tablesample then to trailing trigger true uid union unique unpivot update user
    using validate values varchar varchar2 variadic verbose view when whenever where window with
    """.split()  # noqa: SIM905 (a word list is easier to read and to extend as text)
)


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
    if name in SQL_KEYWORDS:
        raise InvalidName(f"invalid {what} {name!r}: an SQL keyword, choose another (e.g. {name}_model)")
    return name
