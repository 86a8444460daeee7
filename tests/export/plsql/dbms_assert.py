"""DBMS_ASSERT's name checks as Oracle documents them (PL/SQL Packages and Types Reference, DBMS_ASSERT):
SIMPLE_SQL_NAME returns its argument when it is a simple SQL name — a letter, then letters, digits,
`_`, `$` or `#`; or a name in double quotes whose own quotes are doubled — with any white space around
it; ENQUOTE_NAME encloses a name in double quotes unless it is quoted already (upper-cased first when
`capitalize`, the default) and checks that the result is a valid quoted name. Anything else raises
ORA-44003: invalid SQL name."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tests.export.plsql.values import ora

UNQUOTED = re.compile(r"[A-Za-z][A-Za-z0-9_$#]*")
QUOTED = re.compile(r'"(?:[^"]|"")+"', re.S)


def invalid() -> Exception:
    return ora(-44003, "invalid SQL name")


def simple_sql_name(text: Any) -> str:
    if not isinstance(text, str):
        raise invalid()
    name = text.strip()
    if not (UNQUOTED.fullmatch(name) or QUOTED.fullmatch(name)):
        raise invalid()
    return text


def enquote_name(text: Any, capitalize: Any = True) -> str:
    if not isinstance(text, str):
        raise invalid()
    if len(text) >= 2 and text.startswith('"') and text.endswith('"'):
        quoted = text
    else:
        quoted = f'"{text.upper() if capitalize else text}"'
    if not QUOTED.fullmatch(quoted):
        raise invalid()
    return quoted


def schema_name(text: Any, schemas: set[str]) -> str:
    if text not in schemas:
        raise ora(-44001, "invalid schema")
    return text


FUNCTIONS: dict[str, Callable[..., str]] = {
    "SIMPLE_SQL_NAME": simple_sql_name,
    "ENQUOTE_NAME": enquote_name,
}


def dbms_assert_call(compiler: Any, name: str, args: list) -> Callable[[], str]:
    """DBMS_ASSERT.<name>(args) with positional arguments; SCHEMA_NAME knows the session's schema (and
    SYS, PUBLIC) as the schemas that exist."""
    if name == "SCHEMA_NAME":
        (value,) = [compiler.expression(arg) for _, arg in args]
        schemas = {compiler.session.schema, "SYS", "PUBLIC"}
        return lambda: schema_name(value(), schemas)
    if name not in FUNCTIONS:
        raise ora(-6550, f"PLS-00302: component '{name}' must be declared")
    function, values = FUNCTIONS[name], [compiler.expression(arg) for _, arg in args]
    return lambda: function(*(value() for value in values))
